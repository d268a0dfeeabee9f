"""pgbench's per-transaction logs of a rate-limited run (``-R``): every row's scheduled start and schedule lag.

Why: the rate at a latency target (``pglab.analysis.slo``) needs more than the latencies
:func:`pglab.parsers.txlog.transaction_latencies_ms` returns: when each transaction was scheduled (to cut the
warm-up and bin the lag over the trial) and its schedule lag (to see a queue building). Each file is first
checked whole by :func:`pglab.parsers.txlog.parse_transaction_log_file` with the seventh column read as the
lag, which also refuses a log without it (a run not given ``-R``).

With ``-R``, pgbench logs ``client_id transaction_no time script_no time_epoch time_us schedule_lag``: ``time``
is the latency from the *scheduled* start (lag included), and ``time_epoch.time_us`` is when the row was
written, at the end of the transaction or when it was skipped (``--latency-limit``). So the scheduled start is
the end less the latency, and for a skipped row the moment it was skipped less its lag.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pglab.errors import ParseError
from pglab.parsers.txlog import parse_transaction_log_file

_FAILED = {"failed", "serialization", "deadlock"}


@dataclass(frozen=True)
class Schedule:
    """Rows of a rate-limited run: completed ones (scheduled start in s, lag and latency in ms), the skipped
    ones' scheduled starts, and the failed count."""

    start_s: np.ndarray
    lag_ms: np.ndarray
    latency_ms: np.ndarray
    skipped_start_s: np.ndarray
    failed: int

    def window(self, t0: float, t1: float) -> Schedule:
        """Only the rows scheduled in ``[t0, t1)`` (failed rows have no time kept: all are counted)."""
        keep = (self.start_s >= t0) & (self.start_s < t1)
        sk = self.skipped_start_s
        return Schedule(self.start_s[keep], self.lag_ms[keep], self.latency_ms[keep],
                        sk[(sk >= t0) & (sk < t1)], self.failed)


def _lines(path: Path) -> Iterable[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        yield from f


def read_schedule(paths: Iterable[str | os.PathLike[str]]) -> Schedule:
    """Every row of the logs (one per pgbench thread) of one run, checked first; a ParseError names the file."""
    start: list[float] = []
    lag: list[float] = []
    lat: list[float] = []
    skipped: list[float] = []
    failed = 0
    for p in map(Path, paths):
        summary = parse_transaction_log_file(p, seventh_column="lag")
        if "schedule_lag" not in summary.get("layout", []):
            raise ParseError(f"{p}: no schedule_lag column (was pgbench given -R?); layout {summary.get('layout')}")
        for line in _lines(p):
            f = line.split()
            if len(f) < 7:
                continue
            at = int(f[4]) + int(f[5]) / 1e6
            lag_us = int(f[6])
            if f[2] == "skipped":
                skipped.append(at - lag_us / 1e6)
            elif f[2] in _FAILED:
                failed += 1
            else:
                us = int(f[2])
                start.append(at - us / 1e6)
                lag.append(lag_us / 1e3)
                lat.append(us / 1e3)
    return Schedule(np.array(start), np.array(lag), np.array(lat), np.array(skipped), failed)
