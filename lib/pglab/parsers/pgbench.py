"""Parsers for what pgbench prints and writes: run summaries, ``-i`` output, ``-l`` logs.

Why: pglab keeps the raw tool output of every run and derives numbers from it afterwards, so a
study can be re-analysed and a parser bug fixed without re-running anything. A study may meet any
pgbench from 9.5 to 18, so the parsers follow the output of each, not only the one installed here.
Every function returns a plain JSON-serialisable dict and raises :class:`ParseError`, saying what
was expected, when the text is not the output it parses.

Version differences handled (tests/data holds real output of 9.6, 14, 15 and 18):

* summary, <= 13: ``tps = N (including connections establishing)`` then
  ``tps = N (excluding connections establishing)``; 14+: ``initial connection time = N ms`` and
  ``tps = N (without initial connection time)``. ``tps`` is always the rate without connection time.
* summary, 14+: a first line ``pgbench (15.20 (Debian ...))``, or ``pgbench (18.6, server 15.20 ...)``
  when client and server differ; older versions print no version.
* summary, 15+: ``maximum number of tries``, ``number of failed transactions``, with
  ``--max-tries`` > 1 retry counts, with ``--failures-detailed`` serialization/deadlock counts;
  ``failed`` is 0 for older versions, which abort a client instead of counting a failure.
* summary, 9.5: ``latency average: N ms`` (colon), 9.6+: ``latency average = N ms``.
* per-script sections (``-b``/``-f`` more than once): 18 (not 15; 16/17 unchecked) prints the tps
  in a line ``- number of transactions actually processed: N (tps = X)``; 14 and 15 in
  ``- N transactions (P% of total, tps = X)``. Both are read.
* ``-r`` statement lines: one number (latency) before 15, two (latency, failures) in 15+, three
  (latency, failures, retries) with ``--max-tries`` > 1.
* progress (``-P``, on stderr): ``progress: T s, X tps, lat L ms stddev S`` followed, depending on
  version and options, by ``N failed`` (15+), ``N retried, N retries``, ``lag L ms``, ``N skipped``.
* ``--aggregate-interval`` logs: 9.5-14 write 6 columns, 10 with ``--rate``, 11 with ``--rate``
  and ``--latency-limit``; 15+ always write 15 (see :data:`AGGREGATE_LAYOUTS`).
* ``-l`` logs: 15+ write ``failed``/``serialization``/``deadlock`` in the time column of failed
  transactions and a retries column when ``--max-tries`` != 1.
* ``-i``: 13+ end with ``done in T s (drop tables T s, ...).``; 12 and older print ``done.`` and no
  times. On a terminal pgbench ends its progress lines with ``\\r``, so ``\\r`` separates lines too.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import math
import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from pglab.errors import ParseError
from pglab.parsers import txlog_kernel

_NUM = r"(-?nan|NaN|-?inf|[-+]?\d+(?:\.\d+)?)"


def _lines(text: str) -> list[str]:
    """Split on \\n, \\r\\n and bare \\r: pgbench rewrites progress lines with \\r on a terminal."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _float(s: str | None) -> float | None:
    """A printed number, or None for a missing one or a NaN (pgbench prints NaN with 0 samples)."""
    if s is None:
        return None
    v = float(s)
    return None if math.isnan(v) or math.isinf(v) else v


def _numeric_version(s: str) -> str:
    """'15.20' from '15.20' / '18.6,' / '9.6.10'; keeps only the leading dotted number."""
    m = re.match(r"\d+(?:\.\d+)*", s)
    return m.group(0) if m else s


# --------------------------------------------------------------------------------------------
# run summary
# --------------------------------------------------------------------------------------------

_PROGRESS_RE = re.compile(
    rf"^progress: {_NUM} s, {_NUM} tps, lat {_NUM} ms stddev {_NUM}(?P<rest>(?:, .*)?)$")
_PROGRESS_ITEMS = {
    "failed": re.compile(r"^(\d+) failed$"),
    "retried": re.compile(r"^(\d+) retried$"),
    "retries": re.compile(r"^(\d+) retries$"),
    "lag_ms": re.compile(rf"^lag {_NUM} ms$"),
    "skipped": re.compile(r"^(\d+) skipped$"),
}


