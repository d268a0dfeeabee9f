"""The measured window of a time-based point: ``-P 1`` progress with the warm-up cut, and its stalls.

A pgbench run's first second pays for connections, cold caches and the first checkpoint-free WAL
segment; its summary line averages them in. pglab runs every time-based point with ``-P 1`` and
takes the rate over the progress intervals that end after ``warmup_s``: the measured window. An
interval with 0 tps inside the window is a stall (a checkpoint, a standby that stopped confirming, the
hypervisor taking the CPU), listed per point rather than averaged away. sysbench's report intervals get
the same cut.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pglab.parsers.pgbench import parse_progress, parse_summary
from pglab.runs.formats import WARMUP_S  # the default warm-up (1 s): one value, which reading older records uses too
from pglab.runs.reading import point_metas, read_optional


def warmup_of(values: Mapping[str, Any]) -> float:
    """The warm-up a point's meta (or a run's parameters) records; every reader takes the same default."""
    return float(values.get("warmup_s", WARMUP_S))


def after_warmup(intervals: list[dict[str, Any]], warmup_s: float) -> list[dict[str, Any]]:
    """The intervals that end after the warm-up: the measured window."""
    return [i for i in intervals if i["time_s"] > warmup_s + 1e-9]


def measured_window(progress_text: str, warmup_s: float) -> dict[str, Any]:
    """tps over the window, its length, the per-interval rates and the stalls (interval end times)."""
    lines = [p for p in parse_progress(progress_text) if p["tps"] is not None]
    window = after_warmup(lines, warmup_s)
    out: dict[str, Any] = {"warmup_s": warmup_s, "intervals": len(window), "window_s": 0.0, "tps": None,
                           "stalls": [], "interval_tps": [p["tps"] for p in window]}
    if not window:
        return out
    # the interval before each line: the first one of the window starts where the previous line ended
    start = max([p["time_s"] for p in lines if p["time_s"] <= warmup_s + 1e-9], default=warmup_s)
    ends = [p["time_s"] for p in window]
    spans = [e - s for s, e in zip([start, *ends[:-1]], ends, strict=True)]
    tx = sum(p["tps"] * d for p, d in zip(window, spans, strict=True))
    out.update(window_s=round(ends[-1] - start, 3), tps=tx / (ends[-1] - start) if ends[-1] > start else None,
               stalls=[p["time_s"] for p in window if p["tps"] == 0],
               latency_avg_ms=_weighted([(p["latency_avg_ms"], p["tps"] * d) for p, d in zip(window, spans,
                                                                                           strict=True)]))
    return out


def _weighted(pairs: list[tuple[float | None, float]]) -> float | None:
    pairs = [(v, w) for v, w in pairs if v is not None and w > 0]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def pgbench_window(d: Path, meta: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """tps in the measured window (warm-up cut), the summary's tps, stalls: a time-based pgbench point."""
    out, err = read_optional(d, f"{prefix}stdout.txt"), read_optional(d, f"{prefix}stderr.txt")
    w = measured_window(err + "\n" + out, warmup_of(meta))
    s = parse_summary(out, err)
    return {"tps": w["tps"] if w["tps"] is not None else s.get("tps"), "tps_summary": s.get("tps"),
            "latency_avg_ms": w.get("latency_avg_ms"), "window_s": w["window_s"], "stalls": len(w["stalls"]),
            "stall_times": " ".join(f"{t:g}" for t in w["stalls"])}


def sysbench_window(intervals: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    """Report intervals after the warm-up: mean tps and writes/s, median p95, and the stalls (0 tps)."""
    w = after_warmup(intervals, warmup_s)
    if not w:
        return {"tps": None, "window_s": 0.0, "stalls": 0, "stall_times": ""}
    stalls = [i["time_s"] for i in w if i["tps"] == 0]
    p95 = [i["latency_pct_ms"] for i in w if i["latency_pct_ms"] is not None and i["tps"] > 0]
    return {"tps": float(np.mean([i["tps"] for i in w])), "window_s": w[-1]["time_s"] - warmup_s,
            "window_writes_per_s": float(np.mean([i["writes_per_s"] or 0.0 for i in w])),
            "window_p95_ms": float(np.median(p95)) if p95 else None,
            "stalls": len(stalls), "stall_times": " ".join(f"{t:g}" for t in stalls)}


def measured_points(run_dir: Path, pattern: str, fields: tuple[str, ...] = (),
                    value: Callable[[Path, dict[str, Any]], float | None] | None = None) -> list[dict[str, Any]]:
    """The points of ``run_dir`` matching ``pattern`` that measured (status ok): block, config, copy, steal
    flag, the meta ``fields`` and their ``tps``, read as the analysis reads them: the tps of the measured
    window, or what ``value(point_dir, meta)`` gives (logical replication's sustainable tps).

    What a first look (``pglab.workloads.adaptive``) decides from while the run is still going: the meta the
    points wrote and their raw output, nothing derived.
    """
    rows = []
    for d, meta in point_metas(run_dir, pattern=pattern, planned=False):
        if meta.get("status") != "ok":
            continue
        tps = value(d, meta) if value else pgbench_window(d, meta)["tps"]
        if tps:
            rows.append({"block": meta["block"], "config": meta["config"], "copy": meta.get("copy", 1),
                         "steal_flag": bool(meta.get("steal_flag")),
                         **({"busy_flag": bool(meta["busy_flag"])} if "busy_flag" in meta else {}), "tps": float(tps),
                         **{f: meta.get(f) for f in fields}})
    return rows
