"""The measured window of a time-based point: ``-P 1`` progress with the warm-up cut, and its stalls.

A pgbench run's first second pays for connections, cold caches and the first checkpoint-free WAL
segment; its summary line averages them in. pglab runs every time-based point with ``-P 1`` and
takes the rate over the progress intervals that end after ``warmup_s``: the measured window. An
interval with 0 tps inside the window is a stall (a checkpoint, a standby that stopped confirming, the
hypervisor taking the CPU), listed per point rather than averaged away.
"""

from __future__ import annotations

from typing import Any

from pglab.parsers.pgbench import parse_progress


def measured_window(progress_text: str, warmup_s: float) -> dict[str, Any]:
    """tps over the window, its length, the per-interval rates and the stalls (interval end times)."""
    lines = [p for p in parse_progress(progress_text) if p["tps"] is not None]
    window = [p for p in lines if p["time_s"] > warmup_s + 1e-9]
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
