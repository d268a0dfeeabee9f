"""What makes a machine busy, and how far it may move during a run: the rules the run record is judged by.

Why a module of its own, at the base: the probes run on hosts (``pglab.hosts.machine_state``), but the analysis
and the ledger judge a run's record by these rules long after, and must not import host code to do so
(tests/test_run_record.py). Changing a rule here changes how every old run's record is read
(``pglab.runs.marks``), which is the point: a rule that learnt what noise is applies to old runs too.
"""

from __future__ import annotations

import os
from typing import Any

OTHERS_MAX = 0.10  # a share of the machine's CPU that other processes may take at a run's start, or during a point
BUSY_OK = "PGLAB_BUSY_OK"  # "1": a run measures on a busy machine all the same (``--busy-ok``); the run is marked


def busy_ok() -> bool:
    """Whether the run was asked to measure on a busy machine (then its points are not judged one by one: the whole
    run is marked already)."""
    return os.environ.get(BUSY_OK) == "1"
#: how far each probe may move between a run's two probes (a factor, either way) before the run is marked: the CPU
#: probe 2x, the flush rate 1.5x, because on this VM at idle the CPU probe swings 1.7x and the flush probe 1.6x within
#: a minute (25 probes back to back, bench/machine_probe.py; docs/running.md): smaller swings are its normal state,
#: which the interval over blocks and runs carries, and a probe cannot tell them from a drift. A node's statement
#: time (``pglab.workloads.statement_probe``) 2.5x: two of its probes back to back differed by up to 2.08x at idle
#: (the median of 5 batches; 86-371 us within two minutes), where the boots this project saw differ 3x
DRIFT = {"cpu_loop_ms": 2.0, "flush_ops_s": 1.5, "statement_us": 2.5}


def busy(state: dict[str, Any]) -> list[str]:
    """Why the machine is not sitting still ([] when it is)."""
    out, cores = [], state.get("cores") or 1
    if state.get("others", 0) > OTHERS_MAX:
        out.append(f"other processes took {state['others']:.0%} of the CPU (at most {OTHERS_MAX:.0%})")
    if state.get("load1", 0) > cores:
        out.append(f"the load is {state['load1']:.1f} on {cores} cores")
    return out


def drift(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What moved between a run's two probes past ``DRIFT`` (or a reboot)."""
    out = []
    if before.get("boot_id") and after.get("boot_id") and before["boot_id"] != after["boot_id"]:
        out.append("the machine rebooted during the run")
    for key, what in (("cpu_loop_ms", "the CPU probe's time"), ("flush_ops_s", "the disk's flush rate")):
        a, b = before.get(key), after.get(key)
        if a and b and max(a, b) / min(a, b) > DRIFT[key]:
            out.append(f"{what} moved from {a:,.0f} to {b:,.0f} ({b / a - 1:+.0%}; at most a factor of "
                       f"{DRIFT[key]:g} either way)")
    return out


def statement_drift(probes: dict[str, Any] | None) -> list[str]:
    """Which node's statement time (``pglab.workloads.statement_probe``) moved past ``DRIFT`` between the run's first
    sweep's start and its last sweep's end."""
    before, after = (probes or {}).get("before") or {}, (probes or {}).get("after") or {}
    out, limit = [], DRIFT["statement_us"]
    for node, b in after.items():
        a = before.get(node)
        if a and b and max(a, b) / min(a, b) > limit:
            out.append(f"node {node}: a statement's time moved from {a:,.0f} to {b:,.0f} us ({b / a - 1:+.0%}; at most "
                       f"a factor of {limit:g} either way)")
    return out
