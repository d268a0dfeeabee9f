"""Recognise a stored tool output file and parse it: the engine behind ``pglab parse FILE...``.

Why: a results directory holds stdout/stderr files and logs of several tools; the user should not
have to say which parser applies to which file. Detection is by content, never by file name,
except for pairing a run's stdout with its stderr (``stdout.txt``/``stderr.txt`` or
``NAME.stdout``/``NAME.stderr``) so that ``-P`` progress lines join the summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pglab.errors import ParseError
from pglab.parsers import pgbench as pgbench_output
from pglab.parsers import sysbench as sysbench_output
from pglab.parsers.aggregate_log import parse_aggregate_log
from pglab.parsers.txlog import parse_transaction_log
from pglab.userfiles import looks_binary

#: What detect_and_parse can recognise, named in every "unrecognised file" error.
EXPECTED_FORMATS = (
    "pgbench run summary (the stdout of a pgbench run)",
    "pgbench -i output",
    "pgbench per-transaction log (-l)",
    "pgbench aggregate log (--aggregate-interval)",
    "sysbench run output (1.0 or 0.5)",
)

_EPOCH_MIN = 100_000_000  # any Unix time pgbench writes is above this; client ids are far below


def _sibling_stderr(path: Path) -> Path | None:
    """The stderr file stored next to a stdout file, if the naming says which one it is."""
    if path.name == "stdout.txt":
        cand = path.with_name("stderr.txt")
    elif path.suffix == ".stdout":
        cand = path.with_suffix(".stderr")
    else:
        return None
    return cand if cand.is_file() else None


def _first_tokens(text: str) -> list[str]:
    for line in text.splitlines():
        if line.strip():
            return line.split()
    return []


def _log_kind(text: str) -> str | None:
    """'pgbench_aggregate_log' / 'pgbench_log' when the first line looks like one, else None.

    Both kinds can have 6 columns; an aggregate line starts with a Unix time, a per-transaction
    line with a client id and has the Unix time in its 5th column.
    """
    tok = _first_tokens(text)
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


def detect_and_parse(path: str | Path) -> dict[str, Any]:
    """Parse one file, whatever of the known formats it is; adds ``kind`` and ``source``."""
    path = Path(path)
    try:
        if looks_binary(path):
            raise _unrecognised(path, "it is a binary file (every known format is text)")
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror or e}") from e
    if not text.strip():
        raise _unrecognised(path, "the file is empty")

    parser: Callable[[], dict[str, Any]]
    extra: dict[str, Any] = {}
    if re.search(r"^sysbench \d", text, re.M) or re.search(r"^\s*(SQL|OLTP test) statistics:", text, re.M):
        kind, parser = "sysbench_run", lambda: sysbench_output.parse_run(text)
    elif re.search(r"^number of transactions actually processed:", text, re.M):
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

    try:
        result = parser()
    except ParseError as e:
        raise _unrecognised(path, f"it looks like {kind} but {e}") from e
    return {"kind": kind, "source": str(path), **extra, **result}


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
