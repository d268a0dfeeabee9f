"""The output parsers against real pgbench 9.6/14/15/18 and sysbench 0.5/1.0 output.

Why: a parser is only as good as the outputs it has seen. Every EXPECTED value below was read by
hand from the file it belongs to (tests/data, see its README for where each file comes from), so
a test failure means the parser disagrees with what the tool printed.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pglab.errors import ParseError
from pglab.parsers import txlog_kernel, txlog_parts
from pglab.parsers.aggregate_log import parse_aggregate_log
from pglab.parsers.detect import EXPECTED_FORMATS, detect_and_parse, parse_many
from pglab.parsers.pgbench import parse_init, parse_progress, parse_summary
from pglab.parsers.sysbench import parse_run
from pglab.parsers.txlog import (
    merged_percentiles,
    parse_transaction_log,
    parse_transaction_log_file,
    transaction_latencies_ms,
)

DATA = Path(__file__).parent / "data"
PG = DATA / "pgbench"


def read(rel: str) -> str:
    return (DATA / rel).read_text()


def summary(rel: str) -> dict:
    """parse_summary of NAME.stdout + NAME.stderr under tests/data/pgbench."""
    err = PG / f"{rel}.stderr"
    return parse_summary((PG / f"{rel}.stdout").read_text(), err.read_text() if err.exists() else "")


# ---------------------------------------------------------------------------------------------
# pgbench run summaries
# ---------------------------------------------------------------------------------------------

# key -> value as printed in the file; keys not listed are checked by the other tests
EXPECTED_RUNS: dict[str, dict] = {
    "14/run_T": dict(version="14.23", server_version=None, scaling_factor=2, query_mode="simple",
                     clients=2, threads=2, max_tries=None, duration_s=3, transactions=5901,
                     transactions_planned=None, failed=0, latency_avg_ms=1.013, latency_stddev_ms=0.954,
                     initial_connection_ms=11.440, tps=1974.019614, tps_including_connections=None,
                     tps_kind="without initial connection time"),
    "14/run_t": dict(version="14.23", clients=2, threads=1, duration_s=None, transactions_per_client=200,
                     transactions=400, transactions_planned=400, failed=0, latency_avg_ms=1.235,
                     latency_stddev_ms=None, initial_connection_ms=16.027, tps=1619.721732),
    "14/run_select_only": dict(transaction_type="<builtin: select only>", clients=1, duration_s=2,
                               transactions=27694, latency_avg_ms=0.072, initial_connection_ms=5.710,
                               tps=13879.387551),
    "14/run_rate": dict(transactions=909, skipped=21, latency_limit_ms=2.0, above_latency_limit=125,
                        latency_avg_ms=1.441, latency_stddev_ms=1.291, lag_avg_ms=0.214, lag_max_ms=3.586,
                        initial_connection_ms=4.618, tps=302.792385),
    "15/run_T": dict(version="15.20", server_version=None, transaction_type="<builtin: TPC-B (sort of)>",
                     scaling_factor=2, query_mode="simple", clients=2, threads=2, max_tries=1, duration_s=3,
                     transactions=9056, transactions_planned=None, failed=0, latency_avg_ms=0.659,
                     latency_stddev_ms=0.559, initial_connection_ms=12.280, tps=3030.715782,
                     tps_including_connections=None, retried=None, retries=None, aborted=False),
    "15/run_t": dict(threads=1, max_tries=1, transactions_per_client=200, transactions=400,
                     transactions_planned=400, failed=0, latency_avg_ms=1.373, latency_stddev_ms=None,
                     initial_connection_ms=6.979, tps=1457.056891),
    "15/run_select_only": dict(transaction_type="<builtin: select only>", clients=1, transactions=10219,
                               latency_avg_ms=0.195, initial_connection_ms=3.058, tps=5116.970777),
    "15/run_rate": dict(transactions=867, failed=0, skipped=48, latency_limit_ms=2.0,
                        above_latency_limit=158, latency_avg_ms=1.794, latency_stddev_ms=2.410,
                        lag_avg_ms=0.503, lag_max_ms=36.163, initial_connection_ms=12.575, tps=289.933295),
    "15/run_failures": dict(scaling_factor=1, clients=4, threads=2, max_tries=1, transactions=2322,
                            failed=4639, retried=None, retries=None, serialization_failures=None,
                            latency_avg_ms=1.278, latency_stddev_ms=1.083, initial_connection_ms=16.575,
                            tps=776.469951),
    "15/run_failures_retries": dict(max_tries=3, transactions=3052, failed=1738, retried=2209, retries=4169,
                                    latency_avg_ms=1.326, latency_stddev_ms=1.343, tps=1020.909580),
    "15/run_failures_detailed": dict(max_tries=3, duration_s=2, transactions=2546, failed=1520,
                                     serialization_failures=1520, deadlock_failures=0, retried=1784,
                                     retries=3419, latency_avg_ms=1.950, latency_avg_includes_failures=True,
                                     latency_stddev_ms=None, initial_connection_ms=22.447, tps=1284.185254),
    "18/run_T": dict(version="18.6", server_version=None, scaling_factor=2, clients=2, threads=2, max_tries=1,
                     duration_s=3, transactions=6760, failed=0, latency_avg_ms=0.883, latency_stddev_ms=0.755,
                     initial_connection_ms=13.483, tps=2263.191797, tps_including_connections=None),
    "18/run_t": dict(transactions=400, transactions_planned=400, latency_avg_ms=1.139,
                     initial_connection_ms=7.907, tps=1756.311745),
    "18/run_select_only": dict(transactions=36134, latency_avg_ms=0.055, initial_connection_ms=5.277,
                               tps=18114.132974),
    "18/run_rate": dict(transactions=903, skipped=5, above_latency_limit=51, latency_avg_ms=1.171,
                        latency_stddev_ms=0.758, lag_avg_ms=0.211, lag_max_ms=5.918, tps=301.558486),
    "18/run_failures": dict(transactions=3527, failed=7115, latency_avg_ms=0.843, latency_stddev_ms=0.425,
                            initial_connection_ms=7.443, tps=1176.337964),
    "18/run_failures_retries": dict(transactions=3114, failed=1541, retried=2134, retries=3933,
                                    latency_avg_ms=1.442, tps=1041.570852),
    "18/run_failures_detailed": dict(transactions=1763, failed=977, serialization_failures=977,
                                     deadlock_failures=0, retried=1368, retries=2540, latency_avg_ms=2.914,
                                     latency_avg_includes_failures=True, tps=883.372750),
    "18/run_server15": dict(version="18.6", server_version="15.20", scaling_factor=1, transactions=3084,
                            latency_avg_ms=1.293, initial_connection_ms=10.008, tps=1546.983608),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_RUNS))
def test_pgbench_summary_numbers(rel: str) -> None:
    got = summary(rel)
    assert got["tool"] == "pgbench"
    assert {k: got[k] for k in EXPECTED_RUNS[rel]} == EXPECTED_RUNS[rel]


def test_pgbench_96_article_run_old_tps_lines() -> None:
    """<= 13: two tps lines, 'excluding connections establishing' is the one without connections."""
    got = parse_summary(read("pgbench/9.6/article_run.txt"))
    assert got["version"] is None  # 9.6 prints no version line
    assert got["transaction_type"] == "<builtin: TPC-B (sort of)>"
    assert (got["scaling_factor"], got["query_mode"], got["clients"], got["threads"]) == (10000, "prepared",
                                                                                          1000, 1000)
    assert (got["duration_s"], got["transactions"], got["failed"]) == (600, 2157735, 0)
    assert (got["latency_avg_ms"], got["latency_stddev_ms"]) == (278.149, 503.396)
    assert got["tps"] == 3591.759513
    assert got["tps_including_connections"] == 3573.331659
    assert got["tps_kind"] == "excluding connections establishing"
    assert got["initial_connection_ms"] is None and got["max_tries"] is None
    # the article printed the progress lines (stderr) in the same block
    assert len(got["progress"]) == 10
    assert got["progress"][0] == dict(time_s=60.0, tps=4553.6, latency_avg_ms=194.696,
                                      latency_stddev_ms=250.663, failed=0, retried=None, retries=None,
                                      lag_ms=None, skipped=None)
    assert got["progress"][-1]["time_s"] == 600.0 and got["progress"][-1]["tps"] == 3350.9


def test_version_differences_in_tps_lines() -> None:
    """13-style 'including/excluding connections establishing' vs 14+ 'without initial connection time'."""
    old = parse_summary(read("pgbench/9.6/article_run.txt"))
    for rel in ("14/run_T", "15/run_T", "18/run_T"):
        new = summary(rel)
        assert new["tps_kind"] == "without initial connection time"
        assert new["tps_including_connections"] is None and new["initial_connection_ms"] is not None
    assert old["tps_including_connections"] is not None and old["initial_connection_ms"] is None
    # failures are counted from 15 on; older versions report 0 and no max_tries line
    assert summary("14/run_T")["max_tries"] is None and summary("15/run_T")["max_tries"] == 1


def test_pgbench_95_colon_latency_format() -> None:
    """9.5 printed 'latency average: N ms' (colon; format string of the 9.5 source, not a capture)."""
    text = read("pgbench/9.6/article_run.txt").replace("latency average = ", "latency average: ").replace(
        "latency stddev = ", "latency stddev: ")
    got = parse_summary(text)
    assert (got["latency_avg_ms"], got["latency_stddev_ms"]) == (278.149, 503.396)


EXPECTED_PROGRESS = {
    # rel: (count, first line, last line) as printed in NAME.stderr
    "14/run_T": (2, dict(time_s=1.0, tps=1675.8, latency_avg_ms=1.181, latency_stddev_ms=0.883, failed=0,
                         retried=None, retries=None, lag_ms=None, skipped=None),
                 dict(time_s=2.0, tps=2223.9, latency_avg_ms=0.900, latency_stddev_ms=0.758, failed=0,
                      retried=None, retries=None, lag_ms=None, skipped=None)),
    "14/run_rate": (3, dict(time_s=1.0, tps=298.0, latency_avg_ms=1.611, latency_stddev_ms=1.285, failed=0,
                            retried=None, retries=None, lag_ms=0.225, skipped=7),
                    dict(time_s=3.0, tps=305.9, latency_avg_ms=1.501, latency_stddev_ms=1.332, failed=0,
                         retried=None, retries=None, lag_ms=0.256, skipped=14)),
    "15/run_T": (2, dict(time_s=1.0, tps=2521.8, latency_avg_ms=0.784, latency_stddev_ms=0.691, failed=0,
                         retried=None, retries=None, lag_ms=None, skipped=None),
                 dict(time_s=2.0, tps=2109.9, latency_avg_ms=0.948, latency_stddev_ms=0.717, failed=0,
                      retried=None, retries=None, lag_ms=None, skipped=None)),
    "15/run_rate": (3, dict(time_s=1.0, tps=289.0, latency_avg_ms=1.882, latency_stddev_ms=1.844, failed=0,
                            retried=None, retries=None, lag_ms=0.517, skipped=13),
                    dict(time_s=3.0, tps=301.0, latency_avg_ms=1.414, latency_stddev_ms=0.890, failed=0,
                         retried=None, retries=None, lag_ms=0.268, skipped=1)),
    "15/run_failures": (3, dict(time_s=1.0, tps=821.9, latency_avg_ms=1.193, latency_stddev_ms=1.189,
                                failed=1577, retried=None, retries=None, lag_ms=None, skipped=None),
                        dict(time_s=3.0, tps=839.3, latency_avg_ms=1.181, latency_stddev_ms=0.980,
                             failed=1663, retried=None, retries=None, lag_ms=None, skipped=None)),
    "15/run_failures_retries": (3, dict(time_s=1.0, tps=1238.7, latency_avg_ms=1.069, latency_stddev_ms=1.236,
                                        failed=666, retried=839, retries=1582, lag_ms=None, skipped=None),
                                dict(time_s=3.0, tps=874.1, latency_avg_ms=1.599, latency_stddev_ms=1.429,
                                     failed=511, retried=668, retries=1254, lag_ms=None, skipped=None)),
    "18/run_T": (2, dict(time_s=1.0, tps=2429.9, latency_avg_ms=0.814, latency_stddev_ms=0.638, failed=0,
                         retried=None, retries=None, lag_ms=None, skipped=None),
                 dict(time_s=2.0, tps=2202.0, latency_avg_ms=0.909, latency_stddev_ms=0.873, failed=0,
                      retried=None, retries=None, lag_ms=None, skipped=None)),
    "18/run_rate": (3, dict(time_s=1.0, tps=280.9, latency_avg_ms=1.149, latency_stddev_ms=0.671, failed=0,
                            retried=None, retries=None, lag_ms=0.229, skipped=0),
                    dict(time_s=3.0, tps=313.0, latency_avg_ms=1.274, latency_stddev_ms=0.958, failed=0,
                         retried=None, retries=None, lag_ms=0.236, skipped=4)),
    "18/run_failures_retries": (3, dict(time_s=1.0, tps=1199.7, latency_avg_ms=1.227, latency_stddev_ms=1.470,
                                        failed=592, retried=832, retries=1527, lag_ms=None, skipped=None),
                                dict(time_s=3.0, tps=928.0, latency_avg_ms=1.602, latency_stddev_ms=1.650,
                                     failed=581, retried=781, retries=1455, lag_ms=None, skipped=None)),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_PROGRESS))
def test_pgbench_progress_lines(rel: str) -> None:
    count, first, last = EXPECTED_PROGRESS[rel]
    prog = summary(rel)["progress"]
    assert len(prog) == count
    assert prog[0] == first and prog[-1] == last
    # the same lines are found in the stderr text alone
    assert parse_progress((PG / f"{rel}.stderr").read_text()) == prog


def test_runs_without_progress_have_empty_progress() -> None:
    assert summary("15/run_t")["progress"] == [] and summary("14/run_select_only")["progress"] == []


def test_statement_latencies_one_two_three_columns() -> None:
    """-r: latency only (14), latency+failures (15+), latency+failures+retries (--max-tries > 1)."""
    s14 = summary("14/run_r")["statements"]
    assert len(s14) == 11
    assert s14[0] == dict(latency_ms=0.002, failures=None, retries=None,
                          command=r"\set aid random(1, 100000 * :scale)")
    assert s14[8] == dict(
        latency_ms=0.284, failures=None, retries=None,
        command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;")
    s15 = summary("15/run_r")["statements"]
    assert len(s15) == 11 and s15[10] == dict(latency_ms=0.129, failures=0, retries=None, command="END;")
    s18 = summary("18/run_r")["statements"]  # 18 puts a single space before the command
    assert len(s18) == 11 and s18[4] == dict(latency_ms=0.057, failures=0, retries=None, command="BEGIN;")
    d15 = summary("15/run_failures_detailed")["statements"]
    assert d15[7] == dict(latency_ms=0.191, failures=165, retries=415,
                          command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;")
    assert d15[8]["failures"] == 1355 and d15[8]["retries"] == 3006
    d18 = summary("18/run_failures_detailed")["statements"]
    assert (d18[8]["latency_ms"], d18[8]["failures"], d18[8]["retries"]) == (0.164, 868, 2235)


@pytest.mark.parametrize("rel, total, tps, scripts", [
    ("14/run_scripts", 6598, 3312.315508,
     [(1, "<builtin: TPC-B (sort of)>", 2, 4350, 2183.778791, 0, 0.834, 0.851, 11),
      (2, "<builtin: select only>", 1, 2248, 1128.536718, 0, 0.141, 0.195, 2)]),
    ("15/run_scripts", 6060, 3033.357927,
     [(1, "<builtin: TPC-B (sort of)>", 2, 4067, 2035.753579, 0, 0.895, 0.988, 11),
      (2, "<builtin: select only>", 1, 1993, 997.604348, 0, 0.154, 0.298, 2)]),
    ("18/run_scripts", 6636, 3322.739888,
     [(1, "<builtin: TPC-B (sort of)>", 2, 4352, 2179.108498, 0, 0.833, 0.451, 11),
      (2, "<builtin: select only>", 1, 2284, 1143.631390, 0, 0.133, 0.082, 2)]),
])
def test_per_script_sections(rel: str, total: int, tps: float, scripts: list[tuple]) -> None:
    got = summary(rel)
    assert got["transaction_type"] == "multiple scripts"
    assert (got["transactions"], got["tps"], got["statements"]) == (total, tps, [])
    assert [(s["number"], s["name"], s["weight"], s["transactions"], s["tps"], s["failed"],
             s["latency_avg_ms"], s["latency_stddev_ms"], len(s["statements"]))
            for s in got["scripts"]] == scripts
    select = "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"
    assert got["scripts"][1]["statements"][1]["command"] == select


def test_summary_refuses_non_summaries() -> None:
    with pytest.raises(ParseError, match="number of transactions actually processed"):
        parse_summary(read("pgbench/15/init.stderr"))
    with pytest.raises(ParseError, match="run seems to have failed: connection to database"):
        parse_summary(read("pgbench/9.6/article_run_too_many_clients.txt"))
    with pytest.raises(ParseError, match="only progress lines"):
        parse_summary("", read("pgbench/9.6/article_progress_restarted.txt"))


def _summaries() -> list[str]:
    return sorted(str(f.relative_to(DATA)) for f in (DATA / "pgbench").rglob("*")
                  if f.is_file() and "actually processed" in f.read_text(errors="replace"))


@pytest.mark.parametrize("rel", _summaries())
def test_a_summary_cut_after_its_count_is_refused_not_read_as_no_tps(rel: str) -> None:
    """Every real capture (9.6 to 18) cut right after 'number of transactions actually processed': refused
    with a word that it was cut short, never parsed with tps None."""
    text = read(rel)
    cut = text[:text.index("\n", text.index("actually processed")) + 1]
    assert parse_summary(text)["tps"] is not None
    with pytest.raises(ParseError, match="cut short"):
        parse_summary(cut)


# ---------------------------------------------------------------------------------------------
# pgbench -i
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel, total, phases", [
    ("14/init.stderr", 0.39, {"drop tables": 0.00, "create tables": 0.01, "client-side generate": 0.20,
                              "vacuum": 0.09, "primary keys": 0.09}),
    ("14/init_pty.txt", 0.50, {"drop tables": 0.01, "create tables": 0.00, "client-side generate": 0.21,
                               "vacuum": 0.16, "primary keys": 0.12}),
    ("15/init.stderr", 0.58, {"drop tables": 0.00, "create tables": 0.00, "client-side generate": 0.34,
                              "vacuum": 0.12, "primary keys": 0.11}),
    ("15/init_pty.txt", 0.59, {"drop tables": 0.01, "create tables": 0.00, "client-side generate": 0.37,
                               "vacuum": 0.09, "primary keys": 0.12}),
    ("18/init.stderr", 0.41, {"drop tables": 0.00, "create tables": 0.01, "client-side generate": 0.21,
                              "vacuum": 0.09, "primary keys": 0.10}),
    ("18/init_pty.txt", 0.44, {"drop tables": 0.01, "create tables": 0.00, "client-side generate": 0.24,
                               "vacuum": 0.09, "primary keys": 0.10}),
])
def test_pgbench_init_phases(rel: str, total: float, phases: dict[str, float]) -> None:
    got = parse_init((PG / rel).read_text())
    assert got["init_total_s"] == total and got["phases"] == phases
    assert got["phase_format"] == "done in" and got["completed"] is True
    assert got["generate"] == "client-side"
    assert (got["tuples_generated"], got["tuples_total"]) == (200000, 200000)


def test_pgbench_init_on_a_terminal_has_carriage_returns() -> None:
    text = (PG / "18/init_pty.txt").read_bytes().decode()  # read_text() would translate the \r
    assert "\r" in text and "tuples (50%) of pgbench_accounts done" in text
    assert parse_init(text)["steps"] == [
        "dropping old tables", "creating tables", "generating data (client-side)", "vacuuming",
        "creating primary keys", "done in 0.44 s (drop tables 0.01 s, create tables 0.00 s, "
        "client-side generate 0.24 s, vacuum 0.09 s, primary keys 0.10 s)"]


def test_pgbench_init_96_article() -> None:
    """9.6 (with the AWS timing patch, as printed in the article): 'total time: ...' then 'done.'."""
    got = parse_init(read("pgbench/9.6/article_init.txt"))
    assert got["completed"] is True and got["phase_format"] == "total time"
    assert got["init_total_s"] == 5978.44
    assert got["phases"] == {"insert": 1878.90, "commit": 0.04, "vacuum": 2484.96, "index": 1614.54}
    assert (got["tuples_generated"], got["tuples_total"]) == (1000000000, 1000000000)
    assert got["generate"] is None  # 12 and older do not say client-/server-side


def test_pgbench_init_stock_old_version_without_times() -> None:
    """A stock <= 12 prints 'done.' and no times: recognised, with null total and no phases."""
    text = "\n".join(ln for ln in read("pgbench/9.6/article_init.txt").splitlines()
                     if not ln.startswith("total time:"))
    got = parse_init(text)
    assert got["init_total_s"] is None and got["phases"] == {} and got["completed"] is True


def test_pgbench_init_refuses_other_text() -> None:
    with pytest.raises(ParseError, match="creating tables"):
        parse_init(read("pgbench/15/run_T.stdout"))


# ---------------------------------------------------------------------------------------------
# -l per-transaction logs
# ---------------------------------------------------------------------------------------------

def _independent_latencies_ms(path: Path) -> np.ndarray:
    """Successful transactions' latencies, read without the parser: time column when numeric."""
    vals = [int(line.split()[2]) for line in path.read_text().splitlines() if line.split()[2].isdigit()]
    return np.array(vals, dtype=float) / 1000.0


