"""What both overhead benchmarks share: settings, the reset between runs, the report, the main wrapper."""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pglab.hosts.local import LocalHost
from pglab.nodes.node import Node
from pglab.runs.store import RunStore
from pglab.workloads import cpu

T = TypeVar("T")
DB = "bench"
GOAL = 0.98
# The logical_replication quick profile's settings (no checkpoint inside a short run), plus commits
# that do not wait for the disk: this VM's fsync rate varies by +-20% from run to run, which would
# swamp the 2% these scripts look for, and what they measure (a polling loop, a lag query) costs CPU.
SETTINGS = {"max_connections": 100, "checkpoint_timeout": "15min", "max_wal_size": "2GB", "min_wal_size": "1GB",
            "synchronous_commit": "off"}


class RunFailed(Exception):
    """A run failed (or did not catch up): the figures would mean nothing."""


def say(text: str) -> None:
    print(text, flush=True)


def reset_tables(node: Node) -> None:
    """The same starting point for every run (as the logical_replication study's ``Pair.reset``)."""
    node.query("truncate pgbench_history", dbname=DB)
    node.query("vacuum pgbench_branches, pgbench_tellers", dbname=DB)
    node.query("checkpoint", dbname=DB)


def order(names: Sequence[str], round_no: int) -> list[str]:
    """A B, then B A, ...: neither side always runs first (no order effect)."""
    return list(names) if round_no % 2 else list(reversed(names))


def steal_during(run: Callable[[], T]) -> tuple[T, str]:
    """Run and say how much CPU the hypervisor took meanwhile (this VM: up to 40%, the main noise here)."""
    host = LocalHost()
    before = cpu.sample(host)
    value = run()
    share = cpu.shares(before, cpu.sample(host)).get("steal")
    return value, "" if share is None else f"  cpu steal {share:.0%}"


def report(tps: dict[str, list[float]], subject: str, baseline: str) -> float:
    """Medians, ratio of medians subject/baseline, per-round ratios; returns the ratio."""
    for name in (baseline, subject):
        say(f"median {name:>12}: {statistics.median(tps[name]):10.1f} tps  "
            f"(runs: {', '.join(f'{v:.1f}' for v in tps[name])})")
    ratio = statistics.median(tps[subject]) / statistics.median(tps[baseline])
    paired = [s / b for s, b in zip(tps[subject], tps[baseline], strict=True)]
    say(f"ratio {subject}/{baseline}: {ratio:.4f}")
    say(f"per-round ratios: {', '.join(f'{v:.3f}' for v in paired)} (median {statistics.median(paired):.4f})")
    say(f"goal >= {GOAL}: {'met' if ratio >= GOAL else 'not met'}")
    return ratio


def run_main(study: str, args: Any, body: Callable[[RunStore], None]) -> int:
    """Raw output in a temporary store (removed on success, kept and printed otherwise); exit codes."""
    tmp = Path(tempfile.mkdtemp(prefix="pglab-bench-"))
    ok = False
    try:
        store = RunStore(tmp, study, "bench", vars(args))
        body(store)
        store.finish("complete")
        ok = True
    except RunFailed as exc:
        say(f"FAILED: {exc}")
        return 1
    except KeyboardInterrupt:
        say("interrupted: the session has stopped everything it started")
        return 130
    finally:
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"raw output kept in {tmp}", file=sys.stderr, flush=True)
    return 0
