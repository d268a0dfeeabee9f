"""The machine properties verdicts depend on, measured for the run and set beside the article's.

Why: on a 2-core VM with a fast virtual disk, "off is an order of magnitude faster than on" does not
hold because the disk flushes 4,000 times a second where the article's SATA disk flushed about 120
times; that is a difference of hardware, not a refutation. Each study's analysis passes the property a
claim depends on to its row (``claims.Machine``), and the row of comparison.csv shows the property here
and in the article, and what would answer the claim where this machine cannot. One policy for all five
studies (``claims.comparison_row``, docs/measurement.md "A machine unlike the article's"): a claim whose
property ``differs`` is not judged here; the verdict its interval gives is kept apart (``here_verdict``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pglab.analysis import fidelity, placement
from pglab.analysis.claims import Machine

#: a 7,200 rpm disk's write cache off: one flush per rotation at most (60 s / 7,200 = 8.3 ms)
SATA_FLUSHES_S = 120


def cores_here(manifest: dict[str, Any]) -> tuple[int, str]:
    """(machines, "1 machine of 2 cores") of a run."""
    hosts = manifest.get("hosts", {})
    cores = sorted({int(f["cores"]) for f in hosts.values() if isinstance(f, dict) and f.get("cores")})
    n = len(placement.machines(manifest)) or 1
    where = "1 machine" if n == 1 else f"{n} machines"
    return n, where + (f" of {'/'.join(map(str, cores))} cores" if cores else "")


def disk_flush(fsync: dict[str, Any] | None, emulated: str = "") -> Machine:
    """The flush rate of the primary's WAL disk (pg_test_fsync's fdatasync) against the article's SATA disk;
    ``emulated``: the flush emulation it ran under (``emulated_flush``), '' on this machine's own disk."""
    ops = (fsync or {}).get("fdatasync_ops_s")
    here = f"{ops:,.0f} fdatasync/s (pg_test_fsync)" if ops else "not measured (fsync_test_seconds = 0)"
    return Machine("disk flush rate (commit cost)", here + (f", {emulated}" if emulated else ""),
                   f"a SATA hard disk: at most about {SATA_FLUSHES_S} flushes/s (7,200 rpm; not measured there)",
                   "a primary whose WAL is on a hard disk (a few hundred flushes a second at most), where a "
                   "commit's flush dominates its cost (`emulate: flush_latency_ms: [hdd_7200]`, docs/emulation.md)",
                   differs=bool(ops and ops > 10 * SATA_FLUSHES_S), emulated=emulated)


def emulated_flush(manifest: dict[str, Any], level: str | None = None) -> str:
    """How a run's emulated flush is said in a verdict: 'emulated flush hdd_7200 (8.33 ms) on primary, probe
    116/s (CPU +87 us a flush)'; at ``level`` (a label of ``flush_levels``; default the last), '' when the run had
    none or was at this machine's own disk."""
    e = manifest.get("emulation") or {}
    levels = e.get("flush_levels") or []
    level = level or (levels[-1] if levels else None)
    parts = []
    for disk in (e.get("disks") or {}).values():
        m = (disk.get("levels") or {}).get(level)
        if m and m.get("latency_ms"):
            parts.append(f"emulated flush {level} on {', '.join(disk.get('nodes') or ['?'])}, probe "
                         f"{m['measured_ops_s']:,.0f}/s (CPU {m['cpu_us_per_flush']:+.0f} us a flush)")
    return "; ".join(parts)


def pinned_cores(manifest: dict[str, Any], nodes: list[str]) -> str:
    """'1 core per node on one machine (primary: CPU 0, standby1: CPU 1)' when each of ``nodes`` ran pinned to a
    CPU set of its own (``emulate: core_per_node``), else ''."""
    cores = (manifest.get("emulation") or {}).get("cores") or {}
    got = {n: (cores.get(n) or {}).get("cpus_allowed") for n in nodes}
    if not all(got.values()) or len(set(got.values())) < len(nodes):
        return ""
    return ("1 core per node, on one machine (" + ", ".join(f"{n}: CPU {c}" for n, c in got.items()) + "; memory, "
            "disk and kernel shared)")


def shared_cpu(manifest: dict[str, Any], article: str, who: str = "every node and client",
               apart: list[str] | None = None) -> Machine:
    """Cores shared by the nodes: what a claim of throughput under load, or of a ranking, depends on. It differs
    from the article's when the hosts ``apart`` (provider and subscriber, say) share a machine; without them,
    when the whole run had one machine."""
    n, words = cores_here(manifest)
    if apart is None:
        differs = n == 1
    else:
        hosts = [h for h in apart if h]
        differs = len({placement.machine(manifest, h) for h in hosts}) < len(hosts)
    return Machine("cores per node", words + (f", shared by {who}" if differs else ""), article,
                   "nodes and clients on machines of their own, as the article had", differs=differs)