# rel: (columns, transactions, failed, serialization, skipped, clients)  -- counted in the file with awk
EXPECTED_TXLOGS = {
    "14/txlog": (6, 2000, 0, 0, 0, 2),
    "14/txlog_rate": (7, 542, 0, 0, 28, 2),
    "15/txlog": (6, 2000, 0, 0, 0, 2),
    "15/txlog_rate": (7, 541, 0, 0, 9, 2),
    "15/txlog_failures": (6, 637, 1363, 1363, 0, 4),
    "15/txlog_retries": (7, 1239, 761, 0, 0, 4),
    "18/txlog": (6, 2000, 0, 0, 0, 2),
    "18/txlog_rate": (7, 590, 0, 0, 2, 2),
    "18/txlog_failures": (6, 550, 1450, 1450, 0, 4),
    "18/txlog_retries": (7, 954, 660, 0, 0, 4),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_TXLOGS))
def test_transaction_log_counts_and_percentiles(rel: str) -> None:
    cols, tx, failed, ser, skipped, clients = EXPECTED_TXLOGS[rel]
    got = parse_transaction_log((PG / rel).read_text())
    assert (got["columns"], got["transactions"], got["failed"], got["serialization_failures"], got["skipped"],
            got["clients"]) == (cols, tx, failed, ser, skipped, clients)
    lat = _independent_latencies_ms(PG / rel)
    assert len(lat) == tx
    assert got["p50_ms"] == pytest.approx(np.percentile(lat, 50), abs=1e-9)
    assert got["p95_ms"] == pytest.approx(np.percentile(lat, 95), abs=1e-9)
    assert got["p99_ms"] == pytest.approx(np.percentile(lat, 99), abs=1e-9)
    assert got["latency_avg_ms"] == pytest.approx(lat.mean(), abs=1e-9)
    assert (got["latency_min_ms"], got["latency_max_ms"]) == (lat.min(), lat.max())


