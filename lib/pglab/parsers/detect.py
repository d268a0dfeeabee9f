"""Recognise a stored tool output file and parse it: the engine behind ``pglab parse FILE...``.

Why: a results directory holds stdout/stderr files and logs of several tools; the user should not
have to say which parser applies to which file. Detection is by content, never by file name,
except for pairing a run's stdout with its stderr (``stdout.txt``/``stderr.txt`` or
``NAME.stdout``/``NAME.stderr``) so that ``-P`` progress lines join the summary.

Only the first :data:`HEAD_BYTES` are read to recognise a per-transaction log (``-l``; about 1 GB at a
paper-profile point), which is then handed by path to the chunked reader
(:func:`~pglab.parsers.txlog.parse_transaction_log_file`): reading it whole as text first took 10 s and
4.3 times the file in memory for a 256 MB log whose parse takes 0.3 s (bench/parse_command.py, which
also says what the command costs now). Every other format is read whole and
recognised as before: run summaries, ``-i`` output and sysbench output are small, and their telling line
may come late (a summary follows the progress lines); so is an aggregate log, whose size follows the
run's length (one line per interval of 1 s or more per thread: 86,400 lines, about 5 MB, for a day)
and whose parse holds an object per line for the JSON anyway.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pglab.errors import ParseError
from pglab.parsers.txlog import parse_transaction_log, parse_transaction_log_file

#: What detect_and_parse can recognise, named in every "unrecognised file" error.
EXPECTED_FORMATS = (
    "pgbench run summary (the stdout of a pgbench run)",
    "pgbench -i output",
    "pgbench per-transaction log (-l)",
    "pgbench aggregate log (--aggregate-interval)",
    "sysbench run output (1.0 or 0.5)",
)

_EPOCH_MIN = 100_000_000  # any Unix time pgbench writes is above this; client ids are far below
#: What is read of a file before its kind is known: a log's first line is about 40 bytes, a binary file's
#: NUL byte is looked for in the first SNIFF_BYTES.
HEAD_BYTES = 64 << 10
#: Lines that make a file a sysbench output or a pgbench run summary, whatever comes first in it. The
#: indent is whitespace other than a newline: ``^\s*`` matched the same lines but went over every blank line
#: after each line start (a minute for 64 KiB of blank lines).
_SYSBENCH = re.compile(r"^(sysbench \d|[^\S\n]*(SQL|OLTP test) statistics:)", re.M)
_SUMMARY = re.compile(r"^number of transactions actually processed:", re.M)


def _sibling_stderr(path: Path) -> Path | None:
    """The stderr file stored next to a stdout file, if the naming says which one it is."""
    if path.name == "stdout.txt":
        cand = path.with_name("stderr.txt")
    elif path.suffix == ".stdout":
        cand = path.with_suffix(".stderr")
    else:
        return None
    return cand if cand.is_file() else None


def _first_tokens(lines: Iterable[str]) -> list[str]:
    for line in lines:
        if line.strip():
            return line.split()
    return []


def _log_kind(text: str) -> str | None:
    """'pgbench_aggregate_log' / 'pgbench_log' when the first line looks like one, else None."""
    return _tokens_kind(_first_tokens(text.splitlines()))


def _tokens_kind(tok: list[str]) -> str | None:
    """The log kind a first line's tokens say. Both kinds can have 6 columns; an aggregate line starts
    with a Unix time, a per-transaction line with a client id and has the Unix time in its 5th column."""
    if not 6 <= len(tok) <= 15 or not tok[0].isdigit():
        return None
    if int(tok[0]) >= _EPOCH_MIN and all(re.fullmatch(r"-?\d+", t) for t in tok):
        return "pgbench_aggregate_log"
    if len(tok) <= 8 and tok[4].isdigit() and int(tok[4]) >= _EPOCH_MIN:
        return "pgbench_log"
    return None


def _unrecognised(path: Path, why: str = "") -> ParseError:
    formats = "\n".join(f"  - {f}" for f in EXPECTED_FORMATS)
    return ParseError(f"{path}: not a recognised benchmark output{': ' + why if why else ''}\n"
                      f"expected one of:\n{formats}")


def _as_text(data: bytes) -> str:
    """What ``Path.read_text`` gives: UTF-8 with bad bytes replaced, ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _streamed_log(head: bytes, whole: bool) -> bool:
    """Whether ``head`` (the file's start; ``whole``: all of it) says a per-transaction log: its first
    non-blank line is one, and no line in it makes the file a sysbench output or a run summary (those
    win, as when a file is read whole). A last line the head may have cut is not looked at."""
    text = _as_text(head)
    if _SYSBENCH.search(text) or _SUMMARY.search(text):
        return False
    lines = text.splitlines()
    return _tokens_kind(_first_tokens(lines if whole else lines[:-1])) == "pgbench_log"