@dataclass
class ProgressLine:
    """One ``-P`` report: rates over the last interval, not cumulative values."""

    time_s: float
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    failed: int = 0
    retried: int | None = None
    retries: int | None = None
    lag_ms: float | None = None
    skipped: int | None = None


def parse_progress(text: str) -> list[dict[str, Any]]:
    """Every ``progress:`` line of a text (stdout or stderr, any version), in order."""
    out: list[dict[str, Any]] = []
    for line in _lines(text):
        m = _PROGRESS_RE.match(line.strip())
        if not m:
            continue
        p = ProgressLine(time_s=float(m.group(1)), tps=_float(m.group(2)),
                         latency_avg_ms=_float(m.group(3)), latency_stddev_ms=_float(m.group(4)))
        for item in filter(None, (s.strip() for s in m.group("rest").split(","))):
            for key, rx in _PROGRESS_ITEMS.items():
                im = rx.match(item)
                if im:
                    value = _float(im.group(1)) if key == "lag_ms" else int(im.group(1))
                    setattr(p, key, value)
                    break
        out.append(asdict(p))
    return out


# one (regex, handler) per summary line; a handler stores what the line says into the result dict
_SUMMARY_LINES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^transaction type: (.+)$"), "transaction_type"),
    (re.compile(r"^scaling factor: (\d+)$"), "scaling_factor"),
    (re.compile(r"^query mode: (\S+)$"), "query_mode"),
    (re.compile(r"^number of clients: (\d+)$"), "clients"),
    (re.compile(r"^number of threads: (\d+)$"), "threads"),
    (re.compile(r"^maximum number of tries: (\d+)$"), "max_tries"),
    (re.compile(r"^duration: (\d+) s$"), "duration_s"),
    (re.compile(r"^number of transactions per client: (\d+)$"), "transactions_per_client"),
    (re.compile(r"^number of serialization failures: (\d+)"), "serialization_failures"),
    (re.compile(r"^number of deadlock failures: (\d+)"), "deadlock_failures"),
    (re.compile(r"^number of transactions retried: (\d+)"), "retried"),
    (re.compile(r"^total number of retries: (\d+)$"), "retries"),
    (re.compile(r"^number of transactions skipped: (\d+)"), "skipped"),
    (re.compile(r"^latency stddev\s*[=:]\s*" + _NUM + r" ms"), "latency_stddev_ms"),
    (re.compile(r"^initial connection time = " + _NUM + r" ms$"), "initial_connection_ms"),
]
_INT_KEYS = {"scaling_factor", "clients", "threads", "max_tries", "duration_s",
             "transactions_per_client", "serialization_failures", "deadlock_failures", "retried",
             "retries", "skipped"}

_PROCESSED_RE = re.compile(r"^number of transactions actually processed: (\d+)(?:/(\d+))?")
_FAILED_RE = re.compile(r"^number of failed transactions: (\d+)")
_LATENCY_AVG_RE = re.compile(r"^latency average\s*[=:]\s*" + _NUM + r" ms( \(including failures\))?")
_LATE_RE = re.compile(r"^number of transactions above the ([\d.]+) ms latency limit: (\d+)")
_LAG_RE = re.compile(rf"^rate limit schedule lag: avg {_NUM} \(max {_NUM}\) ms")
_TPS_OLD_RE = re.compile(rf"^tps = {_NUM} \((including|excluding) connections establishing\)")
_TPS_NEW_RE = re.compile(rf"^tps = {_NUM} \(without initial connection time\)")
_VERSION_RE = re.compile(r"^pgbench \((\d[^\s,]*)(.*)\)\s*$")
_SCRIPT_RE = re.compile(r"^SQL script (\d+): (.*)$")
_STMT_HEADER_RE = re.compile(r"^(?:\s*- )?statement latencies in milliseconds(.*):$")


def _statement_columns(header_rest: str) -> int:
    """How many numbers start each statement line, from the words after 'milliseconds'."""
    if "retries" in header_rest:
        return 3
    if "failures" in header_rest:
        return 2
    return 1