def test_transaction_log_seventh_column() -> None:
    """A 7th column is lag (--rate) or retries (--max-tries); skipped rows prove lag, else say so."""
    rate = parse_transaction_log((PG / "15/txlog_rate").read_text())
    assert rate["layout"][-1] == "schedule_lag"
    assert rate["lag_avg_ms"] == pytest.approx(155845 / 550 / 1000)  # awk: sum of column 7 / lines
    unknown = parse_transaction_log((PG / "15/txlog_retries").read_text())
    assert unknown["layout"][-1] == "lag_or_retries" and unknown["retries_total"] is None
    known = parse_transaction_log((PG / "15/txlog_retries").read_text(), seventh_column="retries")
    assert known["retries_total"] == 1768 and known["lag_avg_ms"] is None
    assert parse_transaction_log((PG / "18/txlog_retries").read_text(), seventh_column="retries")[
        "retries_total"] == 1772


def test_transaction_log_refuses_other_text() -> None:
    with pytest.raises(ParseError, match=r"line 2 is 'hello world'.*client_id transaction_no time"):
        parse_transaction_log("0 1 2902 0 1795266855 224775\nhello world\n")
    with pytest.raises(ParseError, match="per-transaction log"):
        parse_transaction_log(read("pgbench/15/run_T.stdout"))


