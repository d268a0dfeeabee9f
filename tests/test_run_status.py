"""A run's status cannot lie: ``complete`` only when every planned point was measured; a node that dies
ends the run at once; a partial run is archived but not published unless asked."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, postgres_pids
from pglab import exits
from pglab.app import collect as app_collect
from pglab.app import notebook, notebook_collect
from pglab.errors import RunAborted, UserError, first_line
from pglab.hosts.inventory import Inventory
from pglab.runs import runs_index, sweep
from pglab.runs.reading import load_manifest, points_not_ok
from pglab.runs.session import session
from pglab.runs.store import RunStore
from test_synchronous_commit import tiny

pytestmark = pytest.mark.servers


def _write_params(tmp_path: Path, **kw: object) -> Path:
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": tiny(**kw)}}))
    return f


def _stop_immediately(node: dict) -> None:
    """What a crash or an OOM kill does to a server, from outside pglab."""
    argv = [f"{node['bindir']}/pg_ctl", "-D", node["data_dir"], "-m", "immediate", "-w", "stop"]
    if os.geteuid() == 0 and node["server_user"] != "root":
        argv = ["runuser", "-u", node["server_user"], "--", *argv]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def _first_ok_point(data_root: Path, deadline_s: float = 120) -> Path:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for meta in data_root.glob("runs/*/*/write-*/meta.json"):
            try:
                if json.loads(meta.read_text()).get("status") == "ok":
                    return meta.parent.parent
            except ValueError:
                continue
        time.sleep(0.2)
    raise AssertionError("no point finished in time")


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["primary", "standby1"])
def test_a_node_that_dies_ends_the_run_at_once(tmp_path: Path, victim: str) -> None:
    """A server stopped mid-sweep (a crash): the next point that fails ends the run, which names the node,
    its host and its log; status failed, exit 1, not published, nothing left running."""
    params = _write_params(tmp_path, levels=["on", "off"], blocks=4, seconds=2, standby_read_blocks=0,
                           client_timeout_s=20)
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "pglab.app.collect", "synchronous_commit", "--params",
                             str(params), "--data-root", str(data), "--quiet"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run = _first_ok_point(data)
        m = load_manifest(run)
        node = next(n for n in m["nodes"] if n["name"] == victim)
        _stop_immediately(node)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exits.PROCESS, err
    assert f"node {victim} on host local is not running any more" in err, err
    assert "the last lines of its server log" in err and "database system is shut down" in err, err
    m = load_manifest(run)
    assert m["status"] == "failed" and m["outcome"] == "failed", m["status"]
    statuses = [json.loads(p.read_text())["status"] for p in run.glob("write-*/meta.json")]
    assert statuses.count("failed") == 1, statuses  # the run did not go on failing point after point
    planned = len(m["plan"]["points"])
    assert len(m["failed_points"]) == planned - statuses.count("ok") > 1
    assert not (data / "raw" / "synchronous_commit").exists()  # never the pipeline's run
    assert not postgres_pids(m["workspaces"]["local"])
    shutil.rmtree(m["workspaces"]["local"], ignore_errors=True)


def test_a_failed_point_is_summarised_by_the_first_line_of_its_error() -> None:
    assert first_line("  OperationalError: connection failed\n  DETAIL: more") == "OperationalError: connection failed"
    assert first_line("x" * 500) == "x" * 200 and first_line("x" * 500, 300) == "x" * 300
    assert first_line("") == first_line(None) == first_line(" \n ") == ""


def test_a_failed_point_makes_the_run_partial_and_a_sick_session_aborts_it(tmp_path: Path) -> None:
    """sweep + session alone (no server): a point that fails leaves the run partial, never complete; the
    run's health check and a full disk end it at once."""
    points = sweep.plan_blocks(["a", "b"], "a", [sweep.Group("g")], blocks=2, seed=1)

    def open_run(name: str) -> RunStore:
        store = RunStore(tmp_path / name, "synchronous_commit", "test", {})
        store.manifest["plan"] = sweep.plan_record(points, 1, "a", 2)
        return store

    store = open_run("partial")
    with session(Inventory(), store):
        counts = sweep.run(store, points, lambda pl, pt: "injected" if pl.id == points[1].id else None,
                           desc="t", progress=False, health=lambda: None)
    m = load_manifest(store.dir)
    assert counts["failed"] == 1 and m["status"] == "partial" and m["failed_points"] == [points[1].id]
    assert points_not_ok(store.dir) == {points[1].id: "failed: injected"}

    for name, reason, health, says in [
            ("sick", "pgbench exited 2", lambda: "node primary on host h1 is not running any more", "not running"),
            ("full", "could not write: No space left on device", lambda: None, "a disk is full")]:
        store = open_run(name)
        with pytest.raises(RunAborted, match=says):
            with session(Inventory(), store):
                sweep.run(store, points, lambda pl, pt, r=reason: r, desc="t", progress=False, health=health)
        m = load_manifest(store.dir)
        assert m["status"] == "failed" and m["failed_points"] == [p.id for p in points]
        assert [json.loads(p.read_text())["status"] for p in store.dir.glob("*/meta.json")] == ["failed"]


