"""The `pglab` command line: parse output, clear errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import REPO
from pglab.parsers.aggregate_log import parse_aggregate_log
from pglab.parsers.pgbench import parse_init, parse_summary
from pglab.parsers.sysbench import parse_run
from pglab.parsers.txlog import parse_transaction_log_file

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


# kind -> files under tests/data of that kind (every pgbench version, both sysbench versions)
KINDS = {
    "pgbench_log": ["pgbench/14/txlog_rate", "pgbench/15/txlog_failures", "pgbench/18/txlog_retries"],
    "pgbench_aggregate_log": ["pgbench/14/aggregate_rate.log", "pgbench/15/aggregate_retries.log",
                              "pgbench/18/aggregate_failures.log"],
    "pgbench_run": ["pgbench/9.6/article_run.txt", "pgbench/14/run_r.stdout", "pgbench/15/run_failures_detailed.stdout",
                    "pgbench/18/run_server15.stdout"],
    "pgbench_init": ["pgbench/9.6/article_init.txt", "pgbench/14/init.stderr", "pgbench/18/init_pty.txt"],
    "sysbench_run": ["sysbench/0.5/article_run.txt", "sysbench/1.0/oltp_read_write.txt"],
}


def library(kind: str, path: Path) -> dict[str, Any]:
    """What the library returns for ``path``, called as a user of the parsers would."""
    if kind == "pgbench_log":
        return parse_transaction_log_file(path)
    text = path.read_text()
    if kind == "pgbench_run":
        stderr = path.with_suffix(".stderr")
        return parse_summary(text, stderr.read_text() if path.suffix == ".stdout" and stderr.exists() else "")
    return {"pgbench_aggregate_log": parse_aggregate_log, "pgbench_init": parse_init,
            "sysbench_run": parse_run}[kind](text)


def test_parse_prints_what_the_library_returns(tmp_path: Path) -> None:
    """The command only adds ``kind`` and ``source`` (and a run's ``stderr_source``) to the library's dict,
    for every format, a log larger than what is read to recognise it included; its JSON is json.dumps's."""
    big = tmp_path / "pgbench_log.1"
    big.write_bytes((DATA / "pgbench/15/txlog_failures").read_bytes() * 20)  # over a MB, read in chunks
    files = [(kind, DATA / rel) for kind, rels in KINDS.items() for rel in rels] + [("pgbench_log", big)]
    res = pglab("parse", *(str(p) for _, p in files))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert res.stdout == json.dumps(out, indent=2) + "\n"
    assert len(out) == len(files)
    for (kind, path), got in zip(files, out, strict=True):
        assert (got.pop("kind"), got.pop("source")) == (kind, str(path))
        got.pop("stderr_source", None)
        assert got == json.loads(json.dumps(library(kind, path))), path
    small = files.index(("pgbench_log", DATA / "pgbench/15/txlog_failures"))
    assert out[-1]["transactions"] == 20 * out[small]["transactions"]


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


def test_run_folders_are_untrusted_input(tmp_path: Path) -> None:
    """Issue 33 section 4 as reported: a copy of a shipped run whose manifest says run_id ``../escaped-X``, one
    cut short, a run of another study, an --out that is a file: exit 2, one line naming the file, no traceback,
    nothing written (the full checks: tests/test_hostile_runs.py)."""
    import shutil

    from conftest import pulled_runs

    pulled_runs("synchronous_commit", "fdw_overhead")
    run = tmp_path / "run"
    shutil.copytree(REPO / "data" / "raw" / "synchronous_commit", run)
    m = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**m, "run_id": "../escaped-X"}))
    out = tmp_path / "out"
    res = pglab("spread", "synchronous_commit", str(run), str(run), "--out", str(out))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"pglab: {run / 'manifest.json'}: ")
    assert "'../escaped-X' is not a plain id" in res.stderr
    assert not out.exists() and not (tmp_path / "escaped-X").exists()

    (run / "manifest.json").write_text(json.dumps(m)[:500])
    for args in (["compare", str(run), str(run)], ["spread", "synchronous_commit", str(run), "--out", str(out)],
                 ["analyze", "synchronous_commit", "--run", str(run), "--data-root", str(tmp_path / "d")]):
        res = pglab(*args)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert f"{run / 'manifest.json'}: not valid JSON, truncated or hand-edited" in res.stderr

    other = REPO / "data" / "raw" / "fdw_overhead"
    res = pglab("analyze", "synchronous_commit", "--run", str(other), "--data-root", str(tmp_path / "d"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert f"{other / 'manifest.json'}: a run of fdw_overhead, not of synchronous_commit" in res.stderr
    assert not (tmp_path / "d").exists()

    out.write_text("")
    res = pglab("spread", "synchronous_commit", str(REPO / "data" / "raw" / "synchronous_commit"), "--out", str(out))
    assert res.returncode == 2 and res.stderr == f"pglab: --out {out}: exists and is not a folder\n"
    for flag in ("--data-root", "--figures"):  # analyze's outputs: a file where a folder belongs, refused first
        res = pglab("analyze", "synchronous_commit", "--run", str(REPO / "data" / "raw" / "synchronous_commit"),
                    "--data-root", str(tmp_path / "d2"), flag, str(out))
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith(f"pglab: {flag} {out}/") and "cannot be made a folder" in res.stderr


def test_version_and_every_option_has_help() -> None:
    """`pglab --version` names the package (and commit); every option and argument of every command says what it
    is, except `collect`'s own, defined with the collect stage (pglab.app.collect, a DVC dependency of it)."""
    import argparse

    from pglab.app.cli import build_parser

    res = pglab("--version")
    assert res.returncode == 0 and res.stdout.startswith("pglab ")
    ap = build_parser()
    assert "``" not in (ap.description or "")
    missing = []
    stack = [("pglab", ap)]
    while stack:
        name, parser = stack.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {n}", p) for n, p in action.choices.items()]
            elif not action.help and not (name == "pglab collect" and action.dest not in ("repeat", "reference")):
                missing.append(f"{name}: {action.dest}")
    assert missing == []