# The vectorised, chunked reader against the line-by-line parser it replaced, kept here verbatim as the
# reference (only renamed): same dict on every captured log, same errors on bad input.

def _reference_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _reference_percentile(sorted_values: list[float], q: float) -> float | None:
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _reference_parse(text: str, seventh_column: str | None = None) -> dict[str, Any]:
    """parse_transaction_log as it was: a Python loop keeping every row as a list of strings."""
    if seventh_column not in (None, "lag", "retries"):
        raise ValueError(f"seventh_column must be 'lag', 'retries' or None, not {seventh_column!r}")
    latencies: list[float] = []
    rows: list[list[str]] = []
    failed = serialization = deadlock = skipped = 0
    for lineno, raw in enumerate(_reference_lines(text), 1):
        tok = raw.split()
        if not tok:
            continue
        ok = 6 <= len(tok) <= 8 and all(t.isdigit() for t in tok[:2] + tok[3:])
        t = tok[2] if ok else ""
        if not ok or not (t.isdigit() or t in {"failed", "serialization", "deadlock"} or t == "skipped"):
            raise ParseError(
                f"not a pgbench per-transaction log: line {lineno} is {raw.strip()[:80]!r}; expected "
                "'client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]' "
                "with time in microseconds or failed/serialization/deadlock/skipped")
        if t.isdigit():
            latencies.append(int(t) / 1000.0)
        elif t == "skipped":
            skipped += 1
        else:
            failed += 1
            serialization += t == "serialization"
            deadlock += t == "deadlock"
        rows.append(tok)
    if not rows:
        raise ParseError("not a pgbench per-transaction log: no transaction lines")
    ncols = {len(r) for r in rows}
    if len(ncols) != 1:
        raise ParseError(f"not a pgbench per-transaction log: lines have {sorted(ncols)} columns; "
                         "one log always has the same number")
    n = ncols.pop()
    layout = ["client_id", "transaction_no", "time", "script_no", "time_epoch", "time_us"]
    lag_col = retries_col = None
    if n == 8:
        lag_col, retries_col = 6, 7
        layout += ["schedule_lag", "retries"]
    elif n == 7:
        kind = seventh_column or ("lag" if skipped else None)
        if kind == "lag":
            lag_col = 6
        elif kind == "retries":
            retries_col = 6
        layout.append({"lag": "schedule_lag", "retries": "retries", None: "lag_or_retries"}[kind])
    latencies.sort()
    ends = [int(r[4]) + int(r[5]) / 1e6 for r in rows]
    return {
        "tool": "pgbench", "columns": n, "layout": layout,
        "transactions": len(latencies), "failed": failed,
        "serialization_failures": serialization, "deadlock_failures": deadlock, "skipped": skipped,
        "clients": len({r[0] for r in rows}), "script_numbers": sorted({int(r[3]) for r in rows}),
        "first_end_epoch": min(ends), "last_end_epoch": max(ends),
        "latency_avg_ms": sum(latencies) / len(latencies) if latencies else None,
        "latency_min_ms": latencies[0] if latencies else None,
        "latency_max_ms": latencies[-1] if latencies else None,
        "p50_ms": _reference_percentile(latencies, 50), "p95_ms": _reference_percentile(latencies, 95),
        "p99_ms": _reference_percentile(latencies, 99),
        "lag_avg_ms": (sum(int(r[lag_col]) for r in rows) / len(rows) / 1000.0
                       if lag_col is not None else None),
        "retries_total": sum(int(r[retries_col]) for r in rows) if retries_col is not None else None,
    }