def test_a_partial_run_is_archived_not_published_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's exit 3 and its message; ``--accept-failed`` publishes; the notebook refuses it too."""
    run = tmp_path / "data" / "runs" / "synchronous_commit" / "20260101T000000Z-abcdef"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "study": "synchronous_commit", "run_id": run.name, "status": "partial",
        "plan": {"points": ["write-b01-c002-on", "write-b01-c002-off"]}}))
    for pid, status in [("write-b01-c002-on", "ok"), ("write-b01-c002-off", "failed")]:
        (run / pid).mkdir()
        (run / pid / "meta.json").write_text(json.dumps({"status": status, "error": "pgbench exited 1\nmore"}))
    from pglab.studies import module

    monkeypatch.setattr(module("synchronous_commit", "collect"), "collect", lambda *a, **k: run)
    argv = ["synchronous_commit", "--profile", "smoke", "--data-root", str(tmp_path / "data"), "--quiet"]  # one run
    assert app_collect.main(argv) == exits.PARTIAL == 3
    err = capsys.readouterr().err
    assert "is partial: 1 of 2 planned points not measured (write-b01-c002-off failed: pgbench exited 1)" in err
    assert "--accept-failed" in err and not (tmp_path / "data" / "raw" / "synchronous_commit").exists()
    assert app_collect.main([*argv, "--accept-failed"]) == 0
    assert (tmp_path / "data" / "raw" / "synchronous_commit" / "manifest.json").exists()
    with pytest.raises(RunAborted, match="is partial: 1 of 2"):
        notebook_collect.collect("synchronous_commit", {"profile": "smoke", "data_root": str(tmp_path / "nb")},
                                 progress=False)
    with pytest.raises(UserError, match="collect=True, but no synchronous_commit run was collected"):
        notebook.run("synchronous_commit", {"profile": "smoke", "data_root": str(tmp_path / "nb")})


def _measuring(data: Path, study: str) -> bool:
    """A planned point of the study's run has started (its meta.json has a block)."""
    for meta in data.glob(f"runs/{study}/*/*/meta.json"):
        with contextlib.suppress(ValueError, OSError):
            if "block" in json.loads(meta.read_text()):
                return True
    return False


@pytest.mark.slow
def test_two_runs_at_once_and_a_cleanup_between_them(tmp_path: Path) -> None:
    """Two studies collected at once under one data root, `pglab cleanup` while both run: cleanup reports
    both as live and touches neither; both complete with every point measured, their index entries kept."""
    from test_fdw_overhead import tiny as fdw_tiny

    data = tmp_path / "data"
    # long enough to overlap: under CI's load one study's set-up outlasted the other's 12 s of points once, and
    # cleanup found only one run in progress
    files = {"synchronous_commit": _write_params(tmp_path, levels=["on", "off"], blocks=5, seconds=4,
                                                 standby_read_blocks=0)}
    files["fdw_overhead"] = tmp_path / "fdw.yaml"
    files["fdw_overhead"].write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": fdw_tiny(seconds=4,
                                                                                                 blocks=2)}}))
    procs = {s: subprocess.Popen([sys.executable, "-m", "pglab.app.collect", s, "--params", str(f), "--data-root",
                                  str(data), "--quiet"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for s, f in files.items()}
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not all(_measuring(data, s) for s in files):
            time.sleep(0.2)
        res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "cleanup", "--data-root", str(data)],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
        outs = {s: p.communicate(timeout=600) for s, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("run still in progress") == 2 and "2 run(s) in progress, left alone" in res.stdout
    for study, p in procs.items():
        assert p.returncode == 0, (study, outs[study][1])
        run = next(data.glob(f"runs/{study}/*"))
        m = load_manifest(run)
        assert m["status"] == "complete" and m["points"]["ok"] == m["points"]["total"] > 0, (study, m["points"])
        assert not postgres_pids(m["workspaces"]["local"])
    # cleanup dropped neither live run's index entry (it may prune other tests' finished runs)
    registered = {p.resolve() for _, p in runs_index.entries()}
    assert {(next(data.glob(f"runs/{s}/*")) / "manifest.json").resolve() for s in files} <= registered