def _parse_statements(lines: list[str], start: int, ncols: int) -> tuple[list[dict[str, Any]], int]:
    """Statement lines from index ``start``; returns them and the index after the last one."""
    rx = re.compile(r"^\s*" + r"\s+".join([_NUM] * ncols) + r"\s+(\S.*)$")
    stmts: list[dict[str, Any]] = []
    i = start
    while i < len(lines):
        m = rx.match(lines[i])
        if not m:
            break
        stmt: dict[str, Any] = {"latency_ms": _float(m.group(1)), "failures": None, "retries": None,
                                "command": m.group(ncols + 1).strip()}
        if ncols >= 2:
            stmt["failures"] = int(m.group(2))
        if ncols >= 3:
            stmt["retries"] = int(m.group(3))
        stmts.append(stmt)
        i += 1
    return stmts, i


@dataclass
class ScriptReport:
    """One ``SQL script N:`` section, printed when a run mixes several scripts."""

    number: int
    name: str
    weight: int | None = None
    transactions: int | None = None
    tps: float | None = None
    failed: int = 0
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    statements: list[dict[str, Any]] = field(default_factory=list)


def _parse_scripts(lines: list[str]) -> list[dict[str, Any]]:
    """The per-script sections (lines from the first ``SQL script`` header on)."""
    scripts: list[ScriptReport] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _SCRIPT_RE.match(line)
        if m:
            scripts.append(ScriptReport(number=int(m.group(1)), name=m.group(2).strip()))
            i += 1
            continue
        if not scripts:
            i += 1
            continue
        s = scripts[-1]
        body = line.strip()
        if (m := re.match(r"^- weight: (\d+)", body)):
            s.weight = int(m.group(1))
        elif (m := re.match(rf"^- (\d+) transactions \([^)]*?(?:, tps = {_NUM})?\)$", body)):
            s.transactions = int(m.group(1))
            if m.group(2) is not None:
                s.tps = _float(m.group(2))
        elif (m := re.match(rf"^- number of transactions actually processed: (\d+) \(tps = {_NUM}\)", body)):
            s.transactions = int(m.group(1))
            s.tps = _float(m.group(2))
        elif (m := re.match(r"^- number of failed transactions: (\d+)", body)):
            s.failed = int(m.group(1))
        elif (m := re.match(r"^- latency average\s*[=:]\s*" + _NUM, body)):
            s.latency_avg_ms = _float(m.group(1))
        elif (m := re.match(r"^- latency stddev\s*[=:]\s*" + _NUM, body)):
            s.latency_stddev_ms = _float(m.group(1))
        elif (m := _STMT_HEADER_RE.match(body)):
            s.statements, i = _parse_statements(lines, i + 1, _statement_columns(m.group(1)))
            continue
        i += 1
    return [asdict(s) for s in scripts]


