"""pgbench per-transaction logs (``-l``): one log's figures, latencies merged over logs, exact percentiles.

Why: a paper-profile point writes logs of about 1 GB, and a study wants exact percentiles over every
transaction of several logs, not averages of per-log percentiles. So a log is read in chunks
(``txlog_chunks``), through the compiled loop (``txlog_parts``, every core, a plain file mapped rather
than copied) or, for what it refuses, pyarrow's CSV reader and the line-by-line rules (``txlog_readers``),
keeping counters and the successful latencies, never rows (``txlog_latencies``): counted when only
percentiles, min, max and mean are wanted, else 8 bytes each (a quarter of the file). 4.3-4.8x `wc -l`
and a tenth of the file's size in memory on a 2-core machine when nothing else runs, up to 8x when
other work shares the cores (see bench/parse_speed.py).

Thinned runs: from issue 34 on, collect keeps a latency histogram per point folder instead of the full
logs (``pglab.workloads.txlog_thin``); :func:`latency_sources` says what a folder holds, and
:func:`merged_percentiles` reads either form (the percentiles of histograms are within 0.05% of the exact
ones; those of full logs alone stay exact).

Versions: 15+ write ``failed``/``serialization``/``deadlock`` in the time column of failed transactions
and a retries column when ``--max-tries`` != 1.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from pglab.errors import ParseError
from pglab.parsers import txlog_kernel, txlog_parts
from pglab.parsers.txlog_chunks import lines_before, map_file, mapped_chunks, read_chunks
from pglab.parsers.txlog_latencies import Latencies, _order_percentiles
from pglab.parsers.txlog_readers import TxLogScan, scan_chunk_arrow, scan_chunk_compiled, scan_lines
from pglab.workloads.txlog_thin import HISTOGRAM, Histogram

#: Bytes read (or scanned, of a mapped file) at a time. Memory: the chunk, its parsed columns when pyarrow
#: reads it (about as much again) and the latencies kept so far: in file order, 8 bytes per successful
#: transaction (about a quarter of the file); counted, the histograms' pages met and 8 bytes per latency
#: of 4.2 s or more.
CHUNK_BYTES = 16 << 20


def _scan(open_stream: Callable[[], BinaryIO], chunk_bytes: int, lat: Latencies, full: bool = True,
          compiled: bool = True) -> TxLogScan:
    """One pass over a log, chunk by chunk, latencies added to ``lat``; a chunk the vectorised reader
    refuses is read line by line. ``compiled``: the caller's ``txlog_kernel.worth_it`` for its input."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, not {chunk_bytes}")
    acc = TxLogScan(lat)
    scratch = txlog_parts.Scratch()
    with open_stream() as f:
        mm = map_file(f) if compiled else None
        try:
            chunks: Iterator[tuple[int, Any, int]] = (mapped_chunks(mm, chunk_bytes) if mm
                                                      else read_chunks(f, chunk_bytes))
            for offset, chunk, end in chunks:
                if compiled and scan_chunk_compiled(chunk, end, acc, scratch):
                    continue
                buf = chunk if isinstance(chunk, bytearray) else bytearray(chunk[:end])  # a mapped chunk: copied
                if not scan_chunk_arrow(buf, end, acc, full):
                    text = bytes(buf[:end]).decode("utf-8", errors="replace")
                    scan_lines(text, lines_before(open_stream, offset) + 1, acc)
        finally:
            if mm is not None:
                with contextlib.suppress(BufferError):  # a view still held (an error on the way): freed with it
                    mm.close()
    return acc


def _input_bytes(path: str | os.PathLike[str]) -> int:
    """The file's size, or 4 times that gzipped (a guess: the latency array grows if short)."""
    return os.path.getsize(path) * (4 if str(path).endswith(".gz") else 1)


def _opener(path: str | os.PathLike[str]) -> Callable[[], BinaryIO]:
    """Opens ``path`` for reading bytes; gunzipped when it ends in ``.gz`` (how pglab stores fetched logs)."""
    p = Path(path)
    if p.suffix == ".gz":
        return lambda: gzip.open(p, "rb")  # type: ignore[return-value]
    return lambda: open(p, "rb", buffering=0)  # unbuffered: read straight into the chunk buffer


def _check_seventh(seventh_column: str | None) -> None:
    if seventh_column not in (None, "lag", "retries"):
        raise ValueError(f"seventh_column must be 'lag', 'retries' or None, not {seventh_column!r}")


