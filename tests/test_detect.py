"""``pglab parse``'s recognition of a file by its head: a per-transaction log is read in chunks, never whole.

Why: recognising a 256 MB ``-l`` log by reading it whole as text made the command take 10 s and 4 times
the file in memory, for a parse of 0.3 s (issue 23 §1). The formats themselves are checked against every
captured output in test_parsers.py (test_detect_and_parse_every_data_file); the command against the
library in test_cli.py.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
from pglab.parsers import detect
from pglab.parsers.detect import detect_and_parse
from pglab.parsers.txlog import parse_transaction_log_file

PG = Path(__file__).parent / "data" / "pgbench"


def _bytes_read() -> int:
    """What this process has read so far with read(2) and the like (a mapped file's pages are not counted)."""
    return int(re.search(r"^rchar: (\d+)$", Path("/proc/self/io").read_text(), re.M).group(1))


def test_detect_reads_only_the_head_of_a_transaction_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``-l`` log (about 1 GB at a paper-profile point) is recognised by its first bytes and handed by path
    to the chunked reader (by path, so that it maps the file rather than copy it)."""
    log = tmp_path / "pgbench_log.7"
    log.write_bytes((PG / "15/txlog_failures").read_bytes() * 100)  # 6 MB
    handed: list[Path] = []
    monkeypatch.setattr(detect, "parse_transaction_log_file", lambda p: handed.append(p) or {"transactions": 1})
    before = _bytes_read()
    got = detect_and_parse(log)
    read = _bytes_read() - before
    assert handed == [log] and got == {"kind": "pgbench_log", "source": str(log), "transactions": 1}
    assert read < 2 * detect.HEAD_BYTES < log.stat().st_size / 40, read


def test_detect_by_the_head_keeps_what_a_whole_read_decided(tmp_path: Path) -> None:
    """The head says "log" only when no line in it makes the file something else; a pipe (which cannot be
    read twice) and a log whose first line comes after more than the head of blank lines are read whole
    (the sysbench pattern once took a minute over 64 KiB of blank lines: ``^\\s*`` crossed them all)."""
    text = (PG / "18/txlog_retries").read_text() * 3
    ref = parse_transaction_log_file(PG / "18/txlog_retries")
    big = tmp_path / "pgbench_log.1"
    big.write_text(text)
    assert big.stat().st_size > detect.HEAD_BYTES
    assert detect_and_parse(big)["transactions"] == 3 * ref["transactions"]
    blank = tmp_path / "blank_first.log"
    blank.write_text("\n" * (detect.HEAD_BYTES + 10) + text)
    assert detect_and_parse(blank)["transactions"] == 3 * ref["transactions"]
    # a summary line in the head wins over a first line that looks like a log, as it did in the whole file
    odd = tmp_path / "odd.txt"
    odd.write_text(text.replace("\n", "\nnumber of transactions actually processed: 5\n"
                                      "tps = 1.0 (without initial connection time)\n", 1))
    assert detect_and_parse(odd)["kind"] == "pgbench_run"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(text,))
    writer.start()
    try:
        got = detect_and_parse(fifo)
    finally:
        writer.join(timeout=30)
    assert got["kind"] == "pgbench_log" and got["transactions"] == 3 * ref["transactions"]
