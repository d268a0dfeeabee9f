"""The rate at a latency target, wired: the search, its trials on a node, and each trial's verdict.

Why in the app layer: the trial runs in the workloads layer, which sits below the parsers and the analysis
that judge it (``pglab.app.modgraph.LAYERS``); only a layer above both may join them, as a study joins
``workloads.adaptive`` to its claims. Not a DVC stage and not part of any study's collect.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pglab.analysis.slo import Rule
from pglab.analysis.slo_point import judge_point
from pglab.analysis.slo_search import Search, SearchResult
from pglab.errors import ProcessError
from pglab.nodes.node import Node
from pglab.nodes.topology import Client
from pglab.parsers.pgbench import parse_summary
from pglab.runs.store import Point
from pglab.workloads import pgbench
from pglab.workloads.slo import TrialSpec, run_search


def closed_loop_peak(node: Node, point: Point, dbname: str, *, clients: int = 4, seconds: int = 5,
                     select_only: bool = True, client: Client | None = None, extra: tuple[str, ...] = ()) -> float:
    """pgbench's tps with no rate limit (``clients`` at once, ``-T seconds``): where the search starts from."""
    argv = pgbench.pgbench_argv(client or node, dbname, clients=clients, jobs=min(clients, 2), duration_s=seconds,
                                select_only=select_only, no_vacuum=True, extra=list(extra))
    result = pgbench.run(node, point, argv, timeout=seconds + 120, client=client)
    if result.exit_code != 0:  # one line from the campaign, which goes on to its next run
        raise ProcessError(node.host.name, "closed-loop pgbench", result.exit_code, result.stdout, result.stderr)
    return float(parse_summary(result.stdout, result.stderr)["tps"])


def find_rate(node: Node, new_point: Callable[[int, float], Point], *, peak: float, target_ms: float,
              dbname: str, clients: int = 4, select_only: bool = True, short_s: float = 5.0, full_s: float = 30.0,
              warmup_s: float = 1.0, drain_s: float = 1.0, width: float = 0.03, max_trials: int = 40,
              late_limit_ms: float | None = None, seed: int = 0, client: Client | None = None,
              extra: tuple[str, ...] = (), on_trial: Callable[[int, float, float, Any], None] | None = None,
              **search: Any) -> SearchResult:
    """The highest Poisson rate whose trials are good at ``target_ms`` (docs/measurement.md, "The rate at a
    latency target"), searched from a quarter of ``peak`` with trials on ``node``, each in ``new_point(n, rate)``."""
    rule = Rule(target_ms, late_limit_ms=late_limit_ms)
    spec = TrialSpec(dbname, late_limit_ms=rule.late_ms, clients=clients, select_only=select_only,
                     warmup_s=warmup_s, drain_s=drain_s, extra=tuple(extra))
    s = Search(peak, target_ms, short_s=short_s, full_s=full_s, width=width, max_trials=max_trials, seed=seed,
               **search)

    def judge(point_dir: Path) -> Any:
        return judge_point(point_dir, rule)

    run_search(node, s, judge, new_point, spec, client=client, on_trial=on_trial)
    return s.result


def rerun(node: Node, new_point: Callable[[int, float], Point], rate: float, seconds: float, count: int, *,
          target_ms: float, dbname: str, clients: int = 4, select_only: bool = True, warmup_s: float = 1.0,
          drain_s: float = 1.0, late_limit_ms: float | None = None, client: Client | None = None) -> list[bool]:
    """``count`` more trials at one rate, each judged alone: how often a found rate holds (bench/slo_search.py)."""
    rule = Rule(target_ms, late_limit_ms=late_limit_ms)
    spec = TrialSpec(dbname, late_limit_ms=rule.late_ms, clients=clients, select_only=select_only,
                     warmup_s=warmup_s, drain_s=drain_s)
    fixed = _Fixed(rate, seconds, count)
    run_search(node, fixed, lambda d: judge_point(d, rule), new_point, spec, client=client)
    return fixed.goods


class _Fixed:
    """The search's interface for ``count`` trials at one rate."""

    def __init__(self, rate: float, seconds: float, count: int) -> None:
        self.rate, self.seconds, self.count = rate, seconds, count
        self.goods: list[bool] = []

    @property
    def done(self) -> bool:
        return len(self.goods) >= self.count

    def next_trial(self) -> tuple[float, float] | None:
        return None if self.done else (self.rate, self.seconds)

    def record(self, rate: float, result: Any) -> None:
        self.goods.append(bool(result.good))
