"""A slower CPU per node: a cgroup v1 ``cpu`` group with a CFS quota, which every process of the node joins.

Why: the articles' claims rest on the CPU time a statement takes as much as on a disk's flush, and this VM's CPU
speed is left to chance (the same query took 67 us on one boot and 227 us on another). A quota per node makes its
CPU as slow as the article's machine was at a named point of the article's own table
(``pglab.workloads.calibrate`` searches it). A quota is not a slower clock: the group runs at full speed for
``share x period`` of each period, then waits for the next. A 10 ms period keeps each stall under 10 ms, the
scale of a hard disk's flush; what that does to a latency shows in the fidelity table, not here.

The group is made by the host's login user (root on this machine; a host whose ``/sys/fs/cgroup/cpu`` it cannot
write is refused before the run, ``problems``); its ``cgroup.procs`` is handed to the node's OS user, so that
``pg_ctl start`` and the node's pgbench move themselves in (``joined``) and every process they start inherits
the group. It is removed when the run's servers have stopped (``remove``; ``pglab cleanup`` removes empty ones
a killed run left).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

ROOT = "/sys/fs/cgroup/cpu"
PREFIX = "pglab-"
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses less (EINVAL)
MIN_SHARE = 0.1  # of one core: a 1 ms quota in a 10 ms period
Host = Any  # pglab.hosts.base.Host (a lower layer; named only for reading)


def problems(host: Host) -> list[str]:
    """What stops a CPU share on ``host``: said before anything starts."""
    res = host.run(["sh", "-c", f"test -w {ROOT}/cgroup.procs && test -w {ROOT}/cpu.cfs_quota_us"], check=False)
    if res.exit_code != 0:
        return [f"host {host.name}: a CPU share (emulate.cpu_share) needs cgroup v1's cpu controller writable at "
                f"{ROOT} (cpu.cfs_quota_us), as root; it is missing or read-only there"]
    return []


def run_prefix(workspace: str) -> str:
    """The start of the names of a run's groups on a host: pglab-<its workspace folder>- (made by a Deployment,
    removed by the session, or by ``pglab cleanup`` after a kill)."""
    return f"{PREFIX}{workspace.rstrip('/').rsplit('/', 1)[-1]}-"


@dataclass
class CpuGroup:
    """One emulated CPU: a cgroup whose quota is ``share`` of ``cores`` cores (1 for a node pinned to a core)."""

    host: Host
    name: str  # the group's folder under ROOT: pglab-<workspace>-<node or host>
    owner: str  # the OS user whose processes join it (the node's)
    cores: int = 1
    share: float = 1.0

    @property
    def path(self) -> str:
        return f"{ROOT}/{self.name}"

    def create(self) -> CpuGroup:
        q = shlex.quote(self.path)
        self.host.run(["sh", "-c", f"mkdir -p {q} && chown {shlex.quote(self.owner)} {q}/cgroup.procs {q}/tasks"])
        self.set(self.share)
        return self

    def quota_us(self, share: float) -> int:
        return -1 if share >= 1.0 else max(MIN_QUOTA_US, round(share * PERIOD_US * self.cores))

    def set(self, share: float) -> None:
        """From now on the group runs ``share`` of its cores' time (1.0: no quota, full speed)."""
        if not MIN_SHARE <= share <= 1.0:
            raise ValueError(f"CPU share {share:g}: outside {MIN_SHARE:g}-1")
        q = shlex.quote(self.path)
        self.host.run(["sh", "-c", f"echo {PERIOD_US} > {q}/cpu.cfs_period_us && "
                                   f"echo {self.quota_us(share)} > {q}/cpu.cfs_quota_us"])
        self.share = share

    def joined(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the group (it moves itself in, then execs: what it starts stays in)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', f"{self.path}/cgroup.procs", *argv]

    def stat(self) -> dict[str, int]:
        """The kernel's count of periods and of those the quota cut short (``cpu.stat``)."""
        text = self.host.run(["cat", f"{self.path}/cpu.stat"], check=False).stdout
        return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", text, re.M)}

    def remove(self) -> bool:
        """Remove the group once its processes are gone; False when something still runs in it."""
        res = self.host.run(["rmdir", self.path], check=False)
        return res.exit_code == 0 or "No such file" in res.stderr

    def record(self) -> dict[str, Any]:
        s = self.stat()
        return {"group": self.name, "cores": self.cores, "share": round(self.share, 3), "period_us": PERIOD_US,
                "quota_us": self.quota_us(self.share), "periods": s.get("nr_periods"),
                "throttled": s.get("nr_throttled")}


def confined(argv: list[str], cpus: str | None, group: CpuGroup | None) -> list[str]:
    """``argv`` on ``cpus`` only (``taskset``) and inside ``group``: a core and a CPU share of a node's own."""
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    return group.joined(argv) if group else argv


def leftovers(host: Host) -> list[str]:
    """pglab's groups on ``host`` with no process left in them (what a killed run leaves): ``pglab cleanup``."""
    script = f'for d in {ROOT}/{PREFIX}*/; do [ -d "$d" ] && [ -z "$(cat "$d/cgroup.procs")" ] && echo "$d"; done'
    res = host.run(["sh", "-c", script], check=False)
    return [line.rstrip("/").rsplit("/", 1)[-1] for line in res.stdout.split() if line]


def stats(groups: dict[str, CpuGroup | None]) -> dict[str, dict[str, int]]:
    """name -> its group's ``cpu.stat``, for each name that has a group (a point's before and after)."""
    return {k: g.stat() for k, g in groups.items() if g is not None}


def used(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """name -> the periods its group ran in between ``before`` and ``after``, and those its quota cut short: near
    all of them, the node itself (not its clients) was the limit."""
    return {k: {"periods": after[k].get("nr_periods", 0) - v.get("nr_periods", 0),
                "throttled": after[k].get("nr_throttled", 0) - v.get("nr_throttled", 0)}
            for k, v in before.items() if k in after}