def _summary(acc: TxLogScan, seventh_column: str | None) -> dict[str, Any]:
    """The parse's dict from a pass's counters (frees the latencies)."""
    n = acc.check()
    layout = ["client_id", "transaction_no", "time", "script_no", "time_epoch", "time_us"]
    lag_sum = retries_sum = None
    if n == 8:
        lag_sum, retries_sum = acc.sum_col7, acc.sum_col8
        layout += ["schedule_lag", "retries"]
    elif n == 7:
        kind = seventh_column or ("lag" if acc.skipped else None)
        if kind == "lag":
            lag_sum = acc.sum_col7
        elif kind == "retries":
            retries_sum = acc.sum_col7
        layout.append({"lag": "schedule_lag", "retries": "retries", None: "lag_or_retries"}[kind])
    sum_us, count = acc.lat.sum_us, len(acc.lat)
    (p50, p95, p99), lo, hi = acc.lat.percentiles((50, 95, 99))
    return {
        "tool": "pgbench", "columns": n, "layout": layout,
        "transactions": count, "failed": acc.failed,
        "serialization_failures": acc.serialization, "deadlock_failures": acc.deadlock, "skipped": acc.skipped,
        "clients": len(acc.clients), "script_numbers": sorted(acc.scripts),
        "first_end_epoch": acc.first_end, "last_end_epoch": acc.last_end,
        "latency_avg_ms": sum_us / count / 1000.0 if count else None,
        "latency_min_ms": lo, "latency_max_ms": hi,
        "p50_ms": p50, "p95_ms": p95, "p99_ms": p99,
        "lag_avg_ms": lag_sum / acc.rows / 1000.0 if lag_sum is not None else None,
        "retries_total": retries_sum,
    }


def parse_transaction_log_file(path: str | os.PathLike[str], seventh_column: str | None = None,
                               chunk_bytes: int = CHUNK_BYTES) -> dict[str, Any]:
    """A ``-l`` log file (plain or ``.gz``), read in chunks: :func:`parse_transaction_log`'s dict and errors.

    Memory stays near a chunk plus the latencies' histograms (a few MB), whatever the file's size.
    """
    _check_seventh(seventh_column)
    size = _input_bytes(path)
    return _summary(_scan(_opener(path), chunk_bytes, Latencies(size, counted=True),
                          compiled=txlog_kernel.worth_it(size)), seventh_column)


def parse_transaction_log(text: str, seventh_column: str | None = None) -> dict[str, Any]:
    """A ``-l`` log: ``client_id transaction_no time script_no time_epoch time_us [lag] [retries]``.

    ``time`` is in microseconds, or ``skipped`` (with ``--rate`` and ``--latency-limit``), or for
    15+ ``failed`` / ``serialization`` / ``deadlock``. With 8 columns the extra two are
    schedule_lag then retries. A 7th column alone is schedule_lag (``--rate``) or retries
    (``--max-tries`` != 1): the log does not say which, so pass ``seventh_column="lag"`` or
    ``"retries"``; without it the column is read as lag only when skipped rows prove ``--rate``,
    and otherwise left out of the result (``layout`` then says ``lag_or_retries``).
    Percentiles and averages are over successful transactions; ``lag_avg_ms`` is over every
    logged row, skipped ones included. ``clients`` counts distinct client ids as numbers (the first
    parser compared them as text: '03' and '3', which pgbench never writes, counted twice). A file is
    better read with :func:`parse_transaction_log_file` (no copy of it in memory as text).
    """
    _check_seventh(seventh_column)
    data = text.encode("utf-8", errors="replace")
    return _summary(_scan(lambda: io.BytesIO(data), CHUNK_BYTES, Latencies(len(data), counted=True),
                          compiled=txlog_kernel.worth_it(len(data))), seventh_column)


LatencySource = str | os.PathLike[str] | np.ndarray


def _merge_into(lat: Latencies, items: list[LatencySource], chunk_bytes: int) -> None:
    """Every successful latency of ``items`` (logs, or arrays of ms) appended to ``lat``, in order."""
    compiled = txlog_kernel.worth_it(_sizes(items))
    for item in items:
        if isinstance(item, np.ndarray):
            lat.add_ms(np.asarray(item, dtype=np.float64).ravel())
            continue
        try:
            _scan(_opener(item), chunk_bytes, lat, full=False, compiled=compiled).check()
        except ParseError as exc:
            raise ParseError(f"{item}: {exc}") from None


