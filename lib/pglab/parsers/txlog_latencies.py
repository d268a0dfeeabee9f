"""The successful latencies of a pass over logs, and exact percentiles of them.

Why: a study wants exact percentiles over millions of transactions of several logs merged, not
averages of per-log percentiles, and a log holds too many to keep as Python floats or to sort. The
latencies are kept in one growing float64 array, or counted in histograms when only percentiles, min,
max and mean are wanted; ranks are then found in the counts or by partitioning, never by sorting,
with the numbers :func:`percentile` gives on the sorted data, to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pglab.parsers import txlog_kernel
from pglab.parsers.txlog_parts import CORES


def percentile(sorted_values: list[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation (numpy's default method), of sorted data."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _order_percentiles(n: int, select: Callable[[list[int]], dict[int, Any]], qs: Sequence[float],
                       ) -> tuple[list[float | None], float | None, float | None]:
    """:func:`percentile` of each q, the min and the max of ``n`` values, from ``select(ranks)``: the value
    of each (0-based) rank in sorted order. Same arithmetic as :func:`percentile` on the sorted data, so the
    same numbers to the last bit, whichever way the ranks are found."""
    if n == 0:
        return [None] * len(qs), None, None
    where = []
    for q in qs:
        pos = (n - 1) * q / 100.0
        lo = math.floor(pos)
        where.append((pos, lo, min(lo + 1, n - 1)))
    got = select(sorted({0, n - 1, *(i for _, lo, hi in where for i in (lo, hi))}))
    out = [float(got[lo] + (got[hi] - got[lo]) * (pos - lo)) for pos, lo, hi in where]
    return out, float(got[0]), float(got[n - 1])


def _percentiles(values: np.ndarray, qs: Sequence[float]) -> tuple[list[float | None], float | None, float | None]:
    """:func:`percentile` of each q, the min and the max, partitioning ``values`` in place (O(n), no sort)."""

    def select(ranks: list[int]) -> dict[int, Any]:
        values.partition(ranks)
        return {k: values[k] for k in ranks}

    return _order_percentiles(len(values), select, qs)


class Latencies:
    """Successful latencies (ms), kept in one of two ways.

    In file order (:func:`transaction_latencies_ms`): one growing float64 array, no array per chunk and
    no concatenation at the end (which would double the peak). The array is allocated for the most
    lines the input can hold; pages never written cost no memory.

    ``counted``, when only percentiles, min, max and mean are wanted: latencies of a whole number of us
    below ``txlog_kernel.HIST_US`` (4.2 s) are counted in histograms (a row per thread of the compiled
    loop), the others go to the array. The ranks are then found in the counts, not by partitioning
    millions of values (that took a third of the compiled scan's time), with the same values: us / 1000.0.
    """

    def __init__(self, input_bytes: int = 0, counted: bool = False) -> None:
        # a line is at least 12 bytes ("0 0 0 0 0 0\n"); capped so that a huge merge grows instead
        self.values = np.empty(min(input_bytes // 12 + 1024, 1 << 27), dtype=np.float64)
        self.n = 0  # in the array
        self.sum_us = 0
        # zeroed lazily by the OS: only the pages of latencies met take memory
        self.hists = np.zeros((CORES, txlog_kernel.HIST_US), dtype=np.int64) if counted else None
        self.counted = 0
        self.counted_lo, self.counted_hi = txlog_kernel.HIST_US, -1

    def __len__(self) -> int:
        return self.n + self.counted

    def _room(self, k: int) -> np.ndarray:
        if self.n + k > len(self.values):
            self.values.resize(max(2 * len(self.values), self.n + k), refcheck=False)  # no view of it is out
        self.n += k
        return self.values[self.n - k:self.n]

    def _count(self, n: int, lo: int, hi: int) -> None:
        if n:
            self.counted += n
            self.counted_lo, self.counted_hi = min(self.counted_lo, lo), max(self.counted_hi, hi)

    def add_us(self, us: np.ndarray) -> None:
        self.sum_us += int(us.sum())
        if self.hists is not None:
            small = us < txlog_kernel.HIST_US
            if small.any():
                counted = us[small]
                np.add.at(self.hists[0], counted, 1)
                self._count(len(counted), int(counted.min()), int(counted.max()))
                us = us[~small]
        np.divide(us, 1000.0, out=self._room(len(us)))  # int / 1000.0 in doubles, as in Python

    def add_compiled(self, got: dict[str, Any]) -> None:
        """What :func:`txlog_parts.scan_chunk` read into ``self.hists`` and returned."""
        for us in got["latencies_us"]:
            np.divide(us, 1000.0, out=self._room(len(us)))
        self.sum_us += got["sumlat"]
        self._count(got["counted"], got["counted_lo"], got["counted_hi"])

    def add_ms(self, ms: np.ndarray) -> None:
        self._room(len(ms))[:] = ms

    def take(self) -> np.ndarray:
        """The latencies, trimmed to their count (the array is handed over: this object is emptied).
        Not for ``counted`` ones (see :meth:`percentiles`)."""
        if self.counted:
            raise ValueError("counted latencies are not kept one by one")
        values, n = self.values, self.n
        self.values, self.n, self.sum_us = np.empty(0), 0, 0
        values.resize(n, refcheck=False)
        return values

    def percentiles(self, qs: Sequence[float]) -> tuple[list[float | None], float | None, float | None]:
        """:func:`_percentiles` of every latency (this object is emptied)."""
        counted, lo, hi = self.counted, self.counted_lo, self.counted_hi
        self.counted = 0
        values = self.take()
        if not counted:
            return _percentiles(values, qs)
        counts = self.hists[:, lo:hi + 1].sum(axis=0)
        self.hists = None
        if len(values) and not values.min() >= hi / 1000.0:  # (NaN, from an array, fails this too)
            # values in the array lie among the counted ones (arrays of ms merged, lines read by the
            # line-by-line rules): the counted ones join them
            return _percentiles(np.concatenate([values, np.repeat(np.arange(lo, hi + 1) / 1000.0, counts)]), qs)
        # sorted: the counted values, then those of the array
        cum = np.cumsum(counts)

        def select(ranks: list[int]) -> dict[int, Any]:
            rest = [k - counted for k in ranks if k >= counted]
            if rest:
                values.partition(rest)
            return {k: np.float64(lo + int(np.searchsorted(cum, k, side="right"))) / 1000.0 if k < counted
                    else values[k - counted] for k in ranks}

        return _order_percentiles(counted + len(values), select, qs)
