"""Resumable sweeps: a run SIGKILLed mid-sweep continues in its own folder with `--resume`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, postgres_pids
from pglab.runs.reading import load_manifest
from pglab.runs.resume import ResumeError, differences, resumable
from pglab.studies.synchronous_commit import analyze
from pglab.studies.synchronous_commit.collect import plan
from pglab.studies.synchronous_commit.params import Params

pytestmark = pytest.mark.servers
SMOKE = yaml.safe_load((REPO / "params/synchronous_commit.yaml").read_text())["profiles"]["smoke"]
PARAMS = {**SMOKE, "levels": ["on", "off"], "clients": [2], "seconds": 2, "warmup_s": 1, "blocks": 2,
          "standby_read_blocks": 0, "fsync_test_seconds": 0, "transaction_log": False}


def pglab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pglab.app.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def finished_points(run: Path) -> dict[str, dict]:
    out = {}
    for meta in run.glob("*/meta.json"):
        m = json.loads(meta.read_text())
        if "block" in m and m.get("status") == "ok":
            out[m["point"]] = m
    return out


@pytest.mark.slow
def test_a_killed_run_resumes_at_its_first_unfinished_point(tmp_path: Path) -> None:
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": PARAMS}}))
    base = ["--params", str(pfile), "--data-root", str(tmp_path / "data"), "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", *base], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    run = None
    while time.monotonic() < deadline:
        runs = list((tmp_path / "data/runs/synchronous_commit").glob("*/manifest.json"))
        run = runs[0].parent if runs else None
        # two points finished, the third under way
        if run and len(finished_points(run)) >= 2 and len(list(run.glob("write-*"))) >= 3:
            break
        time.sleep(0.1)
    assert run is not None and proc.poll() is None, "the run never got to its third point"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = finished_points(run)
    in_flight = {p.name for p in run.glob("write-*")} - set(before)
    assert len(before) >= 2 and in_flight
    ws = load_manifest(run)["workspaces"]["local"]
    assert postgres_pids(ws), "the killed run left its servers (what resume must clean up)"

    # a different plan is refused, naming the difference, before anything starts
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": {**PARAMS, "seed": 7}}}))
    res = pglab("collect", "synchronous_commit", "--params", str(changed), "--data-root", str(tmp_path / "data"),
                "--quiet", "--resume", run.name)
    assert res.returncode == 2 and "parameter seed: 1 -> 7" in res.stderr, res.stderr

    res = pglab("collect", "synchronous_commit", *base, "--resume")  # the newest unfinished run
    assert res.returncode == 0, res.stderr[-3000:]
    assert not postgres_pids(ws)
    m = load_manifest(run)
    assert m["status"] == "complete" and len(m["resumes"]) == 1 and m["resumes"][0]["previous_status"] == "killed"
    assert m["resumes"][0]["hosts"]["local"]["machine_id"] == m["hosts"]["local"]["machine_id"]  # same machine
    after = finished_points(run)
    for pid, meta in before.items():  # finished points were not measured again
        assert after[pid]["start"] == meta["start"] and after[pid]["end"] == meta["end"]
    for pid in in_flight:  # the one in flight was, and its first attempt is kept aside
        assert pid in after and (run / "interrupted" / f"{pid}.1").is_dir()
    ids = [p.id for p in plan(Params(**PARAMS))]
    assert sorted(after) == sorted(ids) and m["points"] == {"total": len(ids), "ok": len(ids), "failed": 0}
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data/reference")
    assert sorted(a.points.point) == sorted(ids)  # every point once: the shape of one uninterrupted run
    assert a.ratios.groupby(["block", "clients", "config"]).size().max() == 1
    # a completed run has nothing to resume
    with pytest.raises(ResumeError, match="ended complete"):
        resumable(run, Params(**PARAMS).model_dump(), m["plan"])


def test_a_run_from_another_machine_is_not_resumed(tmp_path: Path) -> None:
    from pglab.hosts.inventory import Inventory
    from pglab.runs.resume import _machine_problems

    manifest = {"hosts": {"local": {"cpu_model": "a CPU that is not this one", "cores": 2}}}
    problems = _machine_problems(manifest, Inventory())
    assert problems and problems[0].startswith("host local cpu_model: 'a CPU that is not this one' -> ")


def test_differences_name_the_key() -> None:
    assert differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}}) == ["b.c: 2 -> 3"]
    assert differences({"a": 1}, {"a": 1, "d": 0}) == ["d: '<absent>' -> 0"]


def test_git_revision_says_dirty_and_unverified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What resume compares: HEAD, +dirty for changed tracked files, +unverified when git status is too slow."""
    from pglab.runs import writing as store

    assert store.git_revision(tmp_path) is None  # not a repository
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "f").write_text("a\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    (tmp_path / "data" / "metrics").mkdir(parents=True)
    (tmp_path / "data" / "metrics" / "s.json").write_text("{}\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        subprocess.run(cmd, cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert store.git_revision(tmp_path) == head
    # what `dvc repro` rewrites between its stages is no change of code: the next collect is not +dirty
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (tmp_path / "data" / "metrics" / "s.json").write_text('{"held": 1}\n')
    assert store.git_revision(tmp_path) == head
    assert store.git_revision(tmp_path / "data") == head  # from a subfolder alike
    (tmp_path / "f").write_text("b\n")
    assert store.git_revision(tmp_path) == head + "+dirty"
    real_run = subprocess.run

    def slow_status(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        if args[:2] == ["git", "status"]:
            raise subprocess.TimeoutExpired(args, 60)
        return real_run(args, **kw)

    monkeypatch.setattr(store.subprocess, "run", slow_status)
    assert store.git_revision(tmp_path) == head + "+unverified"
