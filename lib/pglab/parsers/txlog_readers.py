"""The three readers of a chunk of per-transaction log, and what a pass over a log keeps.

Why: the compiled loop (``txlog_parts``) takes only lines exactly as pgbench writes them; pyarrow's CSV
reader (blocks of a chunk parsed on every core) takes what it refuses, and the line-by-line rules,
the reference, read what both refuse and name a bad line. Each reader adds to the same counters
(:class:`TxLogScan`) and latencies, never rows, and gives the same numbers for what it accepts. With
pyarrow every field is converted to an unsigned integer; the words of the time column are read as
nulls and told apart by counting letters only one of them has (faster than reading that column as
text). A chunk the vectorised reader refuses, or where it could read what the line-by-line rules
refuse, is read again line by line with those rules: bad input gets the same error, with its line
number, and what a whitespace split accepts (tabs, runs of spaces, ``\\r``) the same numbers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pglab.errors import ParseError
from pglab.parsers import txlog_parts
from pglab.parsers.text import split_lines
from pglab.parsers.txlog_latencies import Latencies

_FAIL_WORDS = {"failed", "serialization", "deadlock"}
_TIME_WORDS = ("failed", "serialization", "deadlock", "skipped")
_BLOCK_BYTES = 4 << 20  # pyarrow parses the blocks of a chunk in parallel
_EXPECTED_LINE = ("'client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]' "
                  "with time in microseconds or failed/serialization/deadlock/skipped")


@dataclass
class TxLogScan:
    """What one pass over a log keeps: counters and the successful latencies (ms), not rows."""

    lat: Latencies = field(default_factory=Latencies)
    rows: int = 0
    failed: int = 0
    serialization: int = 0
    deadlock: int = 0
    skipped: int = 0
    columns: set[int] = field(default_factory=set)
    clients: set[int] = field(default_factory=set)
    scripts: set[int] = field(default_factory=set)
    first_end: float = math.inf
    last_end: float = -math.inf
    sum_col7: int = 0  # 7th column (lag or retries) over every row
    sum_col8: int = 0

    def check(self) -> int:
        """The column count, after refusing what is not a log (the line-by-line parser's messages)."""
        if not self.rows:
            raise ParseError("not a pgbench per-transaction log: no transaction lines")
        if len(self.columns) != 1:
            raise ParseError(f"not a pgbench per-transaction log: lines have {sorted(self.columns)} columns; "
                             "one log always has the same number")
        return next(iter(self.columns))


def scan_lines(text: str, first_lineno: int, acc: TxLogScan) -> None:
    """Line-by-line rules (the reference): a bad line is an error naming it, blank lines are skipped."""
    lat: list[int] = []
    for lineno, raw in enumerate(split_lines(text), first_lineno):
        tok = raw.split()
        if not tok:
            continue
        ok = 6 <= len(tok) <= 8 and all(t.isdigit() for t in tok[:2] + tok[3:])
        t = tok[2] if ok else ""
        if not ok or not (t.isdigit() or t in _FAIL_WORDS or t == "skipped"):
            raise ParseError(f"not a pgbench per-transaction log: line {lineno} is {raw.strip()[:80]!r}; "
                             f"expected {_EXPECTED_LINE}")
        if t.isdigit():
            lat.append(int(t))
        elif t == "skipped":
            acc.skipped += 1
        else:
            acc.failed += 1
            acc.serialization += t == "serialization"
            acc.deadlock += t == "deadlock"
        acc.rows += 1
        acc.columns.add(len(tok))
        acc.clients.add(int(tok[0]))
        acc.scripts.add(int(tok[3]))
        end = int(tok[4]) + int(tok[5]) / 1e6
        acc.first_end, acc.last_end = min(acc.first_end, end), max(acc.last_end, end)
        acc.sum_col7 += int(tok[6]) if len(tok) > 6 else 0
        acc.sum_col8 += int(tok[7]) if len(tok) > 7 else 0
    acc.lat.add_ms(np.array([v / 1000.0 for v in lat], dtype=np.float64))
    acc.lat.sum_us += sum(lat)


@functools.cache
def _arrow_options() -> dict[str, Any]:
    """pyarrow and its CSV options, imported on first use (a second of import the other parsers don't need)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pv

    # unsigned: a sign is refused, as by isdigit(); uint32 converts faster, uint64 when a value overflows it.
    # The words of the time column read as nulls (anywhere else, a null is refused).
    kinds = [{f"f{i}": t for i in range(8)} for t in (pa.uint32(), pa.uint64())]
    return {
        "pa": pa, "pc": pc, "pv": pv,
        # no quoting: a log has none, and the tokenizer is faster without
        "parse": pv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False),
        "full": [pv.ConvertOptions(column_types=types, null_values=list(_TIME_WORDS)) for types in kinds],
        "latencies": [pv.ConvertOptions(column_types=types, include_columns=["f2"], null_values=list(_TIME_WORDS))
                      for types in kinds],
    }


def _count_byte(buf: bytearray, end: int, byte: bytes, sparse: bool) -> int:
    """How many times ``byte`` occurs in ``buf[:end]``: memchr hops when rare, one numpy pass otherwise."""
    if not sparse:
        return int(np.count_nonzero(np.frombuffer(buf, dtype=np.uint8, count=end) == byte[0]))
    n, i = 0, buf.find(byte, 0, end)
    while i >= 0:
        n, i = n + 1, buf.find(byte, i + 1, end)
    return n


def _add_distinct(known: set[int], col: Any, pc: Any) -> None:
    """Add a column's distinct values to ``known``; a min/max pass suffices when they lie in a known range."""
    mm = pc.min_max(col).as_py()
    if known and len(known) == max(known) - min(known) + 1 and min(known) <= mm["min"] and mm["max"] <= max(known):
        return
    known.update(pc.unique(col).to_pylist())


def scan_chunk_arrow(buf: bytearray, end: int, acc: TxLogScan, full: bool) -> bool:
    """Add ``buf[:end]`` (whole lines) to ``acc`` vectorised; False, with ``acc`` untouched, if it can't.

    ``full`` converts every column (the parse's counters); otherwise only the time column is converted
    (latencies), the others are only counted.
    """
    # pyarrow reads '0x1F' as an integer; isdigit() does not (no 'x' or 'X' in the words either)
    if buf.find(b"x", 0, end) >= 0 or buf.find(b"X", 0, end) >= 0:
        return False
    o = _arrow_options()
    pa, pc, pv = o["pa"], o["pc"], o["pv"]
    if not full:
        nl = buf.find(b"\n", 0, end)
        first = bytes(buf[:nl if nl >= 0 else end]).rstrip(b"\r")
        ncols = first.count(b" ") + 1  # pyarrow checks that every row of the chunk has as many
        if not first or not 6 <= ncols <= 8:
            return False
    read = pv.ReadOptions(autogenerate_column_names=True, block_size=min(_BLOCK_BYTES, end))
    table = None
    with memoryview(buf) as view:
        for convert in o["full" if full else "latencies"]:
            try:
                table = pv.read_csv(pa.py_buffer(view[:end]), read_options=read, parse_options=o["parse"],
                                    convert_options=convert)
                break
            except pa.ArrowInvalid:
                continue
    if table is None:
        return False
    if not full:
        col = table.column(0)
        acc.lat.add_us(pc.drop_null(col).to_numpy())
        acc.rows += table.num_rows
        acc.failed += col.null_count  # failed and skipped together: not told apart here
        acc.columns.add(ncols)
        return True
    ncols = table.num_columns
    if not 6 <= ncols <= 8 or any(table.column(i).null_count for i in range(ncols) if i != 2):
        return False
    time_col = table.column(2)
    words = time_col.null_count
    failed = serialization = deadlock = 0
    if words:
        # Every other token converted to an unsigned decimal and none holds an 'x', so the only letters
        # are the words' own: 'f' is only in failed, 'z' in serialization, 'c' in deadlock.
        sparse = words < 20_000  # Python hops cost less than numpy passes
        failed, serialization, deadlock = (_count_byte(buf, end, c, sparse) for c in (b"f", b"z", b"c"))
        if failed + serialization + deadlock > words:
            return False
    epoch = table.column(4).to_numpy().astype(np.float64)
    ends = epoch + table.column(5).to_numpy() / 1e6  # int + int / 1e6, in doubles as in Python
    acc.lat.add_us((pc.drop_null(time_col) if words else time_col).to_numpy())
    acc.rows += table.num_rows
    acc.failed += failed + serialization + deadlock
    acc.serialization += serialization
    acc.deadlock += deadlock
    acc.skipped += words - failed - serialization - deadlock
    acc.columns.add(ncols)
    _add_distinct(acc.clients, table.column(0), pc)
    _add_distinct(acc.scripts, table.column(3), pc)
    acc.first_end, acc.last_end = min(acc.first_end, float(ends.min())), max(acc.last_end, float(ends.max()))
    acc.sum_col7 += pc.sum(table.column(6)).as_py() if ncols > 6 else 0
    acc.sum_col8 += pc.sum(table.column(7)).as_py() if ncols > 7 else 0
    return True


def scan_chunk_compiled(buf: bytearray | memoryview, end: int, acc: TxLogScan, scratch: txlog_parts.Scratch,
                         ) -> bool:
    """Add ``buf[:end]`` to ``acc`` through the compiled loop; False, ``acc`` untouched, if it refuses."""
    got = txlog_parts.scan_chunk(buf, end, txlog_parts.CORES, acc.lat.hists, scratch)
    if got is None:
        return False
    acc.lat.add_compiled(got)
    acc.rows += got["rows"]
    acc.failed += got["failed"]  # every failure word, as in the line-by-line rules
    acc.serialization += got["serialization"]
    acc.deadlock += got["deadlock"]
    acc.skipped += got["skipped"]
    acc.columns |= got["columns"]
    acc.clients |= got["clients"]
    acc.scripts |= got["scripts"]
    if got["rows"]:
        acc.first_end, acc.last_end = min(acc.first_end, got["first_end"]), max(acc.last_end, got["last_end"])
    acc.sum_col7 += got["sum7"]
    acc.sum_col8 += got["sum8"]
    return True