def assert_same_parse(got: dict[str, Any], ref: dict[str, Any]) -> None:
    """Same keys and values; floats to rel 1e-12 (the new mean is exact, the old one summed floats)."""
    assert got.keys() == ref.keys()
    for key, want in ref.items():
        if isinstance(want, float):
            assert isinstance(got[key], float) and got[key] == pytest.approx(want, rel=1e-12), key
        else:
            assert got[key] == want and type(got[key]) is type(want), key


TXLOGS = sorted(PG.glob("*/txlog*"))


@pytest.fixture(params=["compiled", "general"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each per-transaction log test twice: through the compiled loop, and with it off (the pyarrow and
    line-by-line readers a refused chunk falls back to, and all there is where numba is missing)."""
    if request.param == "general":
        monkeypatch.setattr(txlog_kernel, "available", lambda: False)
    else:
        monkeypatch.setattr(txlog_kernel, "MIN_BYTES", 0)  # these logs are small (see MIN_BYTES)
        assert txlog_kernel.available(), "numba is a dependency: the compiled loop must load"
    return request.param


@pytest.mark.parametrize("path", TXLOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_compiled_loop_takes_every_log_pgbench_wrote(path: Path) -> None:
    """It must not quietly refuse what it exists for (the results would be right, and slow)."""
    data = bytearray(path.read_bytes())
    got = txlog_parts.scan_chunk(data, len(data), cores=2)
    assert got is not None and got["rows"] == len(path.read_text().splitlines())


@pytest.mark.parametrize("odd", ["0\t1 2902 0 1795266855 224775\n", "0 1  2902 0 1795266855 224775\n",
                                 "0 1 2902 0 1795266855 224775\r\n", "\n", "0 1 0x1F 0 1795266855 224775\n",
                                 "0 1 failedx 0 1795266855 224775\n", "0 1 2902 0 1795266855\n",
                                 "0 1 2902 0 1795266855 224775 1 2 3\n", "70000 1 2902 0 1795266855 224775\n",
                                 "0 1 1234567890123456789 0 1795266855 224775\n", "0 1 -5 0 1795266855 224775\n"])
def test_the_compiled_loop_refuses_anything_else(odd: str) -> None:
    """Whatever is not exactly pgbench's format goes to the general readers, which decide."""
    data = bytearray(b"0 1 2902 0 1795266855 224775\n" * 3 + odd.encode())
    assert txlog_parts.scan_chunk(data, len(data), cores=1) is None


def _random_line(rng: random.Random) -> bytes:
    """A line as pgbench writes it, or a near miss: 5-9 fields of 0-19 digits, the time field's words
    and others, signs, hex, runs of spaces, tabs, CRLF, a space before the newline."""
    nf = rng.choice([5, 6, 6, 6, 6, 7, 7, 8, 8, 9])
    fields = []
    for k in range(nf):
        r = rng.random()
        if k == 2 and r < 0.15:
            fields.append(rng.choice(["failed", "serialization", "deadlock", "skipped", "failedx", "skip"]))
        elif r < 0.01:
            fields.append("")
        elif r < 0.02:
            fields.append(rng.choice(["-5", "0x1F", "1a", "+3", "\u00e9"]))
        else:
            widths = {0: [1, 1, 2, 3, 5], 3: [1, 1, 1, 2, 4], 4: [1, 9, 10, 10, 10, 12, 13], 5: [1, 3, 6, 6, 6, 7]}.get(
                k, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17, 18, 19])
            fields.append("".join(rng.choices("0123456789", k=rng.choice(widths))))
    line = fields[0] + "".join((" " if rng.random() > 0.01 else rng.choice(["  ", "\t"])) + f for f in fields[1:])
    return (line + rng.choice(["\n"] * 40 + ["\r\n", " \n"])).encode()


def _same_scan(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    lat = [np.concatenate(x["latencies_us"]).tolist() for x in (a, b)]
    return lat[0] == lat[1] and {k: v for k, v in a.items() if k != "latencies_us"} == {
        k: v for k, v in b.items() if k != "latencies_us"}


def test_the_compiled_loop_reads_words_at_a_time_as_byte_by_byte() -> None:
    """Where 80 bytes follow a line's start the loop reads it 8 bytes at a time, else (the end of the
    buffer) byte by byte: both take the same lines with the same numbers (those of the line-by-line
    rules), and refuse the same; a run of lines read word-wise gives the sum of its lines."""
    rng = random.Random(7)
    pad = b"1 1 1 0 1 1\n" * 8  # after the chunk's end: read, never counted
    taken: list[bytes] = []
    for _ in range(8000):
        line = _random_line(rng)
        alone = txlog_parts.scan_chunk(bytearray(line), len(line), cores=1)
        assert _same_scan(alone, txlog_parts.scan_chunk(bytearray(line + pad), len(line), cores=1)), line
        if alone is None:
            continue
        taken.append(line)
        tok = line.split()
        ref = _reference_parse(line.decode())
        assert (alone["rows"], alone["columns"], alone["clients"], alone["scripts"]) == (
            1, {len(tok)}, {int(tok[0])}, {int(tok[3])}), line
        assert alone["first_end"] == alone["last_end"] == ref["first_end_epoch"], line
        assert np.concatenate(alone["latencies_us"]).tolist() == ([int(tok[2])] if tok[2].isdigit() else []), line
        assert (alone["failed"], alone["serialization"], alone["deadlock"], alone["skipped"]) == (
            ref["failed"], ref["serialization_failures"], ref["deadlock_failures"], ref["skipped"]), line
        assert (alone["sum7"], alone["sum8"]) == (int(tok[6]) if len(tok) > 6 else 0,
                                                  int(tok[7]) if len(tok) > 7 else 0), line
    assert len(taken) > 2000
    for ncols in (6, 7, 8):
        lines = [ln for ln in taken if len(ln.split()) == ncols]
        run = b"".join(lines)
        got = txlog_parts.scan_chunk(bytearray(run + pad), len(run), cores=1)
        assert got is not None and got["rows"] == len(lines)
        parts = [txlog_parts.scan_chunk(bytearray(ln), len(ln), cores=1) for ln in lines]
        assert np.concatenate(got["latencies_us"]).tolist() == [
            v for p in parts for v in np.concatenate(p["latencies_us"]).tolist()]
        for key in ("failed", "serialization", "skipped", "sum7", "sum8", "sumlat"):  # int64 sums wrap, as numpy's
            assert got[key] % 2**64 == sum(p[key] for p in parts) % 2**64, key
        assert got["clients"] == set().union(*(p["clients"] for p in parts))
        assert (got["first_end"], got["last_end"]) == (min(p["first_end"] for p in parts),
                                                       max(p["last_end"] for p in parts))


@pytest.mark.parametrize("seventh", [None, "lag", "retries"])
@pytest.mark.parametrize("path", TXLOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.usefixtures("reader")
def test_transaction_log_file_gives_the_reference_numbers(path: Path, seventh: str | None) -> None:
    ref = _reference_parse(path.read_text(), seventh)
    got = parse_transaction_log_file(path, seventh)
    assert_same_parse(got, ref)
    # percentiles, min, max and end times are computed as the reference did: equal to the last bit
    for key in ("p50_ms", "p95_ms", "p99_ms", "latency_min_ms", "latency_max_ms", "first_end_epoch",
                "last_end_epoch", "lag_avg_ms"):
        assert got[key] == ref[key], key
    assert parse_transaction_log(path.read_text(), seventh) == got  # the text wrapper: the same reader


def test_captured_logs_are_all_compared() -> None:
    assert len(TXLOGS) == len(EXPECTED_TXLOGS) == 10


@pytest.mark.parametrize("path", [PG / "15/txlog_failures", PG / "14/txlog_rate", PG / "18/txlog_retries"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.usefixtures("reader")
def test_transaction_log_chunk_boundaries(path: Path) -> None:
    """Chunks of 64 bytes (lines cut everywhere, hundreds of chunks) or of 7 (shorter than a line)."""
    whole = parse_transaction_log_file(path, "lag")
    assert path.stat().st_size > 64 * 300  # hundreds of chunks
    for chunk_bytes in (64, 7, 4096):
        assert parse_transaction_log_file(path, "lag", chunk_bytes=chunk_bytes) == whole
    assert np.array_equal(transaction_latencies_ms(path, chunk_bytes=64), transaction_latencies_ms(path))


def _raises_like_reference(text: str, tmp_path: Path, seventh: str | None = None) -> str:
    with pytest.raises(ParseError) as ref:
        _reference_parse(text, seventh)
    log = tmp_path / "pgbench_log.1"
    log.write_text(text)
    for chunk_bytes in (200, 1 << 20):
        with pytest.raises(ParseError) as got:
            parse_transaction_log_file(log, seventh, chunk_bytes=chunk_bytes)
        assert str(got.value) == str(ref.value)
    with pytest.raises(ParseError) as got:
        parse_transaction_log(text, seventh)
    assert str(got.value) == str(ref.value)
    return str(ref.value)


@pytest.mark.usefixtures("reader")
def test_transaction_log_file_errors_are_the_reference_ones(tmp_path: Path) -> None:
    log = (PG / "15/txlog_failures").read_text()
    lines = log.splitlines(keepends=True)
    good = "".join(lines[:1500])
    cases = {
        "bad line far in": good + "0 1 2902 0 1795266855 x\n" + "".join(lines[1500:]),
        "non-numeric time": good + "0 1 slow 0 1795266855 224775\n",
        "hex number": good + "0 1 0x10 0 1795266855 224775\n",
        "signed number": good + "0 1 2902 -1 1795266855 224775\n",
        "word out of place": good + "0 1 2902 failed 1795266855 224775\n",
        "too few columns": good + "0 1 2902 0 1795266855\n",
        "too many columns": good + "0 1 2902 0 1795266855 224775 1 2 3\n",
        "columns change": good + "0 1 2902 0 1795266855 224775 5\n" + "".join(lines[1500:]),
        "blank lines then a bad one": good + "\n\n  \n" + "hello world\n",
        "crlf then a bad one": good.replace("\n", "\r\n") + "hello\r\n",
        "summary": read("pgbench/15/run_T.stdout"),
        "empty": "",
        "blank": "\n \n\n",
    }
    messages = {name: _raises_like_reference(text, tmp_path) for name, text in cases.items()}
    assert "line 1501 is '0 1 2902 0 1795266855 x'" in messages["bad line far in"]
    assert "lines have [6, 7] columns" in messages["columns change"]
    assert messages["empty"] == messages["blank"] == "not a pgbench per-transaction log: no transaction lines"


@pytest.mark.usefixtures("reader")
def test_transaction_log_file_reads_what_a_whitespace_split_accepts(tmp_path: Path) -> None:
    """Tabs, runs of spaces, CRLF, blank lines, no final newline: pgbench writes none, the reference read them."""
    lines = (PG / "18/txlog_rate").read_text().splitlines()
    text = "\r\n".join(ln.replace(" ", "\t", 1) if i % 7 == 0 else ln.replace(" ", "   ")
                       for i, ln in enumerate(lines)) + "\n\n"
    log = tmp_path / "odd.log"
    log.write_text(text, newline="")
    ref = _reference_parse(text)
    for chunk_bytes in (100, 1 << 20):
        assert_same_parse(parse_transaction_log_file(log, chunk_bytes=chunk_bytes), ref)


@pytest.mark.usefixtures("reader")
def test_transaction_latencies_merged_over_logs(tmp_path: Path) -> None:
    a, b = PG / "15/txlog_failures", PG / "18/txlog"
    la, lb = transaction_latencies_ms(a), transaction_latencies_ms(b)
    assert np.array_equal(la, _independent_latencies_ms(a)) and np.array_equal(lb, _independent_latencies_ms(b))
    both = np.concatenate([la, lb])
    assert np.array_equal(transaction_latencies_ms([a, b]), both)
    merged = merged_percentiles([a, b])
    assert merged["n"] == len(both) == 637 + 2000
    for q in (50, 95, 99):
        assert merged[q] == pytest.approx(np.percentile(both, q), rel=1e-12)
    # arrays, paths or both: the same numbers; not the average of each log's percentiles
    assert merged_percentiles([la, lb]) == merged_percentiles([a, lb]) == merged
    assert merged[99] != pytest.approx((np.percentile(la, 99) + np.percentile(lb, 99)) / 2)
    assert merged_percentiles([a], qs=(99.9,))[99.9] == pytest.approx(np.percentile(la, 99.9), rel=1e-12)
    # the latencies are those of the full parse, and a log pglab stored gzipped reads the same
    ref = parse_transaction_log_file(a)
    assert merged_percentiles(a)[95] == ref["p95_ms"] and len(la) == ref["transactions"]
    gz = tmp_path / "pgbench_log.7.1.gz"
    gz.write_bytes(gzip.compress(a.read_bytes()))
    assert np.array_equal(transaction_latencies_ms(gz, chunk_bytes=1000), la)
    assert parse_transaction_log_file(gz) == ref
    assert merged_percentiles([]) == {"n": 0, 50: None, 95: None, 99: None}


@pytest.mark.usefixtures("reader")
def test_transaction_latencies_name_the_refused_log(tmp_path: Path) -> None:
    bad = tmp_path / "pgbench_log.2"
    bad.write_text("0 1 2902 0 1795266855 224775\n0 2 slow 0 1795266855 224775\n")
    with pytest.raises(ParseError, match=r"pgbench_log.2: not a pgbench per-transaction log: line 2 is "):
        transaction_latencies_ms([PG / "15/txlog", bad])
    with pytest.raises(ParseError, match=r"run_T.stdout: not a pgbench per-transaction log: line 1 is"):
        merged_percentiles([PG / "15/run_T.stdout"])


# ---------------------------------------------------------------------------------------------
# --aggregate-interval logs
# ---------------------------------------------------------------------------------------------

# rel: (columns, intervals, transactions, sum of sum_latency, skipped, retried, retries, serialization)
EXPECTED_AGG = {
    "14/aggregate.log": (6, 3, 6883, 5368871, None, None, None, None),
    "14/aggregate_rate.log": (11, 3, 786, 1139818, 18, None, None, None),
    "15/aggregate.log": (15, 3, 4897, 3993551, 0, 0, 0, 0),
    "15/aggregate_rate.log": (15, 3, 828, 1155961, 15, 0, 0, 0),
    "15/aggregate_failures.log": (15, 3, 3194, 2493741, 0, 0, 0, 5714),
    "15/aggregate_retries.log": (15, 3, 2845, 3139569, 0, 1881, 3584, 0),
    "18/aggregate.log": (15, 3, 4677, 4313191, 0, 0, 0, 0),
    "18/aggregate_rate.log": (15, 3, 648, 698011, 0, 0, 0, 0),
    "18/aggregate_failures.log": (15, 3, 1445, 2640860, 0, 0, 0, 3536),
    "18/aggregate_retries.log": (15, 3, 1292, 4007453, 0, 1161, 2133, 0),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_AGG))
def test_aggregate_log_totals(rel: str) -> None:
    cols, n, tx, sumlat, skipped, retried, retries, ser = EXPECTED_AGG[rel]
    got = parse_aggregate_log((PG / rel).read_text())
    assert (got["columns"], len(got["intervals"]), got["transactions"]) == (cols, n, tx)
    assert got["latency_avg_ms"] == pytest.approx(sumlat / tx / 1000)
    assert (got["skipped"], got["retried"], got["retries"], got["serialization_failures"]) == (
        skipped, retried, retries, ser)
    assert got["interval_s"] == 1
    assert got["layout_versions"] == ("15+" if cols == 15 else got["layout_versions"])


def test_aggregate_log_first_intervals() -> None:
    # 15/aggregate.log line 1: 1795266699 15 11251 13318555 265 2483 0 0 0 0 0 0 0 0 0
    iv = parse_aggregate_log((PG / "15/aggregate.log").read_text())["intervals"][0]
    assert (iv["time"], iv["transactions"]) == (1795266699, 15)
    assert iv["latency_avg_ms"] == pytest.approx(11251 / 15 / 1000)
    assert (iv["latency_min_ms"], iv["latency_max_ms"]) == (0.265, 2.483)
    # 14/aggregate_rate.log line 1: 1795266862 200 252171 551403259 438 7949 54944 99062186 0 5320 10
    iv = parse_aggregate_log((PG / "14/aggregate_rate.log").read_text())["intervals"][0]
    assert (iv["transactions"], iv["skipped"], iv["lag_max_ms"]) == (200, 10, 5.320)
    assert iv["lag_avg_ms"] == pytest.approx(54944 / 200 / 1000)
    assert iv["latency_stddev_ms"] == pytest.approx(np.sqrt(551403259 / 200 - (252171 / 200) ** 2) / 1000)
    # 18/aggregate_failures.log line 3: 1795266783 505 965056 2367217288 313 9742 0 0 0 0 0 0 0 1365 0
    iv = parse_aggregate_log((PG / "18/aggregate_failures.log").read_text())["intervals"][2]
    assert (iv["time"], iv["transactions"], iv["serialization_failures"], iv["deadlock_failures"]) == (
        1795266783, 505, 1365, 0)


def test_aggregate_log_refuses_unknown_layouts() -> None:
    with pytest.raises(ParseError, match=r"6 columns \(9.5-14\).*15 columns \(15\+\)"):
        parse_aggregate_log("1795266699 15 11251 13318555 265 2483 0\n")
    with pytest.raises(ParseError, match="aggregate log"):
        parse_aggregate_log((PG / "15/txlog_failures").read_text())


# ---------------------------------------------------------------------------------------------
# sysbench
# ---------------------------------------------------------------------------------------------

SB = DATA / "sysbench"

EXPECTED_SYSBENCH = {
    "1.0/oltp_write_only.txt": dict(
        version="1.0.20", threads=2, transactions=1071, tps=327.85, queries=6471, qps=1980.89,
        qps_computed=False, reads=0, writes=4279, other=2192, errors=12, errors_per_s=3.67, reconnects=0,
        total_time_s=3.2652, events=1071, latency_min_ms=0.12, latency_avg_ms=6.09, latency_max_ms=1006.28,
        latency_sum_ms=6518.94, latency_p95_ms=0.95, latency_pct_ms=0.95, percentile=95),
    "1.0/oltp_write_only_p99.txt": dict(
        transactions=1709, tps=511.38, qps=3089.85, reads=0, writes=6832, other=3494, errors=19,
        total_time_s=3.3403, latency_min_ms=0.11, latency_avg_ms=3.90, latency_max_ms=1001.66,
        latency_p95_ms=None, latency_pct_ms=3.96, percentile=99),
    "1.0/oltp_write_only_nopct.txt": dict(
        transactions=1711, tps=739.19, qps=4470.55, errors=21, total_time_s=2.3131, latency_max_ms=1020.92,
        latency_p95_ms=None, latency_pct_ms=None, percentile=None),
    "1.0/oltp_read_write.txt": dict(
        threads=2, transactions=1985, tps=613.00, queries=39860, qps=12309.44, reads=27916, writes=7938,
        other=4006, errors=9, reconnects=0, total_time_s=3.2343, latency_min_ms=0.62, latency_avg_ms=3.25,
        latency_max_ms=1003.12, latency_p95_ms=1.93),
    "0.5/article_run.txt": dict(
        version="0.5", threads=1000, transactions=900895, tps=1500.68, queries=5405390, qps_computed=True,
        reads=0, writes=3603595, other=1801795, errors=5, errors_per_s=0.01, reconnects=0,
        total_time_s=600.3231, events=900895, latency_min_ms=6.78, latency_avg_ms=666.19,
        latency_max_ms=4218.55, latency_sum_ms=None, latency_p95_ms=1397.02, latency_pct_ms=1397.02,
        percentile=95),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_SYSBENCH))
def test_sysbench_numbers(rel: str) -> None:
    got = parse_run((SB / rel).read_text())
    assert got["tool"] == "sysbench"
    assert {k: got[k] for k in EXPECTED_SYSBENCH[rel]} == EXPECTED_SYSBENCH[rel]


def test_sysbench_05_qps_is_computed() -> None:
    """0.5 prints no total qps: total queries over total time (~ read/write + other per sec)."""
    got = parse_run((SB / "0.5/article_run.txt").read_text())
    assert got["qps"] == pytest.approx(5405390 / 600.3231)
    assert got["qps"] == pytest.approx(6002.76 + 3001.38, abs=0.02)


@pytest.mark.parametrize("rel, n, first, last", [
    ("1.0/oltp_write_only.txt", 3,
     dict(time_s=1.0, threads=2, tps=501.22, qps=3025.27, reads_per_s=0.0, writes_per_s=2001.90,
          other_per_s=1023.37, latency_pct_ms=1.14, percentile=95, errors_per_s=2.99, reconnects_per_s=0.0),
     dict(time_s=3.0, threads=2, tps=465.20, qps=2818.24, reads_per_s=0.0, writes_per_s=1863.82,
          other_per_s=954.42, latency_pct_ms=0.61, percentile=95, errors_per_s=7.00, reconnects_per_s=0.0)),
    ("1.0/oltp_write_only_p99.txt", 3,
     dict(time_s=1.0, threads=2, tps=240.48, qps=1452.88, reads_per_s=0.0, writes_per_s=962.93,
          other_per_s=489.95, latency_pct_ms=5.88, percentile=99, errors_per_s=1.0, reconnects_per_s=0.0),
     dict(time_s=3.0, threads=2, tps=398.15, qps=2409.89, reads_per_s=0.0, writes_per_s=1595.59,
          other_per_s=814.30, latency_pct_ms=1.52, percentile=99, errors_per_s=6.0, reconnects_per_s=0.0)),
    ("1.0/oltp_write_only_nopct.txt", 2,
     dict(time_s=1.0, threads=2, tps=1556.72, qps=9417.93, reads_per_s=0.0, writes_per_s=6216.95,
          other_per_s=3200.98, latency_pct_ms=None, percentile=None, errors_per_s=17.90,
          reconnects_per_s=0.0),
     dict(time_s=2.0, threads=2, tps=143.51, qps=868.06, reads_per_s=0.0, writes_per_s=575.05,
          other_per_s=293.01, latency_pct_ms=None, percentile=None, errors_per_s=1.99, reconnects_per_s=0.0)),
    ("1.0/oltp_read_write.txt", 3,
     dict(time_s=1.0, threads=2, tps=1048.57, qps=21041.18, reads_per_s=14735.81, writes_per_s=4198.26,
          other_per_s=2107.11, latency_pct_ms=2.14, percentile=95, errors_per_s=2.0, reconnects_per_s=0.0),
     dict(time_s=3.0, threads=2, tps=398.00, qps=7991.00, reads_per_s=5596.00, writes_per_s=1591.00,
          other_per_s=804.00, latency_pct_ms=1.30, percentile=95, errors_per_s=1.0, reconnects_per_s=0.0)),
    ("0.5/article_run.txt", 10,
     dict(time_s=60.0, threads=1000, tps=1320.25, qps=None, reads_per_s=0.0, writes_per_s=5312.62,
          other_per_s=None, latency_pct_ms=1484.54, percentile=95, errors_per_s=0.0, reconnects_per_s=0.0),
     dict(time_s=600.0, threads=1000, tps=1332.93, qps=None, reads_per_s=0.0, writes_per_s=5347.10,
          other_per_s=None, latency_pct_ms=1443.78, percentile=95, errors_per_s=0.02, reconnects_per_s=0.0)),
])
def test_sysbench_intervals(rel: str, n: int, first: dict, last: dict) -> None:
    iv = parse_run((SB / rel).read_text())["intervals"]
    assert len(iv) == n and iv[0] == first and iv[-1] == last


@pytest.mark.parametrize("rel", ["1.0/prepare.txt", "0.5/article_prepare.txt"])
def test_sysbench_refuses_prepare_output(rel: str) -> None:
    with pytest.raises(ParseError, match="without run statistics.*'SQL statistics:'"):
        parse_run((SB / rel).read_text())


def test_sysbench_refuses_other_text() -> None:
    with pytest.raises(ParseError, match="not sysbench output"):
        parse_run(read("pgbench/15/run_T.stdout"))


# ---------------------------------------------------------------------------------------------
# detect_and_parse / parse_many
# ---------------------------------------------------------------------------------------------

def _kind_of(path: Path) -> str | None:
    """What each data file is; None for the files that must be refused."""
    name, parent = path.name, path.parent.name
    if parent == "0.5" or parent == "1.0":
        return None if name in ("prepare.txt", "article_prepare.txt", "version.txt") else "sysbench_run"
    if name.endswith(".stdout") and name != "init.stdout":
        return "pgbench_run"
    if name.startswith("init") and name != "init.stdout":
        return "pgbench_init"
    if name == "article_run.txt":
        return "pgbench_run"
    if name == "article_init.txt":
        return "pgbench_init"
    if name.startswith("txlog"):
        return "pgbench_log"
    if name.startswith("aggregate"):
        return "pgbench_aggregate_log"
    return None


DATA_FILES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".md")


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_detect_and_parse_every_data_file(path: Path) -> None:
    kind = _kind_of(path)
    if kind is None:
        with pytest.raises(ParseError) as e:
            detect_and_parse(path)
        assert str(path) in str(e.value) and "expected one of" in str(e.value)
        return
    got = detect_and_parse(path)
    assert got["kind"] == kind and got["source"] == str(path)
    assert json.loads(json.dumps(got)) == got  # plain JSON types only


def test_detect_and_parse_joins_sibling_stderr(tmp_path: Path) -> None:
    got = detect_and_parse(PG / "15/run_failures.stdout")
    assert got["stderr_source"] == str(PG / "15/run_failures.stderr") and len(got["progress"]) == 3
    # the stdout.txt / stderr.txt naming pglab uses for run directories
    (tmp_path / "stdout.txt").write_text(read("pgbench/18/run_T.stdout"))
    (tmp_path / "stderr.txt").write_text(read("pgbench/18/run_T.stderr"))
    got = detect_and_parse(tmp_path / "stdout.txt")
    assert got["kind"] == "pgbench_run" and got["tps"] == 2263.191797 and len(got["progress"]) == 2
    (tmp_path / "stderr.txt").unlink()
    assert detect_and_parse(tmp_path / "stdout.txt")["progress"] == []


def test_unrecognised_file_names_file_and_formats(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("just some notes\nnothing to see here\n")
    with pytest.raises(ParseError) as e:
        detect_and_parse(f)
    msg = str(e.value)
    assert str(f) in msg and "not a recognised benchmark output" in msg
    for fmt in EXPECTED_FORMATS:
        assert fmt in msg
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ParseError, match="empty"):
        detect_and_parse(empty)
    with pytest.raises(ParseError, match="cannot read"):
        detect_and_parse(tmp_path / "missing.txt")


def test_progress_only_file_points_to_the_stdout() -> None:
    with pytest.raises(ParseError, match=r"run_T\.stderr.*only progress lines"):
        detect_and_parse(PG / "15/run_T.stderr")


def test_parse_many(tmp_path: Path) -> None:
    files = [PG / "15/run_T.stdout", PG / "14/init.stderr", PG / "18/txlog", PG / "15/aggregate.log",
             SB / "1.0/oltp_write_only.txt"]
    assert [r["kind"] for r in parse_many(files)] == ["pgbench_run", "pgbench_init", "pgbench_log",
                                                      "pgbench_aggregate_log", "sysbench_run"]
    bad = tmp_path / "bad.txt"
    bad.write_text("???\n")
    with pytest.raises(ParseError) as e:
        parse_many([*files, bad, SB / "1.0/prepare.txt"])
    assert "2 file(s)" in str(e.value) and str(bad) in str(e.value) and "prepare.txt" in str(e.value)
