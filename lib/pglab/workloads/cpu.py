"""CPU time shares of a host between two moments, from /proc/stat (pyperf-style environment capture).

On a virtual machine the hypervisor can take a large share of the CPU ("steal"): 30-40% was seen on
the 2-core machine this project was built on, with run-to-run tps swinging by 2x. Every measured
point records the shares during its run, so that a reader can tell a slow system from a slow moment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

from pglab.hosts import run_account
from pglab.hosts.base import Host
from pglab.machine_rules import OTHERS_MAX, busy_ok

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def sample(host: Host) -> dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat (clock ticks since boot); {} where there is none.

    {} too when the host cannot be read (its sshd died with it): the shares are a note on the point,
    and must never replace the point's own error with an SSH one.
    """
    try:
        text = host.read_text("/proc/stat")
    except Exception:  # noqa: BLE001
        return {}
    for line in text.splitlines():
        if line.startswith("cpu "):
            return dict(zip(FIELDS, (int(x) for x in line.split()[1:len(FIELDS) + 1]), strict=False))
    return {}


def shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Share of each field in the ticks between two samples (empty when either is missing)."""
    if not before or not after:
        return {}
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in FIELDS}
    total = sum(delta.values())
    return {k: round(v / total, 4) for k, v in delta.items()} if total > 0 else {}


STEAL_FLAG = 0.2  # a point whose hosts lost more than this share of CPU time to the hypervisor is flagged
BUSY_FLAG = OTHERS_MAX  # a point during which other processes took more of the machine's CPU is flagged
CLK_TCK = os.sysconf("SC_CLK_TCK")


def others(before: dict[str, int], after: dict[str, int], own_ns: int | None, kernel: int = 0) -> float | None:
    """The share of the machine's CPU that processes outside the run used between two samples: time in processes
    (user, nice, system; not interrupts, mostly the run's own I/O and traffic) less the run's own
    (``run_account``) and the kernel's threads' (``kernel`` ticks: writeback of the run's writes); None when the
    run's own is not known."""
    if own_ns is None or not before or not after:
        return None
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return None
    busy = delta["user"] + delta["nice"] + delta["system"] - kernel
    return round(max(0.0, busy / total - own_ns / 1e9 * CLK_TCK / total), 4)


def loadavg(host: Host) -> float | None:
    """The 1-minute load average (runnable tasks), or None where /proc/loadavg is missing."""
    try:
        return float(host.read_text("/proc/loadavg").split()[0])
    except Exception:  # noqa: BLE001  (an unreachable host, as in ``sample``)
        return None


@contextlib.contextmanager
def during(hosts: Iterable[Host], point: Any) -> Iterator[None]:
    """Record each host's CPU shares (steal included) and load over the ``with`` body in ``point.meta``.

    Hosts that are one machine (lab namespaces) read the same /proc/stat; each is still listed by name.
    """
    hosts = list({h.name: h for h in hosts}.values())
    before = {h.name: sample(h) for h in hosts}
    own0 = run_account.usage_ns()
    k0 = run_account.kernel_ticks() if own0 is not None else 0
    try:
        yield
    finally:
        after = {h.name: sample(h) for h in hosts}
        own1 = run_account.usage_ns()
        own = own1 - own0 if own0 is not None and own1 is not None else None
        kernel = run_account.kernel_ticks() - k0 if own is not None else 0
        shares_by_host = {h.name: shares(before[h.name], after[h.name]) for h in hosts}
        point.meta["cpu"] = shares_by_host
        point.meta["load1"] = {h.name: loadavg(h) for h in hosts}
        steal = max((s.get("steal", 0.0) for s in shares_by_host.values()), default=0.0)
        point.meta["steal"] = steal
        point.meta["steal_flag"] = steal > STEAL_FLAG
        # others at low priority: nothing of a run is niced, so CPU time spent niced is another's (a build, a
        # sweep run "in the background"); a busy machine seen here showed as 28-54% nice
        niced = max((s.get("nice", 0.0) for s in shares_by_host.values()), default=0.0)
        point.meta["busy"] = niced
        # others at any priority, where the run's own CPU is counted (a local host): not judged on a run asked to
        # measure on a busy machine (``--busy-ok``: the whole run is marked already, as the test suite's are)
        # only where every host of the point is this machine, reached without SSH: a lab host's (or another SSH
        # host's) processes are started by its sshd, outside the run's group, and on one machine they would count
        # as others on the local host
        alone = all(h.is_local for h in hosts)
        seen = [o for h in hosts if alone and (o := others(before[h.name], after[h.name], own, kernel)) is not None]
        if seen:
            point.meta["others"] = max(seen)
        point.meta["busy_flag"] = niced > BUSY_FLAG or bool(seen and max(seen) > BUSY_FLAG and not busy_ok())
