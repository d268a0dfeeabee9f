"""Parsers for what pgbench prints: run summaries, ``-P`` progress, ``-r`` tables, ``-i`` output.

Why: pglab keeps the raw tool output of every run and derives numbers from it afterwards, so a
study can be re-analysed and a parser bug fixed without re-running anything. A study may meet any
pgbench from 9.5 to 18, so the parsers follow the output of each, not only the one installed here.
Every function returns a plain JSON-serialisable dict and raises :class:`ParseError`, saying what
was expected, when the text is not the output it parses. The logs pgbench writes have their own
modules: ``txlog`` (``-l``, per transaction) and ``aggregate_log`` (``--aggregate-interval``).

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
* ``-i``: 13+ end with ``done in T s (drop tables T s, ...).``; 12 and older print ``done.`` and no
  times. On a terminal pgbench ends its progress lines with ``\\r``, so ``\\r`` separates lines too.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from pglab.errors import ParseError
from pglab.parsers.text import NUM, split_lines, to_float


def _numeric_version(s: str) -> str:
    """'15.20' from '15.20' / '18.6,' / '9.6.10'; keeps only the leading dotted number."""
    m = re.match(r"\d+(?:\.\d+)*", s)
    return m.group(0) if m else s


# --------------------------------------------------------------------------------------------
# run summary
# --------------------------------------------------------------------------------------------

_PROGRESS_RE = re.compile(
    rf"^progress: {NUM} s, {NUM} tps, lat {NUM} ms stddev {NUM}(?P<rest>(?:, .*)?)$")
_PROGRESS_ITEMS = {
    "failed": re.compile(r"^(\d+) failed$"),
    "retried": re.compile(r"^(\d+) retried$"),
    "retries": re.compile(r"^(\d+) retries$"),
    "lag_ms": re.compile(rf"^lag {NUM} ms$"),
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
    for line in split_lines(text):
        m = _PROGRESS_RE.match(line.strip())
        if not m:
            continue
        p = ProgressLine(time_s=float(m.group(1)), tps=to_float(m.group(2)),
                         latency_avg_ms=to_float(m.group(3)), latency_stddev_ms=to_float(m.group(4)))
        for item in filter(None, (s.strip() for s in m.group("rest").split(","))):
            for key, rx in _PROGRESS_ITEMS.items():
                im = rx.match(item)
                if im:
                    value = to_float(im.group(1)) if key == "lag_ms" else int(im.group(1))
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
    (re.compile(r"^latency stddev\s*[=:]\s*" + NUM + r" ms"), "latency_stddev_ms"),
    (re.compile(r"^initial connection time = " + NUM + r" ms$"), "initial_connection_ms"),
]
_INT_KEYS = {"scaling_factor", "clients", "threads", "max_tries", "duration_s",
             "transactions_per_client", "serialization_failures", "deadlock_failures", "retried",
             "retries", "skipped"}

_PROCESSED_RE = re.compile(r"^number of transactions actually processed: (\d+)(?:/(\d+))?")
_FAILED_RE = re.compile(r"^number of failed transactions: (\d+)")
_LATENCY_AVG_RE = re.compile(r"^latency average\s*[=:]\s*" + NUM + r" ms( \(including failures\))?")
_LATE_RE = re.compile(r"^number of transactions above the ([\d.]+) ms latency limit: (\d+)")
_LAG_RE = re.compile(rf"^rate limit schedule lag: avg {NUM} \(max {NUM}\) ms")
_TPS_OLD_RE = re.compile(rf"^tps = {NUM} \((including|excluding) connections establishing\)")
_TPS_NEW_RE = re.compile(rf"^tps = {NUM} \(without initial connection time\)")
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
    rx = re.compile(r"^\s*" + r"\s+".join([NUM] * ncols) + r"\s+(\S.*)$")
    stmts: list[dict[str, Any]] = []
    i = start
    while i < len(lines):
        m = rx.match(lines[i])
        if not m:
            break
        stmt: dict[str, Any] = {"latency_ms": to_float(m.group(1)), "failures": None, "retries": None,
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
        elif (m := re.match(rf"^- (\d+) transactions \([^)]*?(?:, tps = {NUM})?\)$", body)):
            s.transactions = int(m.group(1))
            if m.group(2) is not None:
                s.tps = to_float(m.group(2))
        elif (m := re.match(rf"^- number of transactions actually processed: (\d+) \(tps = {NUM}\)", body)):
            s.transactions = int(m.group(1))
            s.tps = to_float(m.group(2))
        elif (m := re.match(r"^- number of failed transactions: (\d+)", body)):
            s.failed = int(m.group(1))
        elif (m := re.match(r"^- latency average\s*[=:]\s*" + NUM, body)):
            s.latency_avg_ms = to_float(m.group(1))
        elif (m := re.match(r"^- latency stddev\s*[=:]\s*" + NUM, body)):
            s.latency_stddev_ms = to_float(m.group(1))
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
    lines = [ln.rstrip() for ln in split_lines(stdout)]
    if not any(ln.startswith("number of transactions actually processed:") for ln in lines):
        hint = ""
        errs = [ln for ln in split_lines(stderr) + lines
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
            r["latency_avg_ms"] = to_float(m.group(1))
            r["latency_avg_includes_failures"] = bool(m.group(2))
            continue
        if (m := _LATE_RE.match(ln)):
            r["latency_limit_ms"] = float(m.group(1))
            r["above_latency_limit"] = int(m.group(2))
            continue
        if (m := _LAG_RE.match(ln)):
            r["lag_avg_ms"], r["lag_max_ms"] = to_float(m.group(1)), to_float(m.group(2))
            continue
        if (m := _TPS_OLD_RE.match(ln)):
            if m.group(2) == "including":
                r["tps_including_connections"] = to_float(m.group(1))
            else:
                r["tps"] = to_float(m.group(1))
                r["tps_kind"] = "excluding connections establishing"
            continue
        if (m := _TPS_NEW_RE.match(ln)):
            r["tps"] = to_float(m.group(1))
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
                    m.group(1).strip() if key in ("transaction_type", "query_mode") else to_float(m.group(1)))
                break
    r["progress"] = parse_progress(stdout) + parse_progress(stderr)
    if re.search(r"^pgbench: (?:error|fatal): .*aborted", stderr, re.M):
        r["aborted"] = True
    if r["tps"] is None and not r["aborted"]:  # every version prints tps after the count: cut short
        raise ParseError("incomplete pgbench run summary: it has 'number of transactions actually processed' "
                         "but no 'tps = ...' line after it (the output was cut short)")
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
    return any(_INIT_MARKERS.match(ln.strip()) or _TUPLES_RE.match(ln.strip()) for ln in split_lines(text))


def parse_init(stderr: str) -> dict[str, Any]:
    """Output of ``pgbench -i`` (stderr; stdout merged in is fine).

    ``init_total_s``/``phases`` come from the ``done in`` line of 13+; 12 and older print no
    times (both stay null/empty) but the output is still recognised by its step lines.
    """
    lines = [ln.strip() for ln in split_lines(stderr)]
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
