"""The median and an interval whose stated coverage is its real coverage, and how it is said in words.

Only distribution-free intervals of the median are used, because per-block ratios on a shared machine
are neither normal nor symmetric, and because their coverage is then exact, not hoped for:

* ``order-statistic`` (6 values or more): the pair of order statistics (x_(k+1), x_(n-k)) with the
  largest k whose binomial coverage P(k <= B < n-k), B ~ Binomial(n, 1/2), is at least 95%. It holds
  for any continuous distribution; its exact coverage is :func:`coverage` (96.9% at n = 6, the range).
* ``range`` (2 to 5 values): the minimum and maximum, which cover the median with probability
  1 - 2^(1-n): 75% at n = 3, 87.5% at 4, 93.8% at 5. No 95% is claimed for it, and no verdict rests
  on it (``claims.MIN_BLOCKS``).

A percentile bootstrap over 3-5 blocks, used before, was labelled 95% but covered about as often as
the range; tests/test_interval_coverage.py simulates every method at n = 3..10 against the coverage
stated here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
#: the fewest values whose order-statistic interval reaches CONFIDENCE (1 - 2 * 0.5**6 = 0.969)
MIN_ORDER_STATISTIC = 6

#: how each interval is said, in figures, tables and reports alike ({n}: the values, {cov}: coverage in %)
INTERVAL_WORDS = {
    "order-statistic": "{conf} interval of the median over {n} {unit}",
    "range": "range of {n} {unit} (covers the median {cov} of the time)",
    "single": "{n} {unit}, no interval",
    # pglab.analysis.over_runs: {n} counts runs
    "t over runs": "{conf} t interval over {n} runs (their medians)",
    "none": "not measured",
}


def order_coverage(n: int, k: int) -> float:
    """P(x_(k+1) <= median <= x_(n-k)): at least k+1 values on each side of the median, i.e.
    P(k+1 <= B <= n-k-1) for B ~ Binomial(n, 1/2), the count of values below it."""
    return float(stats.binom.cdf(n - k - 1, n, 0.5) - stats.binom.cdf(k, n, 0.5))


def order_k(n: int, confidence: float = CONFIDENCE) -> int:
    """The largest k whose interval (x_(k+1), x_(n-k)) covers the median with at least ``confidence``; -1 if none.

    (Before 2026-11-26 this counted P(k <= B <= n-k-1), one term too many: at n = 8 it chose (x_2, x_7),
    whose coverage is 93%, not 95%. Every shipped run had 6 blocks, where both choose the range.)"""
    k = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))
    while k >= 0 and order_coverage(n, k) < confidence:
        k -= 1
    return k


def method_for(n: int) -> str:
    """The ``ci_method`` :func:`median_interval` gives ``n`` values."""
    return "order-statistic" if n >= MIN_ORDER_STATISTIC else "range" if n >= 2 else "single" if n == 1 else "none"


def coverage(method: str, n: int, confidence: float = CONFIDENCE) -> float:
    """The exact probability that the interval of ``n`` values (asked at ``confidence``) covers the true
    median, for any continuous distribution of independent values; NaN for no interval."""
    k = order_k(n, confidence) if method == "order-statistic" else -1
    if method == "range" or (method == "order-statistic" and k < 0):
        return 1.0 - 2.0 ** (1 - n) if n >= 2 else math.nan
    if method == "order-statistic":
        return order_coverage(n, k)
    return math.nan


def median_interval(values: np.ndarray | list[float] | pd.Series,
                    confidence: float = CONFIDENCE) -> tuple[float, float, float, str]:
    """(median, low, high, method) of ``values`` (NaN dropped); see the module doc for the methods."""
    x = np.asarray(values, dtype=float)
    x = np.sort(x[~np.isnan(x)])
    n = len(x)
    method = method_for(n)
    if n == 0:
        return math.nan, math.nan, math.nan, method
    med = float(np.median(x))
    k = order_k(n, confidence) if method == "order-statistic" else -1
    if k < 0:  # too few values for ``confidence``: the range, said as such
        return med, float(x[0]), float(x[-1]), "range" if n > 1 else method
    return med, float(x[k]), float(x[n - k - 1]), method


def interval_words(method: str, n: int | float | None, unit: str = "blocks", confidence: float = CONFIDENCE) -> str:
    """One interval in words: "95% interval of the median over 6 blocks", "range of 3 blocks (covers the
    median 75% of the time)"."""
    count = int(n) if isinstance(n, (int, float, np.integer)) and not pd.isna(n) else 0
    unit = unit[:-1] if count == 1 and unit.endswith("s") else unit
    cov = coverage(method, count, confidence)
    return INTERVAL_WORDS.get(str(method), "interval: {method}").format(
        n=count, unit=unit, method=method, cov="-" if math.isnan(cov) else f"{100 * cov:.3g}%",
        conf=f"{100 * confidence:.3g}%")


def interval_caption(summary: pd.DataFrame, unit: str = "runs", method: str = "ci_method", n: str = "n") -> str:
    """What a figure's error bars are, from the data: each method present, with its counts of values."""
    s = summary[summary[method].isin(list(INTERVAL_WORDS))] if len(summary) else summary
    if s.empty:
        return "no measurement"
    parts = []
    for m in INTERVAL_WORDS:
        counts = sorted({int(v) for v in s[s[method] == m][n].dropna()})
        if not counts:
            continue
        words = interval_words(m, counts[0], "runs" if m == "t over runs" else unit)
        if len(counts) > 1:  # "range of 3-5 blocks": the coverage of the fewest is said
            words = words.replace(f" {counts[0]} ", f" {counts[0]}-{counts[-1]} ", 1)
        parts.append(words)
    return "; ".join(parts)


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


def lines_table(long: pd.DataFrame, x: str, group: str, y: str, order: list[str]) -> pd.DataFrame:
    """One column per line (level, system) against ``x``: what `dvc plots` draws one line per column from.

    Every name in ``order`` gets a column (empty where it was not measured), so the plot declaration
    in dvc.yaml holds for every run.
    """
    wide = long.pivot(index=x, columns=group, values=y).reindex(columns=order)
    wide.columns.name = None
    return wide.reset_index()
