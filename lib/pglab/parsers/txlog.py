"""pgbench per-transaction logs (``-l``) read at the speed of the disk: vectorised and in chunks.

A log line is ``client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]``
with ``time`` in microseconds, or ``failed`` / ``serialization`` / ``deadlock`` / ``skipped`` for a
transaction that did not succeed (15+). pandas' C reader takes the file a million lines at a time;
only the successful latencies are kept (8 bytes each), so memory stays near the size of that array,
and percentiles are exact over every transaction of every file given (one per pgbench thread, and
several points): merged data, not an average of per-run percentiles. Plain or gzipped files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pglab.errors import ParseError

CHUNK_LINES = 1_000_000
FAIL_WORDS = ("failed", "serialization", "deadlock", "skipped")


def transaction_latencies_ms(paths: str | Path | Iterable[str | Path], chunk_lines: int = CHUNK_LINES) -> np.ndarray:
    """The successful transactions' latencies in ms, of one log or several merged."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    parts: list[np.ndarray] = []
    for path in paths:
        try:
            reader = pd.read_csv(path, sep=" ", header=None, usecols=[2], dtype={2: str}, chunksize=chunk_lines,
                                 engine="c", na_filter=False)
            for chunk in reader:
                col = chunk[2]
                ok = col.str.isdigit()
                bad = ~ok & ~col.isin(FAIL_WORDS)
                if bad.any():
                    raise ParseError(f"{path}: not a pgbench per-transaction log: time field "
                                     f"{col[bad].iloc[0]!r} is neither microseconds nor {'/'.join(FAIL_WORDS)}")
                parts.append(col[ok].astype(np.int64).to_numpy() / 1000.0)
        except (pd.errors.ParserError, ValueError) as exc:
            if isinstance(exc, ParseError):
                raise
            raise ParseError(f"{path}: not a pgbench per-transaction log ({exc})") from None
    return np.concatenate(parts) if parts else np.empty(0)


def merged_percentiles(paths: Iterable[str | Path], qs: Sequence[float] = (50, 95, 99)) -> dict[object, float | int]:
    """Exact percentiles (numpy's linear interpolation) over every successful transaction of ``paths``,
    and ``n``, how many there were."""
    lat = transaction_latencies_ms(list(paths))
    out: dict[object, float | int] = {"n": int(len(lat))}
    if len(lat):
        for q, v in zip(qs, np.percentile(lat, list(qs)), strict=True):
            out[q] = float(v)
    return out
