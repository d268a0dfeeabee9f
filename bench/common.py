"""What the overhead benchmarks share: settings, the reset between runs, when to stop, the report, main."""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pglab.analysis.stats import CONFIDENCE, median_interval
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


def steal_during(run: Callable[[], T]) -> tuple[T, float | None]:
    """Run and say how much CPU the hypervisor took meanwhile (this VM: up to 40%, the main noise here)."""
    host = LocalHost()
    before = cpu.sample(host)
    value = run()
    return value, cpu.shares(before, cpu.sample(host)).get("steal")


def steal_words(share: float | None) -> str:
    return "" if share is None else f"  cpu steal {share:.0%}"


def add_stopping_args(ap: argparse.ArgumentParser, unit: str) -> None:
    """``--until-resolved``, ``--look-every``, ``--budget-s``: see :class:`Stopping`."""
    ap.add_argument("--until-resolved", action="store_true",
                    help=f"look every --look-every {unit} (Bonferroni over the looks planned up to the maximum) and "
                         "stop once the interval is above or below the goal")
    ap.add_argument("--look-every", type=int, default=6, help=f"{unit} between looks with --until-resolved; default 6")
    ap.add_argument("--budget-s", type=float, default=900,
                    help=f"no new {unit} (with --until-resolved: no new group of --look-every) that would end after "
                         "this many seconds of measuring; default 900")


class Stopping:
    """When to stop adding pairs (or blocks), and at what confidence the interval is then read.

    Without ``until_resolved`` the count is fixed in advance (``n_max``), there is one look at the end,
    and the interval is a 95% one. With it, the looks are fixed in advance too (every ``every`` pairs up
    to ``n_max``; K of them) and each reads a 1 - 0.05/K interval (Bonferroni), so stopping at the first
    look whose interval lies wholly above or below the goal keeps a 5% error rate overall. A look whose
    widest interval (the range) cannot reach that confidence cannot stop. The time budget does not depend
    on the ratios; with ``until_resolved`` it stops a run only at a look (the first look is always reached).
    """

    def __init__(self, n_max: int, until_resolved: bool, every: int, budget_s: float, unit: str = "pairs"):
        self.n_max, self.unit, self.budget_s = n_max, unit, budget_s
        if until_resolved:
            self.looks = sorted({*range(every, n_max + 1, every), n_max})
        else:
            self.looks = [n_max]
        self.confidence = 1 - (1 - CONFIDENCE) / len(self.looks)
        self.start = time.monotonic()
        self.stopped_by = "the planned count"

    def more(self, ratios: Sequence[float]) -> bool:
        """Whether to measure another pair, given the per-pair ratios so far (a look when at one)."""
        n = len(ratios)
        if n >= self.n_max:
            return False
        elapsed = time.monotonic() - self.start
        if n in self.looks and len(self.looks) > 1:
            med, lo, hi, _ = median_interval(ratios, self.confidence)
            say(f"look {self.looks.index(n) + 1}/{len(self.looks)} at {n} {self.unit}: median {med:.4f}, "
                f"{100 * self.confidence:.2f}% interval [{lo:.4f}, {hi:.4f}]"
                + ("" if self.valid(n) else " (too few for that confidence: cannot stop)"))
            if self.valid(n) and (lo > GOAL or hi < GOAL):
                self.stopped_by = "the interval (resolved)"
                return False
        if n and n in self.looks:  # a look: would the next group end within the budget?
            upcoming = min(x for x in self.looks if x > n)
            if elapsed + elapsed / n * (upcoming - n) > self.budget_s:
                self.stopped_by = f"the time budget ({self.budget_s:.0f} s)"
                return False
        elif n and len(self.looks) == 1 and elapsed + elapsed / n > self.budget_s:
            self.stopped_by = f"the time budget ({self.budget_s:.0f} s)"
            return False
        return True

    def valid(self, n: int) -> bool:
        return n >= 2 and 1 - 2.0 ** (1 - n) >= self.confidence

    def verdict(self, ratios: Sequence[float], name: str, steal: Sequence[float | None] = ()) -> bool:
        """The effect with its interval, whether it excludes a 2% loss, and what it took; True if it does."""
        n = len(ratios)
        med, lo, hi, method = median_interval(ratios, self.confidence)
        kind = f"{100 * self.confidence:.2f}% interval" if self.valid(n) else f"{method} (no {self.confidence:.0%})"
        looks = f", {len(self.looks)} looks planned, Bonferroni" if len(self.looks) > 1 else ""
        say(f"per-{self.unit[:-1]} ratios {name}: " + ", ".join(f"{v:.3f}" for v in ratios))
        say(f"effect {name}: median {med:.4f}, {kind} [{lo:.4f}, {hi:.4f}] "
            f"({method} over {n} {self.unit}{looks})")
        excludes = self.valid(n) and lo > GOAL
        known = [x for x in steal if x is not None]
        stolen = f"{min(known):.0%}-{max(known):.0%} (median {statistics.median(known):.0%})" if known else "unknown"
        say(f"excludes a 2% loss (low end > {GOAL}): {'yes' if excludes else 'no'}; it excludes a loss above "
            f"{100 * max(0.0, 1 - lo):.1f}%; {n} {self.unit}, stopped by {self.stopped_by}; "
            f"{time.monotonic() - self.start:.0f} s measuring; cpu steal {stolen}")
        if not excludes and n >= 4:
            say(needed(ratios, self.unit))
        return excludes


def needed(ratios: Sequence[float], unit: str) -> str:
    """About how many pairs a 95% interval of the median +-2% wide would take at this spread (large-sample:
    half-width 1.96 * 1.2533 * sigma / sqrt(n), sigma from the interquartile range)."""
    q = statistics.quantiles(ratios, n=4)
    sigma = (q[2] - q[0]) / 1.349
    return (f"spread of the per-{unit[:-1]} ratios: sigma ~ {100 * sigma:.1f}% (IQR/1.349); a 95% interval of the "
            f"median +-2% wide would take about {math.ceil((1.96 * 1.2533 * sigma / 0.02) ** 2)} {unit}")


def report(tps: dict[str, list[float]], subject: str, baseline: str, stop: Stopping,
           steal: Sequence[float | None] = ()) -> bool:
    """Medians of each side, then the per-pair ratios subject/baseline with their interval (the effect)."""
    for name in (baseline, subject):
        say(f"median {name:>12}: {statistics.median(tps[name]):10.1f} tps  "
            f"(runs: {', '.join(f'{v:.1f}' for v in tps[name])})")
    paired = [s / b for s, b in zip(tps[subject], tps[baseline], strict=True)]
    return stop.verdict(paired, f"{subject}/{baseline}", steal)


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