def parse_summary(stdout: str, stderr: str = "") -> dict[str, Any]:
    """The end-of-run summary of ``pgbench`` (not ``-i``), plus ``-P`` progress from either stream.

    ``stdout`` may also be both streams merged (as printed in articles); progress lines are taken
    from both arguments, stdout first.
    """
    lines = [ln.rstrip() for ln in _lines(stdout)]
    if not any(ln.startswith("number of transactions actually processed:") for ln in lines):
        hint = ""
        errs = [ln for ln in _lines(stderr) + lines
                if ln.startswith(("pgbench: error", "pgbench: fatal", "connection to", "FATAL:"))]
        if errs:
            hint = f"; the run seems to have failed: {errs[0].strip()}"
        elif parse_progress(stdout + "\n" + stderr):
            hint = "; only progress lines were found (is this the stderr of a run?)"
        raise ParseError("not a pgbench run summary: expected a line 'number of transactions actually "
                         "processed: N' (pgbench prints it on stdout at the end of a run)" + hint)

    r: dict[str, Any] = {
        "tool": "pgbench", "version": None, "server_version": None, "transaction_type": None,
        "scaling_factor": None, "query_mode": None, "clients": None, "threads": None,
        "max_tries": None, "duration_s": None,
        "transactions_per_client": None, "transactions": None, "transactions_planned": None,
        "failed": 0, "serialization_failures": None, "deadlock_failures": None, "retried": None,
        "retries": None, "skipped": None, "latency_limit_ms": None, "above_latency_limit": None,
        "tps": None, "tps_including_connections": None, "tps_kind": None,
        "latency_avg_ms": None, "latency_avg_includes_failures": False, "latency_stddev_ms": None,
        "lag_avg_ms": None, "lag_max_ms": None, "initial_connection_ms": None, "aborted": False,
        "statements": [], "scripts": [], "progress": [],
    }
    main = lines
    for idx, ln in enumerate(lines):
        if _SCRIPT_RE.match(ln):
            main, r["scripts"] = lines[:idx], _parse_scripts(lines[idx:])
            break

    i = 0
    while i < len(main):
        ln = main[i]
        i += 1
        if (m := _VERSION_RE.match(ln)) and r["version"] is None:
            r["version"] = _numeric_version(m.group(1))
            if (sm := re.match(r"^, server (\d\S*)", m.group(2))):
                r["server_version"] = _numeric_version(sm.group(1))
            continue
        if (m := _PROCESSED_RE.match(ln)):
            r["transactions"] = int(m.group(1))
            r["transactions_planned"] = int(m.group(2)) if m.group(2) else None
            continue
        if (m := _FAILED_RE.match(ln)):
            r["failed"] = int(m.group(1))
            continue
        if (m := _LATENCY_AVG_RE.match(ln)):
            r["latency_avg_ms"] = _float(m.group(1))
            r["latency_avg_includes_failures"] = bool(m.group(2))
            continue
        if (m := _LATE_RE.match(ln)):
            r["latency_limit_ms"] = float(m.group(1))
            r["above_latency_limit"] = int(m.group(2))
            continue
        if (m := _LAG_RE.match(ln)):
            r["lag_avg_ms"], r["lag_max_ms"] = _float(m.group(1)), _float(m.group(2))
            continue
        if (m := _TPS_OLD_RE.match(ln)):
            if m.group(2) == "including":
                r["tps_including_connections"] = _float(m.group(1))
            else:
                r["tps"] = _float(m.group(1))
                r["tps_kind"] = "excluding connections establishing"
            continue
        if (m := _TPS_NEW_RE.match(ln)):
            r["tps"] = _float(m.group(1))
            r["tps_kind"] = "without initial connection time"
            continue
        if ln.startswith("Run was aborted"):
            r["aborted"] = True
            continue
        if (m := _STMT_HEADER_RE.match(ln)):
            r["statements"], i = _parse_statements(main, i, _statement_columns(m.group(1)))
            continue
        for rx, key in _SUMMARY_LINES:
            if (m := rx.match(ln)):
                r[key] = int(m.group(1)) if key in _INT_KEYS else (
                    m.group(1).strip() if key in ("transaction_type", "query_mode") else _float(m.group(1)))
                break
    r["progress"] = parse_progress(stdout) + parse_progress(stderr)
    if re.search(r"^pgbench: (?:error|fatal): .*aborted", stderr, re.M):
        r["aborted"] = True
    return r


# --------------------------------------------------------------------------------------------
# pgbench -i
# --------------------------------------------------------------------------------------------

_INIT_MARKERS = re.compile(
    r"^(dropping old tables\.\.\.|creating tables\.\.\.|generating data.*\.\.\.|vacuum\.\.\.|"
    r"vacuuming\.\.\.|set primary keys\.\.\.|creating primary keys\.\.\.|creating foreign keys\.\.\.|"
    r"done\.|done in .*)$")
_TUPLES_RE = re.compile(r"^(\d+) of (\d+) tuples \((\d+)%\)(?: of (\w+))? done")
_DONE_IN_RE = re.compile(r"^done in ([\d.]+) s \((.*)\)\.?$")
# a patched 9.6 (the AWS timing patch, as printed in tests/data/pgbench/9.6/article_init.txt)
_TOTAL_TIME_RE = re.compile(r"^total time: ([\d.]+) s \((.*)\)$")
_PHASE_RE = re.compile(r"^(.*?) ([\d.]+) s$")


