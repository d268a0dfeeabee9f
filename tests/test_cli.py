"""The `pglab` command line: parse output, clear errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

DATA = REPO / "tests" / "data"


def pglab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pglab.app.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_parse_pgbench_of_two_versions_and_sysbench() -> None:
    res = pglab("parse", str(DATA / "pgbench/15/run_t.stdout"), str(DATA / "pgbench/18/run_t.stdout"),
                str(DATA / "sysbench/1.0/oltp_write_only.txt"))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [o["kind"] for o in out] == ["pgbench_run", "pgbench_run", "sysbench_run"]
    for o, text in zip(out[:2], ("15/run_t.stdout", "18/run_t.stdout"), strict=True):
        printed = (DATA / "pgbench" / text).read_text()
        # the number printed on the "tps = " line, exactly
        tps_line = next(line for line in printed.splitlines() if line.startswith("tps = "))
        assert float(tps_line.split()[2]) == o["tps"]
        assert f"actually processed: {o['transactions']}" in printed
    assert out[2]["tool"] == "sysbench" and out[2]["tps"] > 0 and "latency_p95_ms" in out[2]


def test_parse_single_file_is_an_object_with_progress() -> None:
    res = pglab("parse", str(DATA / "pgbench/15/run_T.stdout"))
    o = json.loads(res.stdout)
    assert isinstance(o, dict) and len(o["progress"]) >= 2  # from the sibling stderr (-P lines)


def test_parse_unknown_file_exits_2_and_says_what_was_expected() -> None:
    res = pglab("parse", str(REPO / "pyproject.toml"))
    assert res.returncode == 2
    assert "pgbench run summary" in res.stderr and "sysbench" in res.stderr
    assert "Traceback" not in res.stderr


def test_check_reports_this_machine() -> None:
    res = pglab("check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok   host local" in res.stdout and "ok   study synchronous_commit" in res.stdout
    assert "ok   study logical_replication" in res.stdout
    assert "will be skipped" not in res.stdout  # bootstrap installed every replication system


def test_unknown_study_is_a_usage_error() -> None:
    res = pglab("collect", "no_such_study")
    assert res.returncode == 2 and "invalid choice" in res.stderr


def test_check_takes_a_params_file_of_one_study(tmp_path) -> None:
    """A variant is checked without editing the pipeline's params (a DVC dependency)."""
    import yaml

    bad = tmp_path / "variant.yaml"
    bad.write_text(yaml.safe_dump({"profile": "v", "profiles": {"v": {"blocks": 0}}}))
    res = pglab("check", "synchronous_commit", "--params", str(bad))
    assert res.returncode == 1 and f"FAIL invalid parameters in {bad} profiles.v" in res.stdout, res.stdout
    assert "blocks" in res.stdout
    res = pglab("check", "synchronous_commit", "fdw_overhead", "--params", str(bad))
    assert res.returncode == 2 and "--params names one study's params file" in res.stderr