def _binary(head: bytes) -> bool:
    """Whether a NUL byte of ``head`` makes the file binary, as for a user's file (imported only then: its
    module loads yaml, 15 ms of a ``pglab parse`` of a big log)."""
    from pglab.userfiles import SNIFF_BYTES

    return b"\0" in head[:SNIFF_BYTES]


def _parsed(path: Path, kind: str, parser: Callable[[], dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    try:
        result = parser()
    except ParseError as e:
        raise _unrecognised(path, f"it looks like {kind} but {e}") from e
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror or e}") from e
    return {"kind": kind, "source": str(path), **extra, **result}


def detect_and_parse(path: str | Path) -> dict[str, Any]:
    """Parse one file, whatever of the known formats it is; adds ``kind`` and ``source``.

    A per-transaction log is recognised by its first :data:`HEAD_BYTES` and read in chunks; any other
    file is read whole (see the module's docstring), as is a log that is not a regular file (a pipe
    cannot be read twice).
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
            if b"\0" in head and _binary(head):
                raise _unrecognised(path, "it is a binary file (every known format is text)")
            streamed = stat.S_ISREG(os.fstat(f.fileno()).st_mode) and _streamed_log(head, len(head) < HEAD_BYTES)
            text = "" if streamed else _as_text(head + f.read())
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror or e}") from e
    if streamed:
        return _parsed(path, "pgbench_log", lambda: parse_transaction_log_file(path), {})
    if not text.strip():
        raise _unrecognised(path, "the file is empty")

    from pglab.parsers import pgbench as pgbench_output
    from pglab.parsers import sysbench as sysbench_output
    from pglab.parsers.aggregate_log import parse_aggregate_log

    parser: Callable[[], dict[str, Any]]
    extra: dict[str, Any] = {}
    if _SYSBENCH.search(text):
        kind, parser = "sysbench_run", lambda: sysbench_output.parse_run(text)
    elif _SUMMARY.search(text):
        stderr_path = _sibling_stderr(path)
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace") if stderr_path else ""
        extra["stderr_source"] = str(stderr_path) if stderr_path else None
        kind, parser = "pgbench_run", lambda: pgbench_output.parse_summary(text, stderr)
    elif (log_kind := _log_kind(text)) is not None:
        kind = log_kind
        parser = ((lambda: parse_aggregate_log(text)) if kind == "pgbench_aggregate_log"
                  else (lambda: parse_transaction_log(text)))
    elif pgbench_output.looks_like_init(text):
        kind, parser = "pgbench_init", lambda: pgbench_output.parse_init(text)
    elif re.search(r"^(starting vacuum|progress: |pgbench: )", text, re.M):
        # pgbench output without a summary: parse_summary says why (failed run, stderr only, ...)
        kind, parser = "pgbench_run", lambda: pgbench_output.parse_summary(text)
    else:
        raise _unrecognised(path)
    return _parsed(path, kind, parser, extra)


def parse_many(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Parse every file; if any fails, raise one ParseError naming each failed file."""
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    for p in paths:
        try:
            results.append(detect_and_parse(p))
        except ParseError as e:
            errors.append(str(e))
    if errors:
        raise ParseError(f"{len(errors)} file(s) could not be parsed:\n" + "\n".join(errors))
    return results
