"""The article's machine, imitated on this one: a slow disk's flush and a core per node.

Why: most claims this machine cannot judge depend on one property of the article's machine: a SATA disk's
flush (about 120 a second, where a virtual disk does 4,000-12,000) or a machine per node. Both can be imitated
on one machine, and then the claims are judged like for like, under a property that is stated and measured:

- **Flush latency.** ``native/pglab_flush.c``, preloaded into a node's server (``LD_PRELOAD``), makes every
  fsync, fdatasync and O_SYNC/O_DSYNC write do the real call and return once the emulated latency has passed
  since it began, one at a time per emulated disk (an exclusive flock on the disk's control file, which every
  process of the node shares, and every node of a host with ``one_disk``). The latency is read from the control
  file at every flush, so a run changes it between points without restarting a server (synchronous_commit's
  flush ladder). Each level is
  measured before the run (``probe``: ``pglab-flushprobe``'s fdatasync loop, with and without the library),
  and the run records the rate it got and the emulation's CPU per flush beside the latency it asked for.
- **A core per node.** ``taskset -c`` on the node's ``pg_ctl start`` (the postmaster and every backend inherit
  it) and on the workloads run against the node from its own host; the CPU list each postmaster really got is
  read back from /proc. It is still one machine: memory, disk and kernel are shared, and the record says so.

Both are built by ``make setup`` (scripts/bootstrap.sh) into ``NATIVE_DIR``; a host without them is refused
before the run starts (``problems``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pglab.emulated import Emulation, label, latency_ms
from pglab.errors import UserError
from pglab.nodes import cpu_quota

if TYPE_CHECKING:  # the analyses read presets and labels without the host layer
    from pglab.hosts.base import Host

NATIVE_DIR = os.environ.get("PGLAB_NATIVE_DIR", "/usr/local/lib/pglab")
LIBRARY = f"{NATIVE_DIR}/libpglab_flush.so"
PROBE = f"{NATIVE_DIR}/pglab-flushprobe"

#: the measured rate must be within this share of the one the latency names (1000 / latency_ms)
FIDELITY = 0.10
PROBE_S = 1.0

def problems(emulation: Emulation | None, hosts: Iterable[Host]) -> list[str]:
    """What would stop the emulation on ``hosts``: said before anything starts."""
    if emulation is None:
        return []
    out = []
    for h in hosts:
        if emulation.flush:
            missing = [p for p in (LIBRARY, PROBE) if not h.exists(p)]
            if missing:
                out.append(f"host {h.name}: flush emulation needs {', '.join(missing)}, built by `make setup` "
                           "(scripts/bootstrap.sh, as root, with gcc); it is missing there")
        if emulation.core_per_node and not h.which("taskset"):
            out.append(f"host {h.name}: core_per_node needs taskset (Debian's util-linux); it is missing there")
        if emulation.cpu_share is not None:
            out += cpu_quota.problems(h)
    return out


@dataclass
class Disk:
    """One emulated disk on a host: a control file that holds its latency, shared by the nodes on it."""

    host: Host
    ctl: str
    owner: str
    level: str | float = 0.0
    measured: dict[str, Any] = field(default_factory=dict)  # level label -> probe()
    scale: float = 1.0  # slow motion (``pglab.workloads.calibrate``): every latency times this

    def ms(self, level: str | float) -> float:
        return latency_ms(level) * self.scale

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": LIBRARY, "PGLAB_FLUSH_CTL": self.ctl}

    def set(self, level: str | float) -> None:
        """Every flush from now on waits ``level``: rewritten in place (the library keeps its descriptor)."""
        us = round(self.ms(level) * 1000)
        self.host.run(["sh", "-c", f"printf %s {us} > {shlex.quote(self.ctl)}"], as_user=self.owner)
        self.level = level

    def measure(self, levels: Sequence[str | float], scratch: str) -> dict[str, Any]:
        """Each level's flush rate and CPU per flush, against the disk's own (the library not loaded)."""
        before = self.level
        own = probe(self.host, None, f"{scratch}.probe", self.owner)
        for level in levels:
            self.set(level)
            got = probe(self.host, self, f"{scratch}.probe", self.owner)
            self.measured[label(level)] = fidelity(level, got, own, self.ms(level))
        self.set(before)
        return self.measured


def probe(host: Host, disk: Disk | None, path: str, owner: str, seconds: float = PROBE_S) -> dict[str, float]:
    """fdatasync/s and CPU microseconds per flush of ``pglab-flushprobe`` (8 kB writes, each flushed), through
    ``disk``'s emulation or (None) straight to the disk."""
    res = host.run([PROBE, path, str(seconds)], as_user=owner, env=disk.env() if disk else None,
                   timeout=seconds + 30)
    m = re.search(r"ops (\d+) seconds ([\d.]+) cpu_s ([\d.]+)", res.stdout)
    if not m:
        raise UserError(f"host {host.name}: {PROBE} printed {res.stdout!r}, not its ops line")
    ops, secs, cpu = int(m[1]), float(m[2]), float(m[3])
    return {"ops_s": round(ops / secs, 1), "cpu_us_per_flush": round(cpu / max(ops, 1) * 1e6, 1)}


def fidelity(level: str | float, got: dict[str, float], own: dict[str, float], ms: float | None = None
             ) -> dict[str, Any]:
    """A level's record: asked (``ms``: the latency set, in slow motion the level's times k), measured, whether
    within ``FIDELITY`` of the rate it names, and its CPU cost."""
    ms = latency_ms(level) if ms is None else ms
    named = 1000.0 / ms if ms else own["ops_s"]  # a disk of that latency flushes at most this often
    return {"latency_ms": round(ms, 3), "named_ops_s": round(named, 1), "measured_ops_s": got["ops_s"],
            "faithful": abs(got["ops_s"] - named) <= FIDELITY * named if ms else None, "own_ops_s": own["ops_s"],
            "cpu_us_per_flush": max(0.0, round(got["cpu_us_per_flush"] - own["cpu_us_per_flush"], 1)) if ms else 0.0}


def said(measured: dict[str, Any]) -> str:
    """'emulated flush: 8.33 ms, measured 115/s (CPU +75 us a flush)' for each level measured."""
    parts = []
    for m in measured.values():
        if not m["latency_ms"]:
            parts.append(f"own disk: {m['measured_ops_s']:,.0f}/s")
        else:
            parts.append(f"emulated flush: {m['latency_ms']:.3g} ms, measured {m['measured_ops_s']:,.0f}/s "
                         f"(CPU {m['cpu_us_per_flush']:+.0f} us a flush)")
    return "; ".join(parts)


# -- a core per node --------------------------------------------------------------------------------


def cpus_allowed(host: Host, pid: int) -> str | None:
    """The CPU list a process may run on, from /proc (what a pinning record holds, not what was asked)."""
    res = host.run(["cat", f"/proc/{pid}/status"], check=False)
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", res.stdout, re.M)
    return m[1] if m else None


def host_cores(host: Host) -> int:
    return int(host.run(["nproc"]).stdout.strip() or 1)
