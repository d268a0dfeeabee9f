"""The run's own CPU time, so that "others" during a point means others: a cgroup v1 ``cpuacct`` group the run's
process joins, which every process it starts inherits (``pg_ctl`` and the postmaster it leaves behind, the
backends, pgbench, sysbench, the replication daemons), whoever it is reparented to later.

Why: a point's CPU shares (``pglab.workloads.cpu``) could tell another load from the run only when that load ran
niced (a run niced nothing). A build or a second sweep at normal priority took its share unseen until the end
probe, and only if it still ran then. With the run's own time counted by the kernel, others = the machine's busy
time less the group's.

Runs on local hosts only (an SSH host's processes are started by its sshd, outside the group; lab hosts are SSH
hosts, and a point that also uses one is not judged),
and only where ``cpuacct`` is mounted on its own (where it shares a hierarchy with ``cpu``, a node's CPU quota group
would take its processes out of the run's group): elsewhere ``usage_ns`` is None and a point's others stay the
niced share alone. The group is left, and removed, when the session closes; ``pglab cleanup`` removes an empty one
a killed run left.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("PGLAB_CPUACCT_ROOT", "/sys/fs/cgroup/cpuacct"))
PREFIX = "pglab-run-"


def _current() -> str | None:
    """This process's cpuacct group, relative to ROOT ("/" at the top), None without a cpuacct hierarchy."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                return path
    except OSError:
        return None
    return None


def available() -> bool:
    """A cpuacct hierarchy of its own, writable here."""
    if not os.access(ROOT / "cgroup.procs", os.W_OK) or not (ROOT / "cpuacct.usage").exists():
        return False
    return not (ROOT / "cpu.cfs_quota_us").exists()  # mounted with cpu: a quota group would move processes out


def join() -> str | None:
    """Move this process into a fresh group of its own (its threads too); the group's name, or None when it
    cannot (no cpuacct, or already inside a run's group: a session within a session counts in the outer's)."""
    here = _current()
    if not available() or here is None or Path(here).name.startswith(PREFIX):
        return None
    name = f"{here.strip('/')}/{PREFIX}{os.getpid()}-{os.urandom(3).hex()}".lstrip("/")
    try:
        (ROOT / name).mkdir()
        (ROOT / name / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return name


def leave(name: str | None) -> bool:
    """Back to the group it came from, and the run's group removed; False when something of the run still runs in
    it (``pglab cleanup`` removes it once that is stopped)."""
    if not name:
        return True
    try:
        (ROOT / name).parent.joinpath("cgroup.procs").write_text(str(os.getpid()))
        (ROOT / name).rmdir()
    except OSError:
        return False
    return True


def usage_ns() -> int | None:
    """CPU time (ns) the run's group used so far: this process and all it started; None outside a run's group."""
    here = _current()
    if not here or not Path(here).name.startswith(PREFIX):
        return None
    try:
        return int((ROOT / here.lstrip("/") / "cpuacct.usage").read_text())
    except (OSError, ValueError):
        return None


PF_KTHREAD = 0x00200000  # /proc/<pid>/stat's flags: a kernel thread


def kernel_ticks() -> int:
    """CPU time (clock ticks) the kernel's own threads used so far: the writeback, journal and block workers that
    flush the run's writes count as the run's, not as another load (on this VM they took up to 5% of the CPU
    beside a smoke run). Threads that exited in between are missed, which errs towards "others"."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 12 and int(fields[6]) & PF_KTHREAD:  # flags, utime, stime: fields 9, 14, 15 of stat(5)
            total += int(fields[11]) + int(fields[12])
    return total


def leave_empty(name: str) -> bool:
    """Remove a killed run's group once nothing runs in it (``pglab cleanup``); False when it is not there or busy."""
    d = ROOT / name
    if not Path(name).name.startswith(PREFIX) or not d.is_dir():
        return False
    try:
        return not (d / "cgroup.procs").read_text().split() and (d.rmdir() is None)
    except OSError:
        return False