def separate_machines(manifest: dict[str, Any], hosts: list[str], article: str, answer: str) -> Machine:
    """Whether ``hosts`` (one per node; a host named twice is two nodes on it) ran on machines of their own: what
    scale-out and isolation claims need. Two nodes on one host share its machine, so they differ too."""
    nodes = [h for h in hosts if h]
    machines = {placement.machine(manifest, h) for h in nodes}
    words = f"{len(nodes)} nodes on {len(machines)} machine{'s' if len(machines) != 1 else ''}"
    return Machine("separate machines", words, article, answer, differs=len(machines) < len(nodes))


#: how far a per-transaction cost may be from the article's and still count as the same machine in that property:
#: within a factor 2 either way (a commit's flush of 2.3-9.1 ms against the article's 4.6 ms, say)
SAME_COST = 2.0


def _unlike(here: float | None, article: float) -> bool:
    """``here`` outside [article / SAME_COST, article * SAME_COST]; not measured counts as unlike (not judged)."""
    return here is None or not (article / SAME_COST <= here <= article * SAME_COST)


def commit_cost(local_ms: float | None, article_ms: float, how: str, emulated: str = "") -> Machine:
    """What a read-write transaction costs locally, mostly its commit's flush: what a claim about the RW overhead
    of postgres_fdw depends on (the same extra round trips weigh less beside a slow commit); ``emulated``: the
    flush emulation it was measured under."""
    m = _cost("commit cost (local RW ms per transaction: the flush)", local_ms, article_ms, "ms", 1e3,
              "RW", how, "a slower disk flush: `emulate: flush_latency_ms: [hdd_15k]`", digits=2)
    return dataclasses.replace(m, here=m.here + (f", {emulated}" if emulated else ""), emulated=emulated)


def query_cpu(local_us: float | None, article_us: float, how: str) -> Machine:
    """What a read-only transaction costs locally, mostly CPU per query: what a claim about the RO overhead of
    postgres_fdw depends on (its extra statements per query weigh more beside a cheap query)."""
    return _cost("per-query CPU (local RO us per transaction)", local_us, article_us, "us", 1e6, "RO", how,
                 "a CPU of its speed")


def _cost(prop: str, here: float | None, article: float, unit: str, per_s: float, kind: str, how: str,
          like: str, digits: int = 3) -> Machine:
    """A transaction's local cost here against the article's; unlike outside a factor ``SAME_COST`` (``_unlike``)."""
    words = f"{here:.3g} {unit} per {kind} transaction, local ({how})" if here else f"not measured (no local {kind})"
    low, high = f"{article / SAME_COST:.{digits}g}", f"{article * SAME_COST:.{digits}g}"
    return Machine(prop, words, f"about {article:.2g} {unit} per {kind} transaction, local ({per_s / article:,.0f} tps "
                   "at 1 client)", f"a machine whose local {kind} transaction takes {low} to {high} {unit}, as the "
                   f"article's ({like})", differs=_unlike(here, article))


def joint(*machines: Machine) -> Machine:
    """The properties a claim depends on together (an RO factor over an RW factor: per-query CPU and commit cost).
    It differs when any one differs; the row then names only the ones that differ (what its note gives as the
    reason it is not judged, with what would answer each), else every one, as like the article's."""
    shown = [m for m in machines if m.differs] or list(machines)
    if len(shown) == 1:
        return shown[0]
    return Machine("; ".join(m.property for m in shown), "; ".join(m.here for m in shown),
                   "; ".join(m.article for m in shown), "; and ".join(m.answer for m in shown if m.answer),
                   differs=any(m.differs for m in shown),
                   emulated="; ".join(dict.fromkeys(m.emulated for m in machines if m.emulated)))


def network(round_trip_ms: float | None, article: str) -> Machine:
    """The round trip between the instances (postgres_fdw pays it once per remote statement)."""
    here = f"{round_trip_ms:.3g} ms round trip" if round_trip_ms is not None else "not measured"
    return Machine("network round trip", here, article,
                   "the foreign server on another machine (`external_host`), to see the round trip's cost")


def instances(where: str, apart: bool) -> Machine:
    """Where postgres_fdw's two instances ran: the article had both on one machine (no network between them)."""
    return Machine("where the two instances run", where, "both instances on one machine (ports 5434 and 5435)",
                   "FDW_external on another machine (`external_host`)", differs=apart)