def _phases(spec: str) -> dict[str, float]:
    """'drop tables 0.01 s, vacuum 0.10 s' -> {'drop tables': 0.01, 'vacuum': 0.1}."""
    out: dict[str, float] = {}
    for part in spec.split(","):
        m = _PHASE_RE.match(part.strip())
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def looks_like_init(text: str) -> bool:
    """True when some line is a ``pgbench -i`` step or data-generation progress line."""
    return any(_INIT_MARKERS.match(ln.strip()) or _TUPLES_RE.match(ln.strip()) for ln in _lines(text))


def parse_init(stderr: str) -> dict[str, Any]:
    """Output of ``pgbench -i`` (stderr; stdout merged in is fine).

    ``init_total_s``/``phases`` come from the ``done in`` line of 13+; 12 and older print no
    times (both stay null/empty) but the output is still recognised by its step lines.
    """
    lines = [ln.strip() for ln in _lines(stderr)]
    steps = [ln for ln in lines if _INIT_MARKERS.match(ln)]
    tuples = [m for ln in lines if (m := _TUPLES_RE.match(ln))]
    if not steps and not tuples:
        raise ParseError("not pgbench -i output: expected step lines such as 'creating tables...' or "
                         "'done in N s (...)', or 'N of M tuples (P%) done' progress lines")
    r: dict[str, Any] = {"tool": "pgbench", "init_total_s": None, "phases": {}, "phase_format": None,
                         "generate": None, "tuples_generated": None, "tuples_total": None,
                         "completed": False, "steps": [s.rstrip(".") for s in steps]}
    for ln in lines:
        if (m := _DONE_IN_RE.match(ln) or _TOTAL_TIME_RE.match(ln)):
            r["init_total_s"], r["phases"] = float(m.group(1)), _phases(m.group(2))
            r["phase_format"] = "done in" if ln.startswith("done in") else "total time"
            r["completed"] = r["completed"] or ln.startswith("done in")
        elif ln == "done.":
            r["completed"] = True
        elif (m := re.match(r"^generating data \((.*)\)\.\.\.$", ln)):
            r["generate"] = m.group(1)
    if tuples:
        r["tuples_generated"], r["tuples_total"] = int(tuples[-1].group(1)), int(tuples[-1].group(2))
    return r


# --------------------------------------------------------------------------------------------
# -l per-transaction log
# --------------------------------------------------------------------------------------------
#
# A paper-profile point writes logs of about 1 GB, so a log is read in chunks, through the compiled loop
# of txlog_kernel (every core, a plain file mapped rather than copied) or, for what it refuses, vectorised
# (pyarrow's CSV reader, blocks of a chunk parsed on every core), keeping counters and the successful
# latencies, never rows: counted (_Latencies) when only percentiles, min, max and mean are wanted, else 8
# bytes each (a quarter of the file). With pyarrow every field is converted to an unsigned integer;
# the words of the time column are read as nulls and told apart by counting letters only one of them
# has (faster than reading that column as text). A chunk the vectorised reader refuses, or where it
# could read what the line-by-line rules refuse, is read again line by line with those rules: bad
# input gets the same error, with its line number, and what a whitespace split accepts (tabs, runs of
# spaces, ``\r``) the same numbers.

_FAIL_WORDS = {"failed", "serialization", "deadlock"}
_TIME_WORDS = ("failed", "serialization", "deadlock", "skipped")
#: Bytes read (or scanned, of a mapped file) at a time. Memory: the chunk, its parsed columns when pyarrow
#: reads it (about as much again) and the latencies kept so far: in file order, 8 bytes per successful
#: transaction (about a quarter of the file); counted, the histograms' pages met and 8 bytes per latency
#: of 4.2 s or more.
CHUNK_BYTES = 16 << 20
_BLOCK_BYTES = 4 << 20  # pyarrow parses the blocks of a chunk in parallel
_EXPECTED_LINE = ("'client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]' "
                  "with time in microseconds or failed/serialization/deadlock/skipped")


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


