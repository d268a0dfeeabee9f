"""Per-transaction logs read vectorised (parsers/txlog.py): the same numbers as the line-by-line parser."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from pglab.errors import ParseError
from pglab.parsers import txlog_kernel, txlog_loop, txlog_native, txlog_parts
from pglab.parsers.txlog import (
    merged_percentiles,
    parse_transaction_log,
    parse_transaction_log_file,
    transaction_latencies_ms,
)
from pglab.parsers.txlog_kernel import HIST_US
from pglab.parsers.txlog_latencies import _percentiles

LOGS = sorted((REPO / "tests/data/pgbench").glob("*/txlog*"))


@pytest.fixture(autouse=True)
def compiled_for_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These logs are small: without this they would all take the general readers (``MIN_BYTES``), and
    the comparisons below of the compiled loop with them would compare the general readers with themselves."""
    monkeypatch.setattr(txlog_kernel, "MIN_BYTES", 0)


def test_a_small_input_never_loads_numba(tmp_path: Path) -> None:
    """Below ``MIN_BYTES`` the general readers give the same numbers without numba's import (about 3 s of
    CPU in every analysis, 20 s more to compile in a new copy of the code)."""
    code = ("import json, sys; from pglab.parsers.txlog import merged_percentiles, parse_transaction_log_file\n"
            "paths = sys.argv[1:]\n"
            "out = [parse_transaction_log_file(p) for p in paths] + [merged_percentiles(paths)]\n"
            "print(json.dumps({'numba': 'numba' in sys.modules, 'out': repr(out)}))")
    paths = [str(p) for p in LOGS if "retries" not in p.name and "rate" not in p.name]
    run = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "lib")})
    got = json.loads(run.stdout)
    assert got["numba"] is False
    assert got["out"] == repr([parse_transaction_log_file(p) for p in paths] + [merged_percentiles(paths)])
    assert txlog_kernel.worth_it(txlog_kernel.MIN_BYTES) and txlog_kernel.available()  # here: the compiled loop


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


QS = (0, 1, 25, 50, 90, 95, 99, 99.9, 99.99, 100)


def exact(values_ms: np.ndarray, qs: tuple = QS) -> tuple[list, float | None, float | None]:
    """The percentiles, min and max by partitioning every latency (what merged_percentiles did before counting)."""
    return _percentiles(np.array(values_ms, dtype=np.float64), qs)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_counted_percentiles_are_the_partitioned_ones(path: Path) -> None:
    """Latencies counted in histograms give the percentiles of the partition, to the last bit."""
    want, lo, hi = exact(transaction_latencies_ms(path))
    got = merged_percentiles([path], qs=QS)
    assert [got[q] for q in QS] == want
    full = parse_transaction_log_file(path)
    assert (full["latency_min_ms"], full["latency_max_ms"]) == (lo, hi)
    assert [full["p50_ms"], full["p95_ms"], full["p99_ms"]] == exact(transaction_latencies_ms(path), (50, 95, 99))[0]


def _log(path: Path, us: np.ndarray, rng: np.random.Generator) -> str:
    """A log with these latencies (a few failures among them), as pgbench writes it."""
    time_col = us.astype(str).astype(object)
    time_col[rng.random(len(us)) < 0.01] = "serialization"
    ends = 1795266855 * 10**6 + np.cumsum(rng.integers(1, 500, len(us)))
    text = "".join(f"{i % 8} {i // 8} {t} 0 {e // 10**6} {e % 10**6}\n"
                   for i, (t, e) in enumerate(zip(time_col, ends, strict=True)))
    path.write_text(text)
    return text


