"""A rate-limited pgbench trial's point folder judged (``pglab.workloads.slo`` wrote it, raw first).

Why here: the verdict (``pglab.analysis.slo``) is pure, and the workloads layer sits below the parsers, so
reading a trial's files back is the analysis layer's job; the search's driver gets this as its judge.

What is read: ``trial.json`` (the rate, the warm-up and the measured seconds the trial was run with),
``stdout.txt``/``stderr.txt`` (pgbench's summary: its late and skipped counts, kept beside the verdict as a
cross-check) and ``txlog/pgbench_log*`` (every transaction: the p99 bound is exact). The first ``warmup_s``
seconds of the schedule are cut; the rest is binned in ten intervals for the lag trend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pglab.analysis.slo import Rule, TrialData, Verdict, intervals_of, judge
from pglab.parsers.pgbench import parse_summary
from pglab.parsers.txlog_schedule import read_schedule

TRIAL = "trial.json"
TXLOG = "txlog"
BINS = 10


def judge_point(point_dir: str | Path, rule: Rule) -> Verdict:
    """The verdict of the trial recorded in ``point_dir`` (a ParseError or OSError if its files are not there)."""
    d = Path(point_dir)
    trial: dict[str, Any] = json.loads((d / TRIAL).read_text())
    rate, warm, seconds = float(trial["rate"]), float(trial["warmup_s"]), float(trial["seconds"])
    summary = parse_summary((d / "stdout.txt").read_text(), (d / "stderr.txt").read_text())
    logs = sorted((d / TXLOG).glob("pgbench_log*"))
    sched = read_schedule(logs)
    starts = [a.min() for a in (sched.start_s, sched.skipped_start_s) if a.size]
    t0 = min(starts) + warm if starts else 0.0
    w = sched.window(t0, t0 + seconds)
    data = TrialData(rate=rate, duration_s=seconds, completed=len(w.latency_ms), skipped=len(w.skipped_start_s),
                     failed=w.failed, latencies_ms=w.latency_ms,
                     intervals=intervals_of(w.start_s, w.lag_ms, w.skipped_start_s, t0, t0 + seconds, BINS))
    v = judge(data, rule)
    v.extra.update(p50_ms=round(float(np.median(w.latency_ms)), 3) if len(w.latency_ms) else None,
                   summary_tps=summary.get("tps"), summary_skipped=summary.get("skipped"),
                   summary_late=summary.get("above_latency_limit"),
                   summary_latency_limit_ms=summary.get("latency_limit_ms"),
                   log_files=len(logs))
    return v


def _num(x: float | None, digits: int = 3) -> float | str | None:
    """JSON has no infinity: a bound above every latency (skipped transactions) is written ``"inf"``."""
    return None if x is None else "inf" if x == float("inf") else round(x, digits)


def verdict_json(v: Verdict) -> dict[str, Any]:
    """What a point keeps of its verdict (``verdict.json``), numbers rounded for reading."""
    return {"good": v.good, "judged": v.judged, "reasons": list(v.reasons), "rate": v.rate,
            "duration_s": v.duration_s, "scheduled": v.scheduled, "p99_ms": _num(v.p99_ms),
            "p99_upper_ms": _num(v.p99_upper_ms), "late": v.late, "skipped": v.skipped,
            "bad_share": round(v.bad_share, 6), "achieved_rate": round(v.achieved_rate, 2),
            "lag_slope_ms_per_s": _num(v.lag_slope_ms_per_s, 5), "extra": v.extra}
