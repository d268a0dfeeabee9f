"""Median and a 95% interval over repetitions: the spread, not a bare mean.

The interval is the distribution-free confidence interval of the median from the binomial order
statistics (scipy), so it needs no normality assumption; with fewer than 6 repetitions it cannot
reach 95% and falls back to the sample range, which the ``ci_method`` column says.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats


def median_interval(values: np.ndarray | list[float], confidence: float = 0.95) -> tuple[float, float, float, str]:
    """(median, low, high, method) of ``values``."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan, "none"
    med = float(np.median(x))
    if n < 6:
        return med, float(x[0]), float(x[-1]), "range" if n > 1 else "single"
    # Largest k with P(k <= B < n-k) >= confidence for B ~ Binomial(n, 1/2).
    k = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))
    while k > 0 and stats.binom.cdf(n - k - 1, n, 0.5) - stats.binom.cdf(k - 1, n, 0.5) < confidence:
        k -= 1
    return med, float(x[k]), float(x[n - k - 1]), "order-statistic"


def summarise(df: pd.DataFrame, by: list[str], value: str = "value") -> pd.DataFrame:
    """One row per group: median, ci_low, ci_high, ci_method, n, mean, min, max."""
    rows = []
    for key, group in df.groupby(by, sort=True, dropna=False):
        med, lo, hi, method = median_interval(group[value].to_numpy())
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key, strict=True)), "median": med, "ci_low": lo, "ci_high": hi, "ci_method": method,
                     "n": len(group), "mean": group[value].mean(), "min": group[value].min(),
                     "max": group[value].max()})
    return pd.DataFrame(rows)


def interval_caption(summary: pd.DataFrame, unit: str = "runs") -> str:
    """What a figure's error bars are, said only when they are drawn: "median of 1 run (no interval)",
    "median and range of 2-3 runs", "median and 95% order-statistic interval of 8 runs"."""
    if summary.empty:
        return "no measurement"
    methods = set(summary.ci_method)
    lo, hi = int(summary.n.min()), int(summary.n.max())
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if methods <= {"single", "none"}:
        return f"1 {unit.replace('runs', 'run', 1)} each (no interval)"
    if methods <= {"order-statistic"}:
        return f"median and 95% order-statistic interval of {n} {unit}"
    if "order-statistic" not in methods:
        return f"median and range (min-max, not a 95% interval) of {n} {unit}"
    return f"median and interval of {n} {unit} (95% order-statistic where n >= 6, else min-max range)"


def lines_table(long: pd.DataFrame, x: str, group: str, y: str, order: list[str]) -> pd.DataFrame:
    """One column per line (level, system) against ``x``: what `dvc plots` draws one line per column from.

    Every name in ``order`` gets a column (empty where it was not measured), so the plot declaration
    in dvc.yaml holds for every run.
    """
    wide = long.pivot(index=x, columns=group, values=y).reindex(columns=order)
    wide.columns.name = None
    return wide.reset_index()