def _items(x: LatencySource | Iterable[LatencySource]) -> list[LatencySource]:
    return [x] if isinstance(x, (str, os.PathLike, np.ndarray)) else list(x)


def _sizes(items: list[LatencySource]) -> int:
    return sum(x.size * 12 if isinstance(x, np.ndarray) else _input_bytes(x) for x in items)


def transaction_latencies_ms(path_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                             chunk_bytes: int = CHUNK_BYTES) -> np.ndarray:
    """The successful transactions' latencies (ms) of one log, or of several merged in the order given.

    pgbench writes one file per thread (``pgbench_log.PID``, ``pgbench_log.PID.N``), and a study wants
    exact percentiles over every transaction of several clients and repetitions, not averages of per-run
    percentiles. Only the time column is converted (about twice as fast as the full parse); the column
    count and the time column are checked, and a log refused gets :func:`parse_transaction_log`'s
    message prefixed with its path. Plain or ``.gz`` files.
    """
    paths = _items(path_or_paths)
    lat = Latencies(_sizes(paths))
    _merge_into(lat, paths, chunk_bytes)
    return lat.take()


def merged_percentiles(arrays_or_paths: LatencySource | Iterable[LatencySource],
                       qs: Sequence[float] = (50, 95, 99), chunk_bytes: int = CHUNK_BYTES,
                       ) -> dict[object, float | int | None]:
    """Percentiles over every successful transaction of several logs, latency histograms (``.json``, what
    collect keeps of a thinned point) or latency arrays (ms) merged.

    ``{"n": count, q: value, ...}``, interpolated as :func:`~pglab.parsers.txlog_latencies.percentile` does
    (numpy's default method); values are None when there is no transaction. Without a histogram they are
    exact: the latencies of logs are counted in histograms (whole microseconds below 4.2 s), the others
    merged into one array and partitioned, nothing sorted. With one, every input is counted in its buckets
    (:func:`merged_histogram`) and a percentile is within 0.05% of the exact one (exact below 2.048 ms).
    """
    items = _items(arrays_or_paths)
    if any(_is_histogram(x) for x in items):
        h = merged_histogram(items, chunk_bytes)
        pct, _, _ = _order_percentiles(h.count, lambda ranks: {k: v / 1000.0 for k, v in h.values_at(ranks).items()},
                                       qs)
        return {"n": h.count, **dict(zip(qs, pct, strict=True))}
    lat = Latencies(_sizes(items), counted=True)
    _merge_into(lat, items, chunk_bytes)
    n = len(lat)
    pct, _, _ = lat.percentiles(qs)
    return {"n": n, **dict(zip(qs, pct, strict=True))}


def _is_histogram(item: LatencySource) -> bool:
    return not isinstance(item, np.ndarray) and str(item).endswith(".json")


def merged_histogram(items: Iterable[LatencySource], chunk_bytes: int = CHUNK_BYTES) -> Histogram:
    """One latency histogram of histograms, logs (read as :func:`transaction_latencies_ms` does) and arrays
    of ms (rounded to whole microseconds, as pgbench logs them) merged; a file that is neither is refused
    with a ParseError naming it."""
    out = Histogram()
    for item in _items(items):  # type: ignore[arg-type]
        if _is_histogram(item):
            try:
                out.merge(Histogram.read(item))  # type: ignore[arg-type]
            except ValueError as exc:
                raise ParseError(f"{item}: {exc}") from None
            continue
        ms = np.asarray(item, dtype=np.float64).ravel() if isinstance(item, np.ndarray) else \
            transaction_latencies_ms(item, chunk_bytes)  # type: ignore[arg-type]
        if not np.isfinite(ms).all():
            raise ValueError("latencies must be finite")
        out.add_us(np.rint(ms * 1000.0).astype(np.int64))
    return out


def latency_sources(folder: str | os.PathLike[str]) -> list[Path]:
    """What a point's log folder holds for latencies: its histogram (a run thinned at collect, or a folder
    being thinned: the histogram is complete before a log is removed), else its full logs, sorted."""
    d = Path(folder)
    h = d / HISTOGRAM
    return [h] if h.is_file() else sorted(d.glob("pgbench_log*"))
