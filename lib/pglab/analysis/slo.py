"""One trial at a fixed Poisson rate judged against a latency target: is the rate sustainable?

Why: a DBA asks "what rate can I run at p99 <= 20 ms", and a closed-loop tps answers another question.
A trial (pgbench ``-R rate --latency-limit target``, latency measured from the scheduled start) is good
when all of these hold (docs/measurement.md, "The rate at a latency target"):

* **p99 bound**: the upper 95% bound on the 0.99 quantile, an order statistic (the smallest rank ``k``
  with ``P(Binom(n, 0.99) < k) >= 0.95``), is at or under the target. Skipped and failed transactions
  count as latencies above every other. The maximum of ``n`` samples is such a bound only from
  ``n >= 299`` (``1 - 0.99**n >= 0.95``): with fewer the trial is not judged, and so not good.
* **late + skipped** under 0.1% of the transactions scheduled: a run can skip none and have every
  transaction late, so the two are counted together (failures too). Late means above the *late limit*
  (pgbench's ``--latency-limit``), twice the target by default: at the target itself, fewer than 0.1%
  late would be a p99.9 rule and the p99 one would never bind. At twice the target the share catches
  stalls and skipping, and an exponential tail (p99.9 = 1.5 x p99) leaves p99 the rule that decides.
* **achieved rate**: the transactions completed fall short of ``rate x duration`` by no more than 1%
  plus the Poisson count's own spread (3.09 standard deviations: a 0.1% false alarm), since the
  schedule is random and a short trial at a low rate is several percent off by chance alone.
* **no rising lag**: the least-squares slope of the intervals' mean schedule lag, times the trial's
  length, stays under a quarter of the target. A server that keeps up has no trend; one that does
  not builds a queue that grows every second.

Pure: numbers in, a :class:`Verdict` out (pglab.analysis.slo_point reads a trial's folder).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom


@dataclass(frozen=True)
class Rule:
    """What a good trial is; every threshold in one place, as the docs state them."""

    target_ms: float
    late_limit_ms: float | None = None  # pgbench --latency-limit; None: twice the target
    quantile: float = 0.99
    confidence: float = 0.95
    max_bad_share: float = 0.001  # late + skipped + failed, strictly under
    rate_shortfall: float = 0.01  # achieved may fall this far short of intended ...
    rate_z: float = 3.09  # ... plus this many Poisson standard deviations
    lag_rise_share: float = 0.25  # slope x duration must stay under this share of the target

    @property
    def late_ms(self) -> float:
        return self.late_limit_ms if self.late_limit_ms is not None else 2 * self.target_ms


@dataclass(frozen=True)
class Interval:
    """One aggregate interval (pgbench ``--aggregate-interval``, or binned from a per-transaction log)."""

    start_s: float
    transactions: int
    lag_avg_ms: float | None
    skipped: int = 0
    latency_max_ms: float | None = None


@dataclass(frozen=True)
class TrialData:
    """What a trial measured. ``latencies_ms``: every completed transaction (per-transaction log); without
    it, ``intervals`` with ``latency_max_ms`` and ``late`` (pgbench's summary) stand in."""

    rate: float
    duration_s: float
    completed: int
    skipped: int = 0
    failed: int = 0
    latencies_ms: np.ndarray | None = None
    late: int | None = None
    intervals: Sequence[Interval] = ()


@dataclass(frozen=True)
class Verdict:
    """A trial judged: ``good`` only when ``judged`` (enough samples) and every reason is absent."""

    good: bool
    judged: bool
    reasons: tuple[str, ...]
    rate: float
    duration_s: float
    scheduled: int
    p99_ms: float | None
    p99_upper_ms: float | None
    late: int
    skipped: int
    bad_share: float
    achieved_rate: float
    lag_slope_ms_per_s: float | None
    extra: dict[str, object] = field(default_factory=dict)


def min_samples(quantile: float = 0.99, confidence: float = 0.95) -> int:
    """The fewest samples whose maximum bounds ``quantile`` at ``confidence`` (299 for p99 at 95%)."""
    return math.ceil(math.log(1 - confidence) / math.log(quantile))


def upper_rank(n: int, quantile: float = 0.99, confidence: float = 0.95) -> int | None:
    """The 0-based rank in ``n`` sorted samples that bounds ``quantile`` from above at ``confidence``, or None
    when even the maximum does not (``n < min_samples``)."""
    if n <= 0:
        return None
    k = int(binom.ppf(confidence, n, quantile))  # smallest k with P(Binom <= k) >= confidence
    while k > 0 and binom.cdf(k - 1, n, quantile) >= confidence:  # ppf's float edge, made exact
        k -= 1
    return k if k < n else None


def quantile_upper(values_ms: np.ndarray, quantile: float = 0.99, confidence: float = 0.95) -> float | None:
    """The order-statistic upper bound on ``quantile`` of ``values_ms`` (inf counts as above all)."""
    k = upper_rank(len(values_ms), quantile, confidence)
    return None if k is None else float(np.partition(np.asarray(values_ms, dtype=np.float64), k)[k])


def lag_slope(intervals: Sequence[Interval]) -> float | None:
    """Least-squares slope (ms of mean lag per second) over the intervals that completed something."""
    pts = [(iv.start_s, iv.lag_avg_ms) for iv in intervals if iv.transactions and iv.lag_avg_ms is not None]
    if len(pts) < 3:
        return None
    t, lag = np.array(pts, dtype=np.float64).T
    t = t - t.mean()
    denom = float((t * t).sum())
    return float((t * (lag - lag.mean())).sum() / denom) if denom > 0 else None


def intervals_of(start_s: np.ndarray, lag_ms: np.ndarray, skipped_start_s: np.ndarray, t0: float, t1: float,
                 bins: int = 10) -> list[Interval]:
    """Per-transaction rows (scheduled start, schedule lag) binned into ``bins`` equal intervals of
    ``[t0, t1)``, as pgbench's aggregate log would have written them."""
    edges = np.linspace(t0, t1, bins + 1)
    idx = np.clip(np.searchsorted(edges, start_s, side="right") - 1, 0, bins - 1)
    sidx = np.clip(np.searchsorted(edges, skipped_start_s, side="right") - 1, 0, bins - 1)
    counts = np.bincount(idx, minlength=bins)
    sums = np.bincount(idx, weights=lag_ms, minlength=bins)
    skipped = np.bincount(sidx, minlength=bins)
    return [Interval(float(edges[i]), int(counts[i]), float(sums[i] / counts[i]) if counts[i] else None,
                     int(skipped[i])) for i in range(bins)]


def judge(data: TrialData, rule: Rule) -> Verdict:
    """The trial's verdict under ``rule`` (see the module's docstring for each condition)."""
    scheduled = data.completed + data.skipped + data.failed
    reasons: list[str] = []
    p99 = upper = None
    if data.latencies_ms is not None:
        lat = np.asarray(data.latencies_ms, dtype=np.float64)
        late = int((lat > rule.late_ms).sum())
        everything = np.concatenate([lat, np.full(data.skipped + data.failed, np.inf)])
        upper = quantile_upper(everything, rule.quantile, rule.confidence)
        if len(everything):
            p99 = float(np.quantile(everything, rule.quantile, method="inverted_cdf"))
    else:  # aggregate rows: the largest maximum is the bound, valid from min_samples on
        if data.late is None:
            raise ValueError("without per-transaction latencies the late count (pgbench's summary) is needed")
        late = data.late
        maxima = [iv.latency_max_ms for iv in data.intervals if iv.latency_max_ms is not None]
        if scheduled >= min_samples(rule.quantile, rule.confidence) and maxima:
            upper = math.inf if data.skipped + data.failed else max(maxima)
    judged = upper is not None
    if not judged:
        reasons.append(f"{scheduled} transactions: fewer than the {min_samples(rule.quantile, rule.confidence)} "
                       f"whose maximum bounds p{rule.quantile * 100:g}")
    elif upper > rule.target_ms:  # type: ignore[operator]
        reasons.append(f"p{rule.quantile * 100:g} bound {upper:.3f} ms > {rule.target_ms:g} ms")
    bad = late + data.skipped + data.failed
    share = bad / scheduled if scheduled else 1.0
    if share >= rule.max_bad_share:
        reasons.append(f"late+skipped+failed {bad}/{scheduled} = {share:.3%} >= {rule.max_bad_share:.1%}")
    expected = data.rate * data.duration_s
    floor = expected * (1 - rule.rate_shortfall) - rule.rate_z * math.sqrt(max(expected, 0.0))
    achieved = data.completed / data.duration_s if data.duration_s > 0 else 0.0
    if data.completed < floor:
        reasons.append(f"achieved {achieved:.1f}/s short of {data.rate:g}/s (floor {floor / data.duration_s:.1f}/s)")
    slope = lag_slope(data.intervals)
    if slope is not None and slope * data.duration_s > rule.lag_rise_share * rule.target_ms:
        reasons.append(f"schedule lag rising {slope:.3f} ms/s")
    return Verdict(good=judged and not reasons, judged=judged, reasons=tuple(reasons), rate=data.rate,
                   duration_s=data.duration_s, scheduled=scheduled, p99_ms=p99, p99_upper_ms=upper, late=late,
                   skipped=data.skipped, bad_share=share, achieved_rate=achieved, lag_slope_ms_per_s=slope)
