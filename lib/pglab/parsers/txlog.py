"""pgbench per-transaction logs (``-l``) read at the speed of the disk: vectorised and in chunks.

A log line is ``client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]``
with ``time`` in microseconds, or ``failed`` / ``serialization`` / ``deadlock`` / ``skipped`` for a
transaction that did not succeed (15+). pyarrow's CSV reader parses blocks of the file on every core
and converts only that column; only the successful latencies are kept (8 bytes each), so memory stays
near the size of that array, and percentiles are exact over every transaction of every file given
(one per pgbench thread, and several points): merged data, not an average of per-run percentiles.
Plain or gzipped files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from pglab.errors import ParseError

BLOCK_BYTES = 16 << 20  # pyarrow parses blocks of this size in parallel; memory: cores x block + the result
FAIL_WORDS = ("failed", "serialization", "deadlock", "skipped")


def transaction_latencies_ms(paths: str | Path | Iterable[str | Path], block_bytes: int = BLOCK_BYTES) -> np.ndarray:
    """The successful transactions' latencies in ms, of one log or several merged.

    pyarrow's reader parses blocks on every core and converts only the ``time`` column, with the failure
    words read as nulls; anything else in that column (or a line with another column count) is an error
    naming the file.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    parts: list[np.ndarray] = []
    for path in paths:
        try:
            table = pv.read_csv(
                path, read_options=pv.ReadOptions(autogenerate_column_names=True, block_size=block_bytes),
                parse_options=pv.ParseOptions(delimiter=" "),
                convert_options=pv.ConvertOptions(include_columns=["f2"], column_types={"f2": pa.int64()},
                                                  null_values=list(FAIL_WORDS), strings_can_be_null=True))
        except (pa.ArrowInvalid, OSError) as exc:
            raise ParseError(f"{path}: not a pgbench per-transaction log ({str(exc).splitlines()[0]})") from None
        col = table.column("f2")
        parts.append(pc.drop_null(col).to_numpy().astype(np.float64) / 1000.0)
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
