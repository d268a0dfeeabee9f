"""Per-transaction logs read vectorised (parsers/txlog.py): the same numbers as the line-by-line parser."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from pglab.errors import ParseError
from pglab.parsers.pgbench import parse_transaction_log
from pglab.parsers.txlog import merged_percentiles, transaction_latencies_ms

LOGS = sorted((REPO / "tests/data/pgbench").glob("*/txlog*"))


def reference(path: Path) -> dict:
    seventh = "retries" if "retries" in path.name else ("lag" if "rate" in path.name else None)
    return parse_transaction_log(path.read_text(), seventh_column=seventh)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_captured_log_gives_the_same_numbers(path: Path) -> None:
    ref = reference(path)
    got = merged_percentiles([path])
    assert got["n"] == ref["transactions"]
    for q, key in ((50, "p50_ms"), (95, "p95_ms"), (99, "p99_ms")):
        assert got[q] == pytest.approx(ref[key], rel=1e-12)
    lat = transaction_latencies_ms(path)
    assert lat.mean() == pytest.approx(ref["latency_avg_ms"], rel=1e-12)
    assert lat.min() == ref["latency_min_ms"] and lat.max() == ref["latency_max_ms"]


def test_small_blocks_gzip_and_merging(tmp_path: Path) -> None:
    a, b = REPO / "tests/data/pgbench/15/txlog_failures", REPO / "tests/data/pgbench/18/txlog"
    whole = transaction_latencies_ms(a)
    assert np.array_equal(transaction_latencies_ms(a, chunk_bytes=4096), whole)  # many chunks, lines split
    gz = tmp_path / "pgbench_log.1.gz"
    with open(a, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert np.array_equal(transaction_latencies_ms(gz), whole)
    merged = merged_percentiles([a, b])
    both = np.concatenate([whole, transaction_latencies_ms(b)])
    assert merged["n"] == len(both) and merged[99] == pytest.approx(np.percentile(both, 99))


def test_what_is_not_a_log_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="run_T.stdout: not a pgbench per-transaction log"):
        transaction_latencies_ms(REPO / "tests/data/pgbench/15/run_T.stdout")
    bad = tmp_path / "pgbench_log.2"
    bad.write_text("0 1 2902 0 1795266855 224775\n0 2 slow 0 1795266855 224775\n")
    with pytest.raises(ParseError, match="pgbench_log.2"):
        transaction_latencies_ms(bad)
