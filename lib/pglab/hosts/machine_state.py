"""The state of the machine a run measures on, probed before it starts and after it ends.

Why: a verdict rests on the machine sitting still. On this project's 2-core VM a process at low priority took
28-54% of the CPU beside 16 shipped runs and nothing said so; the CPU ran 3x slower on one boot than on another.
So a run is not started on a busy machine (others' CPU share over ``OTHERS_MAX``, or a load above the cores) unless
asked (``--busy-ok``, and then the run is marked), and what the verdicts rest on is probed at both ends: the
others' CPU share, steal and load, a CPU speed probe (a fixed shell loop: the same work, so its time moves with the
CPU's speed), the disk's flush rate (``pglab-flushprobe``, where ``make setup`` built it) and the boot. A drift
between the two probes past ``DRIFT`` (a factor per probe) marks the run too.

"Others" is the machine's busy CPU less pglab's own process (nothing of the run is running at either probe).
"""

from __future__ import annotations

import os
import re
import statistics
import time
from datetime import datetime, timezone
from typing import Any

from pglab.hosts.base import Host
from pglab.machine_rules import DRIFT, OTHERS_MAX, busy, drift  # noqa: F401  (the probe's rules)

PROBE_S = float(os.environ.get("PGLAB_PROBE_S", "1.0"))  # the CPU window; the test suite shortens it
#: a busy machine is waited out this long before a run is refused: the load average decays over a minute after the
#: previous run, and a short command beside a campaign (an editor's linter, a git command) passes in seconds, where a
#: refusal at the first probe cost a version-matrix sweep two of a major's three runs
LOAD_WAIT_S = float(os.environ.get("PGLAB_BUSY_WAIT_S", "90"))
LOOP = 20000  # shell loop iterations of the CPU probe (about 20-60 ms on this project's VM)
REPEATS = 9  # timings of the loop; their median is the probe's
REPEATS_FLUSH = 3  # windows of the flush probe; the best is the probe's
FLUSHPROBE = os.environ.get("PGLAB_NATIVE_DIR", "/usr/local/lib/pglab") + "/pglab-flushprobe"


def _stat(host: Host) -> list[int]:
    line = next((x for x in host.read_text("/proc/stat").splitlines() if x.startswith("cpu ")), "cpu")
    return [int(v) for v in line.split()[1:9]]


def _own_ticks() -> float:
    """This process's CPU (and its reaped children's), in clock ticks like /proc/stat's."""
    t = os.times()
    return (t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK")


def cpu_window(host: Host, seconds: float = PROBE_S) -> dict[str, float]:
    """Others' share of the machine's CPU (busy less pglab's own), steal and the low-priority (nice) share."""
    own0, a = _own_ticks() if host.is_local else 0.0, _stat(host)
    time.sleep(seconds)
    own1, b = _own_ticks() if host.is_local else 0.0, _stat(host)
    d = [y - x for x, y in zip(a, b, strict=False)]
    total = sum(d) or 1
    busy = total - d[3] - d[4] - (d[7] if len(d) > 7 else 0)  # not idle, iowait or stolen
    return {"others": round(max(0.0, (busy - (own1 - own0)) / total), 3),
            "nice": round(d[1] / total, 3), "steal": round((d[7] if len(d) > 7 else 0) / total, 3)}


def cpu_loop_ms(host: Host, repeats: int = REPEATS) -> float | None:
    """The median of ``repeats`` timings of a fixed shell loop, in ms: the same work each time, so it tracks the
    CPU's speed. A median: on this project's VM one timing moved 27-58 ms within a minute at idle, and the fastest
    of several was no steadier than one (short fast spells); the median of nine moves less
    (``bench/machine_probe.py``)."""
    one = (f"s=$(date +%s%N); i=0; while [ $i -lt {LOOP} ]; do i=$((i+1)); done; e=$(date +%s%N); "
           "echo $(((e - s) / 1000))")
    res = host.run(["sh", "-c", f"for r in $(seq {repeats}); do {one}; done"], check=False, timeout=60)
    got = sorted(int(x) for x in res.stdout.split() if x.isdigit()) if res.exit_code == 0 else []
    return round(statistics.median(got) / 1000, 1) if got else None


def flush_rate(host: Host, workdir: str, repeats: int = REPEATS_FLUSH) -> float | None:
    """fdatasync/s of the disk under ``workdir`` (``pglab-flushprobe``, 8 kB writes): the best of ``repeats`` short
    windows (one window's rate moved 3,800-7,000/s on this VM's virtual disk), None without the probe."""
    if not host.exists(FLUSHPROBE):
        return None
    path = f"{workdir.rstrip('/')}/.pglab-state-probe"
    rates = []
    for _ in range(repeats):
        res = host.run([FLUSHPROBE, path, str(max(0.1, PROBE_S / 4))], check=False, timeout=60)
        m = re.search(r"ops (\d+) seconds ([\d.]+)", res.stdout)
        if m and float(m[2]) > 0:
            rates.append(int(m[1]) / float(m[2]))
    host.run(["rm", "-f", path], check=False)
    return round(max(rates), 1) if rates else None


def probe(host: Host, workdir: str) -> dict[str, Any]:
    """What the verdicts rest on, now: others' CPU share, steal, load, the CPU probe, the flush rate, the boot."""
    window = cpu_window(host)
    try:
        boot = host.read_text("/proc/sys/kernel/random/boot_id").strip()
    except Exception:  # noqa: BLE001 - a host without it is still probed
        boot = None
    load = host.read_text("/proc/loadavg").split()
    cores = host.run(["nproc"], check=False).stdout.strip()
    return {"at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "host": host.name, "boot_id": boot,
            "cores": int(cores) if cores.isdigit() else 1, "load1": float(load[0]), **window,
            "cpu_loop_ms": cpu_loop_ms(host), "flush_ops_s": flush_rate(host, workdir)}


def settled(host: Host, workdir: str, wait_s: float = LOAD_WAIT_S) -> dict[str, Any]:
    """A probe, repeated while the machine is busy, up to ``wait_s``: only a load that stays refuses the run (the
    load average lags a minute behind the previous run; another process's short burst passes)."""
    state = probe(host, workdir)
    deadline = time.monotonic() + wait_s
    while busy(state) and time.monotonic() < deadline:
        time.sleep(min(5.0, max(0.5, wait_s / 10)))
        state = probe(host, workdir)
    if busy(state):
        state["waited_s"] = round(wait_s)
    return state