class _Latencies:
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
        self.hists = np.zeros((_CORES, txlog_kernel.HIST_US), dtype=np.int64) if counted else None
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
        """What :func:`txlog_kernel.scan_chunk` read into ``self.hists`` and returned."""
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


@dataclass
class _TxLogScan:
    """What one pass over a log keeps: counters and the successful latencies (ms), not rows."""

    lat: _Latencies = field(default_factory=_Latencies)
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


def _scan_lines(text: str, first_lineno: int, acc: _TxLogScan) -> None:
    """Line-by-line rules (the reference): a bad line is an error naming it, blank lines are skipped."""
    lat: list[int] = []
    for lineno, raw in enumerate(_lines(text), first_lineno):
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


def _scan_chunk_arrow(buf: bytearray, end: int, acc: _TxLogScan, full: bool) -> bool:
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


def _scan_chunk_compiled(buf: bytearray | memoryview, end: int, acc: _TxLogScan, scratch: txlog_kernel.Scratch,
                         ) -> bool:
    """Add ``buf[:end]`` to ``acc`` through the compiled loop; False, ``acc`` untouched, if it refuses."""
    got = txlog_kernel.scan_chunk(buf, end, _CORES, acc.lat.hists, scratch)
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


_CORES = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _fill(stream: BinaryIO, buf: bytearray, start: int) -> int:
    """Read into ``buf[start:]`` until it is full or the stream ends; the end of the data in ``buf``."""
    pos = start
    with memoryview(buf) as view:
        while pos < len(buf):
            n = stream.readinto(view[pos:])
            if not n:
                break
            pos += n
    return pos


def _chunks(stream: BinaryIO, chunk_bytes: int) -> Iterator[tuple[int, bytearray, int]]:
    """``(offset, buf, end)``: ``buf[:end]`` holds whole lines read from ``offset`` of the stream.

    One buffer is reused (valid until the next item); a line longer than it grows it.
    """
    buf = bytearray(max(chunk_bytes, 1))
    keep = offset = 0  # keep: bytes of an unfinished line carried to the front of buf
    while True:
        end = _fill(stream, buf, keep)
        if end < len(buf):  # end of the stream
            if end:
                yield offset, buf, end
            return
        cut = buf.rfind(b"\n", 0, end) + 1
        if cut == 0:
            buf, keep = buf + bytearray(len(buf)), end
            continue
        yield offset, buf, cut
        offset += cut
        keep = end - cut
        buf[:keep] = buf[cut:end]


def _mapped(stream: BinaryIO) -> mmap.mmap | None:
    """A plain file mapped in memory, or None (gzip, bytes, empty, or a file that can't be mapped).

    Why: the compiled loop then reads the page cache in place, where copying the file into a buffer
    took a sixth of the parse, on one core while the others waited. Copy-on-write, so that the arrays
    on it are writable as the loop's signature wants; nothing is written. A log truncated while it is
    read would end the process (SIGBUS), as with any mapped file: pglab reads finished logs.
    """
    if not isinstance(stream, io.FileIO):
        return None
    try:
        if os.fstat(stream.fileno()).st_size == 0:
            return None
        return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None