def test_counted_percentiles_with_latencies_beyond_the_histogram(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Latencies of HIST_US us and more (4.2 s, up to 10**17) are kept one by one, after the counted ones:
    the same percentiles as the partition, in parts read by several threads, chunks cut anywhere; a chunk
    refused after some parts counted its latencies takes them back; arrays of ms merged in (values
    among the counted ones) fall back to the partition."""
    rng = np.random.default_rng(3)
    n = 100_000  # about 3.5 MB: several parts per chunk
    us = rng.lognormal(7.5, 0.6, n).astype(np.int64)
    outliers = rng.random(n) < 0.03
    us[outliers] = rng.integers(HIST_US - 5, 10**12, int(outliers.sum()))
    us[:6] = [HIST_US - 1, HIST_US, HIST_US + 1, 10**17, 0, HIST_US - 1]
    log = tmp_path / "pgbench_log.1"
    text = _log(log, us, rng)
    lat = transaction_latencies_ms(log)
    assert len(lat) > 0.98 * n and (lat >= HIST_US / 1000).mean() > 0.02
    for chunk_bytes in (16 << 20, (2 << 20) + 7, 4096):
        got = merged_percentiles([log], qs=QS, chunk_bytes=chunk_bytes)
        assert got["n"] == len(lat) and [got[q] for q in QS] == exact(lat)[0], chunk_bytes
    ref = parse_transaction_log(text)  # the counts and the rest, through the general readers
    with monkeypatch.context() as m:
        m.setattr(txlog_kernel, "available", lambda: False)
        assert parse_transaction_log_file(log) == ref
    assert parse_transaction_log_file(log) == ref
    assert (ref["latency_min_ms"], ref["latency_max_ms"]) == exact(lat)[1:]
    # every latency beyond the histogram
    big = tmp_path / "pgbench_log.2"
    _log(big, rng.integers(HIST_US, 10**9, 5000), rng)
    assert [merged_percentiles([big], qs=QS)[q] for q in QS] == exact(transaction_latencies_ms(big))[0]
    # a bad line near the end: the compiled loop refuses the chunk after its first parts counted
    lines = text.splitlines(keepends=True)
    lines[-10] = lines[-10].replace(" ", "\t", 1)
    bad = tmp_path / "pgbench_log.3"
    bad.write_text("".join(lines))
    with monkeypatch.context() as m:
        m.setattr(txlog_kernel, "available", lambda: False)
        general = parse_transaction_log_file(bad), merged_percentiles([bad], qs=QS)
    assert (parse_transaction_log_file(bad), merged_percentiles([bad], qs=QS)) == general
    # arrays of ms among the counted values: partitioned with them
    extra = np.array([0.5, 2.0, 7.25, np.float64(HIST_US) / 1000, 1e9])
    got = merged_percentiles([log, extra], qs=QS)
    assert [got[q] for q in QS] == exact(np.concatenate([lat, extra]))[0]
    with_nan = merged_percentiles([log, np.array([np.nan])], qs=QS)
    assert np.array_equal([with_nan[q] for q in QS], exact(np.concatenate([lat, [np.nan]]))[0], equal_nan=True)


def test_the_compiled_loop_loads_without_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once compiled, a process loads the loop's machine code with llvmlite alone (numba's import and its cache
    took 1.5 s of a ``pglab parse`` of a 256 MB log that parses in 0.3 s), and reads every log as numba's
    own dispatcher of the loop does."""
    assert txlog_kernel.kernel().__qualname__ == "_with_arrays.<locals>.scan"  # compiled and kept if not yet
    code = ("import json, sys; from pglab.parsers import txlog_kernel\n"
            "from pglab.parsers.txlog import parse_transaction_log_file\n"
            "txlog_kernel.MIN_BYTES = 0\n"
            "out = [parse_transaction_log_file(p) for p in sys.argv[1:]]\n"
            "print(json.dumps({'numba': 'numba' in sys.modules, 'loop': txlog_kernel.kernel().__qualname__, "
            "'out': repr(out)}))")
    paths = [str(p) for p in LOGS]
    run = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "lib")})
    got = json.loads(run.stdout)
    assert got["numba"] is False and got["loop"] == "_with_arrays.<locals>.scan"
    monkeypatch.setattr(txlog_parts, "kernel", txlog_loop.numba_scan)
    assert got["out"] == repr([parse_transaction_log_file(p) for p in paths])


def test_the_kept_machine_code_is_numbas_own_and_only_for_its_key(tmp_path: Path) -> None:
    """The object file refers to nothing but itself (numba's runtime is stubbed, see txlog_native), and a file
    kept for other sources or another CPU is not loaded."""
    ll = txlog_native._llvm()
    symbol, obj = txlog_native._compile(ll, txlog_kernel._c_callback)
    txlog_native._write([tmp_path], "scan.o", b"key", symbol, obj)
    assert txlog_native._read(tmp_path / "scan.o", b"key") == (symbol, obj)
    assert txlog_native._read(tmp_path / "scan.o", b"kez") is None
    assert txlog_native._read(tmp_path / "none.o", b"key") is None
    stubbed = txlog_native._stub_runtime("declare ptr @numba_unpickle(ptr, i32, ptr) local_unnamed_addr\n"
                                         "declare i64 @llvm.smax.i64(i64, i64) #2\n"
                                         "@PyExc_SystemError = external global i8\n")
    assert "declare i64 @llvm.smax.i64" in stubbed and "define internal ptr @numba_unpickle" in stubbed
    assert "@PyExc_SystemError = internal global i8 zeroinitializer" in stubbed
