"""The ranking of targets per metric: by median, two neighbours apart only when their per-block ratio says so.

Every metric is a number per point (``METRICS``); per block, a target is divided by its neighbour in the
ranking, and the two are called apart only when the interval of that ratio is clear of 1 and of the
metric's A/A noise floor (``pglab.analysis.effects``); otherwise they share a rank, "not resolvable here".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pglab.analysis import claims, effects
from pglab.analysis.claims import MIN_BLOCKS
from pglab.analysis.stats import median_interval


@dataclass(frozen=True)
class Metric:
    """A number per point that targets are ranked by."""

    name: str
    kind: str  # the workload (points' kind) it comes from
    column: str  # in the points table
    higher_is_better: bool
    unit: str
    title: str


METRICS = (Metric("pgbench_tps", "pgbench", "tps", True, "tps", "pgbench steady-state tps"),
           Metric("pgbench_latency_ms", "pgbench", "latency_avg_ms", False, "ms", "pgbench latency average"),
           Metric("init_s", "pgbench", "init_total_s", False, "s", "pgbench -i time"),
           Metric("sysbench_tps", "sysbench", "tps", True, "tps", "sysbench tps"),
           Metric("sysbench_p95_ms", "sysbench", "p95_ms", False, "ms", "sysbench p95 latency"))


def metric_ratios(points: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per block, metric and target: value / the block's baseline (both copies; copy 2 / copy 1 is the A/A)."""
    frames = []
    for m in METRICS:
        sub = points[(points.kind == m.kind)].dropna(subset=[m.column]) if m.column in points else points.iloc[:0]
        if sub.empty:
            continue
        r = effects.block_ratios(sub.assign(value=pd.to_numeric(sub[m.column])), baseline, by=["group"])
        frames.append(r.assign(metric=m.name))
    cols = ["block", "group", "metric", "config", "ratio", "value", "baseline"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def block_values(points: pd.DataFrame, m: Metric) -> pd.DataFrame:
    """block x target of one metric (first copies; steal-flagged points left out, as in every ratio)."""
    if m.column not in points:
        return pd.DataFrame()
    sub = points[(points.kind == m.kind) & (points["copy"] == 1)].dropna(subset=[m.column])
    if "steal_flag" in sub:
        sub = sub[~sub.steal_flag.fillna(False).astype(bool)]
    return sub.pivot_table(index="block", columns="config", values=m.column, aggfunc="first")


def _better_ratio(wide: pd.DataFrame, a: str, b: str, m: Metric) -> np.ndarray:
    """Per block, how many times ``a`` is better than ``b`` (> 1: a is better)."""
    both = wide[[a, b]].dropna()
    r = both[a] / both[b] if m.higher_is_better else both[b] / both[a]
    return r.to_numpy(dtype=float)


def ranking(points: pd.DataFrame, ratios: pd.DataFrame,
            order_targets: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ranking table: per metric, targets by median (best first); rank shared while not resolvable."""
    rows, texts = [], {}
    summ = effects.summarise(ratios, by=["metric", "config"]) if len(ratios) else pd.DataFrame(
        columns=["metric", "config", "median", "ci_low", "ci_high", "ci_method", "blocks", "noise_floor"])
    for m in METRICS:
        wide = block_values(points, m)
        if wide.empty:
            continue
        s = summ[summ.metric == m.name].set_index("config")
        noise = float(s.noise_floor.dropna().iloc[0]) if len(s.noise_floor.dropna()) else math.nan
        vals = {}
        for t in [t for t in order_targets if t in wide]:
            med, lo, hi, method = median_interval(wide[t].dropna().to_numpy(dtype=float))
            vals[t] = (med, lo, hi, method, int(wide[t].notna().sum()))
        order = sorted(vals, key=lambda t: (-vals[t][0] if m.higher_is_better else vals[t][0], order_targets.index(t)))
        rank, text = 1, order[0] if order else ""
        for i, t in enumerate(order):
            vs_next, resolved = "", None
            if i + 1 < len(order):
                nxt = order[i + 1]
                x = _better_ratio(wide, t, nxt, m)
                med, lo, hi, _ = effects.interval(x) if len(x) else (math.nan,) * 3 + ("none",)
                v = claims.verdict(lo, hi, claims.direction("ahead", 1.0))
                if len(x) < MIN_BLOCKS:
                    v = "not resolvable here"
                resolved = v == "held"
                vs_next = (f"{'ahead of' if resolved else 'not resolvable here from'} {nxt}: {med:.3g}x "
                           f"[{lo:.3g}, {hi:.3g}] over {len(x)} blocks" if len(x) else f"no common block with {nxt}")
            r = s.loc[t] if t in s.index else None
            rows.append({"metric": m.name, "title": m.title, "unit": m.unit, "better": "higher" if m.higher_is_better
                         else "lower", "rank": rank, "target": t, "median": vals[t][0], "low": vals[t][1],
                         "high": vals[t][2], "method": vals[t][3], "n": vals[t][4],
                         "ratio_to_baseline": r["median"] if r is not None else (1.0 if t == order_targets[0] else
                                                                                   math.nan),
                         "ratio_low": r["ci_low"] if r is not None else math.nan,
                         "ratio_high": r["ci_high"] if r is not None else math.nan,
                         "noise_floor": noise, "vs_next": vs_next})
            if resolved is not None:
                text += (" > " if resolved else " = ") + order[i + 1]
                if resolved:  # else tied: the next one shares this rank
                    rank = i + 2
        tied = " = " in text
        texts[m.name] = text + (" (=: not resolvable here)" if tied else "")
    cols = ["metric", "title", "unit", "better", "rank", "target", "median", "low", "high", "method", "n",
            "ratio_to_baseline", "ratio_low", "ratio_high", "noise_floor", "vs_next"]
    return pd.DataFrame(rows, columns=cols), texts


def ahead_of_best(points: pd.DataFrame, m: Metric, one: str, others: list[str]) -> np.ndarray:
    """Per block, how many times target ``one`` is better than the best of ``others`` in metric ``m``."""
    wide = block_values(points, m)
    if one not in wide or not any(n in wide for n in others):
        return np.array([])
    cols = [n for n in others if n in wide]
    best = wide[cols].max(axis=1) if m.higher_is_better else wide[cols].min(axis=1)
    r = wide[one] / best if m.higher_is_better else best / wide[one]
    return r.dropna().to_numpy(dtype=float)