def services(have: str, missing: bool) -> Machine:
    """The database services a ranking compares: the article's are managed services in the cloud."""
    return Machine("the services compared", have or "no target", "Aurora, RDS and Cloud SQL (AWS and Google Cloud)",
                   "targets of those providers in the params file (docs/cloud_providers.md: pointing it at a "
                   "managed service)", differs=missing)


def cpu_speed(calibration: dict[str, Any] | None, article: str) -> Machine:
    """The CPU time a statement takes: what a throughput claim rests on beside the disk. Calibrated on one of the
    article's own numbers (``pglab.workloads.calibrate``), it is like the article's where the calibration matched;
    uncalibrated it is this machine's, which moved 3x between boots of this VM: said, not judged."""
    if calibration:
        return Machine("CPU per statement", fidelity.said(calibration), article,
                       "a calibration that matches the article's figure (`emulate: cpu_share: calibrate`)",
                       differs=not calibration.get("ok"), emulated=fidelity.said(calibration))
    return Machine("CPU per statement", "this machine's CPU as it is (not calibrated to the article's)", article,
                   "`emulate: cpu_share: calibrate` (docs/emulation.md)", differs=False)


def round_trip(here: str, article: str) -> Machine:
    """The round trip between primary and standby (and the standby's write): a synchronous commit pays it once.
    It is not emulated (no netem here); whether it mattered shows in the fidelity table, where ``remote_write`` and
    ``local`` differ in the article by what waiting for the standby cost (the claims' gate)."""
    return Machine("network round trip", here, article, "the standby on another machine (`standby_host`)")


def emulation_fidelity(ok: bool, why: str) -> Machine:
    """Whether the emulation reproduced the article's own numbers at a claim's points (``fidelity.gate``)."""
    return Machine("the emulation's fidelity at the claim's points", why, "the article's table",
                   f"an emulation whose predictions at these points come within {fidelity.TOLERANCE:.0%} of the "
                   "article's (the fidelity table; docs/emulation.md)", differs=not ok)


def unemulated(manifest: dict[str, Any], nodes: list[str]) -> list[str]:
    """Those of ``nodes`` that kept this machine's disk in a run that emulated a slow one for others: a claim that
    waits on their flush too rests on a disk unlike the article's (the emulation chose the difference)."""
    disks = (manifest.get("emulation") or {}).get("disks") or {}
    slowed = {n for d in disks.values() for n in d.get("nodes") or []}
    return [n for n in nodes if n not in slowed] if slowed else []


def own_disk(kept: list[str]) -> Machine:
    """The disk flush of nodes a commit waits for that kept this machine's disk (``unemulated``)."""
    return Machine("disk flush rate of every node a commit waits for", f"{', '.join(kept)} kept this machine's own "
                   "disk while the others' flush was slowed", "every node on a hard disk (the article's table implies "
                   "a slow standby too)", "`emulate: flush_nodes` naming every node (docs/emulation.md)", differs=True)


#: a node limited by its own CPU share used it up in at least this share of the periods it ran in
BOUND = 0.5


def machine_per_node(manifest: dict[str, Any], nodes: list[str], throttled: dict[str, float], article: str,
                     answer: str, limit: list[str] | None = None) -> Machine | None:
    """Separate machines, scaled down (``emulate: machine_per_node``): each of ``nodes`` in a CPU group of its own.
    Like the article's only where each node of ``limit`` (default: every one), not the load generator, was the
    limit: ``throttled`` (node -> the share of its quota's periods it used up during the measured points) at
    ``BOUND`` or more. None when the run gave its nodes no CPU group of their own."""
    e = manifest.get("emulation") or {}
    groups = e.get("cpu") or {}
    if not e.get("machine_per_node") or not all(n in groups for n in nodes):
        return None
    share = float(groups[nodes[0]].get("share", 1))
    here = (f"{len(nodes)} nodes, each a machine of its own scaled down: {share:.0%} of one core (a cgroup quota), "
            "on one machine")
    idle = {n: throttled.get(n) for n in (limit or nodes) if (throttled.get(n) or 0) < BOUND}
    if idle:
        here += ("; but not every node used up its share, so the load generator (or something else) was the limit: "
                 + ", ".join(f"{n} {v:.0%} of periods" if v is not None else f"{n} not measured"
                             for n, v in idle.items()))
    return Machine("separate machines", here, article, answer, differs=bool(idle),
                   emulated=e.get("said", "") if not idle else "")