def _mapped_chunks(mm: mmap.mmap, chunk_bytes: int) -> Iterator[tuple[int, memoryview, int]]:
    """:func:`_chunks` of a mapped file: ``view`` is the mapping from ``offset`` to the end of the file
    (valid until the next item), ``view[:end]`` whole lines. Pages are dropped from the process once
    scanned (they stay in the page cache), so it holds about a chunk of the file, not all of it."""
    size = len(mm)
    drop = getattr(mmap, "MADV_DONTNEED", None)
    offset = 0
    while offset < size:
        stop = offset + chunk_bytes
        if stop >= size:
            stop = size
        else:
            cut = mm.rfind(b"\n", offset, stop) + 1
            stop = cut if cut > offset else (mm.find(b"\n", stop) + 1 or size)  # a line longer than a chunk
        view = memoryview(mm)[offset:]
        yield offset, view, stop - offset
        view.release()
        page = mmap.PAGESIZE
        if drop is not None and stop // page > offset // page:
            mm.madvise(drop, offset // page * page, (stop // page - offset // page) * page)
        offset = stop


def _lines_before(open_stream: Callable[[], BinaryIO], nbytes: int) -> int:
    """How many lines (as :func:`_lines` splits them) the first ``nbytes`` hold: only for an error message."""
    count, after_cr = 0, False
    with open_stream() as f:
        while nbytes > 0:
            data = f.read(min(nbytes, 16 << 20))
            if not data:
                break
            nbytes -= len(data)
            count += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") - (after_cr and data[:1] == b"\n")
            after_cr = data[-1:] == b"\r"
    return count


def _scan(open_stream: Callable[[], BinaryIO], chunk_bytes: int, lat: _Latencies, full: bool = True) -> _TxLogScan:
    """One pass over a log, chunk by chunk, latencies added to ``lat``; a chunk the vectorised reader
    refuses is read line by line."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, not {chunk_bytes}")
    acc = _TxLogScan(lat)
    compiled = txlog_kernel.available()
    scratch = txlog_kernel.Scratch()
    with open_stream() as f:
        mm = _mapped(f) if compiled else None
        try:
            chunks: Iterator[tuple[int, Any, int]] = _mapped_chunks(mm, chunk_bytes) if mm else _chunks(f, chunk_bytes)
            for offset, chunk, end in chunks:
                if compiled and _scan_chunk_compiled(chunk, end, acc, scratch):
                    continue
                buf = chunk if isinstance(chunk, bytearray) else bytearray(chunk[:end])  # a mapped chunk: copied
                if not _scan_chunk_arrow(buf, end, acc, full):
                    text = bytes(buf[:end]).decode("utf-8", errors="replace")
                    _scan_lines(text, _lines_before(open_stream, offset) + 1, acc)
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


def _summary(acc: _TxLogScan, seventh_column: str | None) -> dict[str, Any]:
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
    return _summary(_scan(_opener(path), chunk_bytes, _Latencies(_input_bytes(path), counted=True)),
                    seventh_column)


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
    return _summary(_scan(lambda: io.BytesIO(data), CHUNK_BYTES, _Latencies(len(data), counted=True)),
                    seventh_column)


LatencySource = str | os.PathLike[str] | np.ndarray


def _merge_into(lat: _Latencies, items: Iterable[LatencySource], chunk_bytes: int) -> None:
    """Every successful latency of ``items`` (logs, or arrays of ms) appended to ``lat``, in order."""
    for item in items:
        if isinstance(item, np.ndarray):
            lat.add_ms(np.asarray(item, dtype=np.float64).ravel())
            continue
        try:
            _scan(_opener(item), chunk_bytes, lat, full=False).check()
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
    lat = _Latencies(_sizes(paths))
    _merge_into(lat, paths, chunk_bytes)
    return lat.take()


def merged_percentiles(arrays_or_paths: LatencySource | Iterable[LatencySource],
                       qs: Sequence[float] = (50, 95, 99), chunk_bytes: int = CHUNK_BYTES,
                       ) -> dict[object, float | int | None]:
    """Exact percentiles over every successful transaction of several logs or latency arrays (ms) merged.

    ``{"n": count, q: value, ...}``, interpolated as :func:`percentile` does (numpy's default method);
    values are None when there is no transaction. The latencies of logs are counted in histograms
    (whole microseconds below 4.2 s), the others merged into one array and partitioned, nothing sorted:
    the values of partitioning them all.
    """
    items = _items(arrays_or_paths)
    lat = _Latencies(_sizes(items), counted=True)
    _merge_into(lat, items, chunk_bytes)
    n = len(lat)
    pct, _, _ = lat.percentiles(qs)
    return {"n": n, **dict(zip(qs, pct, strict=True))}


# --------------------------------------------------------------------------------------------
# --aggregate-interval log
# --------------------------------------------------------------------------------------------

_AGG_BASE = ["interval_start", "num_transactions", "sum_latency", "sum_latency_2", "min_latency",
             "max_latency"]
_AGG_LAG = ["sum_lag", "sum_lag_2", "min_lag", "max_lag"]
#: Column layouts of aggregate logs, by column count. 9.5-14 add optional columns; 15+ always
#: print all 15 and write 0 where an option is off (serialization/deadlock failures are 0
#: unless --failures-detailed; there is no column for the total of failures).
AGGREGATE_LAYOUTS: dict[int, tuple[str, list[str]]] = {
    6: ("9.5-14", _AGG_BASE),
    10: ("9.5-14 with --rate", _AGG_BASE + _AGG_LAG),
    11: ("9.5-14 with --rate and --latency-limit", _AGG_BASE + _AGG_LAG + ["skipped"]),
    15: ("15+", _AGG_BASE + _AGG_LAG + ["skipped", "retried", "retries", "serialization_failures",
                                        "deadlock_failures"]),
}


def parse_aggregate_log(text: str) -> dict[str, Any]:
    """A ``--aggregate-interval`` log; latencies in it are microseconds, returned as ms.

    Supported layouts are :data:`AGGREGATE_LAYOUTS` (6, 10, 11 or 15 numeric columns).
    """
    rows: list[list[int]] = []
    for lineno, raw in enumerate(_lines(text), 1):
        tok = raw.split()
        if not tok:
            continue
        if len(tok) not in AGGREGATE_LAYOUTS or not all(re.fullmatch(r"-?\d+", t) for t in tok):
            expected = "; ".join(f"{n} columns ({v}): {' '.join(c)}"
                                 for n, (v, c) in AGGREGATE_LAYOUTS.items())
            raise ParseError(f"not a pgbench aggregate log: line {lineno} is {raw.strip()[:80]!r}; "
                             f"expected integers in one of these layouts: {expected}")
        rows.append([int(t) for t in tok])
    if not rows:
        raise ParseError("not a pgbench aggregate log: no interval lines")
    if len({len(r) for r in rows}) != 1:
        raise ParseError("not a pgbench aggregate log: lines have different column counts")
    versions, cols = AGGREGATE_LAYOUTS[len(rows[0])]
    intervals: list[dict[str, Any]] = []
    for row in rows:
        d = dict(zip(cols, row, strict=True))
        cnt = d["num_transactions"]
        mean = d["sum_latency"] / cnt if cnt else 0.0
        iv: dict[str, Any] = {
            "time": d["interval_start"], "transactions": cnt,
            "latency_avg_ms": d["sum_latency"] / cnt / 1000.0 if cnt else None,
            "latency_stddev_ms": (math.sqrt(max(d["sum_latency_2"] / cnt - mean**2, 0.0)) / 1000.0
                                  if cnt else None),
            "latency_min_ms": d["min_latency"] / 1000.0 if cnt else None,
            "latency_max_ms": d["max_latency"] / 1000.0 if cnt else None,
            "lag_avg_ms": d["sum_lag"] / cnt / 1000.0 if "sum_lag" in d and cnt else None,
            "lag_max_ms": d["max_lag"] / 1000.0 if "max_lag" in d else None,
            "skipped": d.get("skipped"), "retried": d.get("retried"), "retries": d.get("retries"),
            "serialization_failures": d.get("serialization_failures"),
            "deadlock_failures": d.get("deadlock_failures"),
        }
        intervals.append(iv)
    total = sum(r[1] for r in rows)
    starts = [r[0] for r in rows]
    steps = sorted({b - a for a, b in zip(starts, starts[1:], strict=False)})

    def _sum(key: str) -> int | None:
        vals = [iv[key] for iv in intervals]
        return None if vals[0] is None else sum(vals)

    return {
        "tool": "pgbench", "columns": len(rows[0]), "layout": cols, "layout_versions": versions,
        "interval_s": steps[0] if steps else None, "intervals": intervals, "transactions": total,
        "latency_avg_ms": sum(r[2] for r in rows) / total / 1000.0 if total else None,
        "skipped": _sum("skipped"), "retried": _sum("retried"), "retries": _sum("retries"),
        "serialization_failures": _sum("serialization_failures"),
        "deadlock_failures": _sum("deadlock_failures"),
    }
