"""The rate at a latency target on PostgreSQL: one rate-limited pgbench trial, and the search's loop.

A trial is ``pgbench -R rate --latency-limit L -T warmup+seconds -l`` against a node: Poisson arrivals at
``rate``, latency measured from each transaction's scheduled start, and a per-transaction log (so the p99
bound is exact, not read from a histogram). Raw first: the command, stdout, stderr, the exit code, the trial's
parameters (``trial.json``) and every log file, whole (not thinned as a study's collect thins them), are in
the point folder before anything is parsed.

This module is in the workloads layer, below the parsers and the analysis: it neither parses nor judges.
``run_search`` takes the search (``pglab.analysis.slo_search.Search``, or anything with its interface) and a
judge (``pglab.analysis.slo_point.judge_point`` with a rule); ``pglab.app.slo.find_rate`` wires them, as a
study wires ``adaptive.extend`` to its claims. Between trials, a drain: a pause, then a wait until the node
runs no other active query, so one trial's backlog is never the next one's start.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pglab.hosts.base import Result
from pglab.nodes.node import Node
from pglab.nodes.topology import Client
from pglab.runs.store import Point
from pglab.workloads import pgbench

TRIAL = "trial.json"
TXLOG = "txlog"


class Verdict(Protocol):
    good: bool
    duration_s: float


class SearchLike(Protocol):
    """``pglab.analysis.slo_search.Search``'s interface, all the loop needs."""

    @property
    def done(self) -> bool: ...

    def next_trial(self) -> tuple[float, float] | None: ...

    def record(self, rate: float, result: Any) -> None: ...


@dataclass(frozen=True)
class TrialSpec:
    """How every trial of a search runs (its rate and seconds come from the search)."""

    dbname: str
    late_limit_ms: float
    clients: int = 4
    jobs: int | None = None
    select_only: bool = True
    warmup_s: float = 1.0
    drain_s: float = 1.0
    protocol: str | None = None
    extra: tuple[str, ...] = field(default=())


def trial_argv(node: Node | Client, spec: TrialSpec, rate: float, seconds: float, log: list[str]) -> list[str]:
    """The pgbench command of one trial: ``-R``, ``--latency-limit``, ``-T`` warm-up plus the measured seconds."""
    total = int(round(spec.warmup_s + seconds))
    return pgbench.pgbench_argv(node, spec.dbname, clients=spec.clients, jobs=spec.jobs or min(spec.clients, 2),
                                duration_s=total, select_only=spec.select_only, no_vacuum=True,
                                protocol=spec.protocol,
                                extra=["-R", f"{rate:g}", "--latency-limit", f"{spec.late_limit_ms:g}", *log,
                                       *spec.extra])


def run_trial(node: Node, point: Point, spec: TrialSpec, rate: float, seconds: float,
              client: Client | None = None) -> Result:
    """One trial, recorded whole into ``point``: ``trial.json``, the command's files, ``txlog/`` (every log)."""
    point.write_json(TRIAL, {"rate": rate, "seconds": seconds, "warmup_s": spec.warmup_s,
                             "late_limit_ms": spec.late_limit_ms, "clients": spec.clients, "dbname": spec.dbname})
    log, remote = pgbench.txlog_args(point, node, client)
    argv = trial_argv(client or node, spec, rate, seconds, log)
    result = pgbench.run(node, point, argv, timeout=spec.warmup_s + seconds + 120, client=client)
    c = client or Client.on_node_host(node)
    names = [n for n in c.host.run(["ls", "-1", remote], check=False).stdout.split() if n.startswith("pgbench_log")]
    dest = point.dir / TXLOG
    dest.mkdir(exist_ok=True)
    for name in names:
        c.host.get(f"{remote}/{name}", dest / name, mode=0o644)
    c.host.remove_tree(remote)
    point.meta["txlog_kept"] = {TXLOG: {"kept": "whole", "log_files": sorted(names)}}
    return result


def drain(node: Node, spec: TrialSpec, timeout_s: float = 60.0) -> float:
    """A pause, then until no other backend of the database is active; the seconds waited."""
    t0 = time.monotonic()
    time.sleep(spec.drain_s)
    while time.monotonic() - t0 < timeout_s:
        rows = node.query("select count(*) from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() "
                          "and datname = %s", (spec.dbname,))
        if not rows or not rows[0][0]:
            break
        time.sleep(0.2)
    return time.monotonic() - t0


def run_search(node: Node, search: SearchLike, judge: Callable[[Path], Verdict],
               new_point: Callable[[int, float], Point], spec: TrialSpec, client: Client | None = None,
               on_trial: Callable[[int, float, float, Any], None] | None = None) -> SearchLike:
    """Trials as ``search`` proposes them until it is done: each in its own point (``new_point(n, rate)``), then
    judged from its folder (``judge``), its verdict given to the search and kept beside it; a drain after each."""
    n = 0
    while not search.done:
        proposed = search.next_trial()
        assert proposed is not None
        rate, seconds = proposed
        n += 1
        point = new_point(n, rate)
        point.meta.update(kind="slo-trial")
        result = run_trial(node, point, spec, rate, seconds, client)
        drain(node, spec)
        if result.exit_code != 0:
            point.finish("failed", f"pgbench exited {result.exit_code}")
            raise RuntimeError(f"trial {n} at {rate:g}/s: pgbench exited {result.exit_code}: "
                               f"{result.stderr.strip()[-500:]}")
        verdict = judge(point.dir)
        (point.dir / "verdict.json").write_text(json.dumps(_plain(verdict), indent=1, default=str) + "\n")
        point.finish("ok")
        search.record(rate, verdict)
        if on_trial:
            on_trial(n, rate, seconds, verdict)
    return search


def _plain(verdict: Any) -> dict[str, Any]:
    """A verdict's fields as JSON can hold them (no parsing here: it is already judged)."""
    fields = getattr(verdict, "__dataclass_fields__", None)
    if not fields:
        return {"good": verdict.good, "duration_s": verdict.duration_s}
    out = {k: getattr(verdict, k) for k in fields}
    return {k: ("inf" if isinstance(v, float) and v == float("inf") else v) for k, v in out.items()}
