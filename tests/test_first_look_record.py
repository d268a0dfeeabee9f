"""The first look's record is the truth at every stop (``pglab.workloads.adaptive``, ``claims.first_look``).

Blocks planned, added and finished, and why the adding stopped (decided, max_blocks, budget, interrupted,
failed), the same in the manifest and comparison.csv's ``stopped``, through an interrupt and a resume. Most
cases drive ``extend`` with a fake sweep (no server); one real run is interrupted during an added block and
resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import REPO, postgres_pids
from pglab.analysis import claims
from pglab.errors import ParameterError, RunAborted
from pglab.hosts.inventory import Inventory
from pglab.runs import resume, sweep
from pglab.runs.opening import Opened
from pglab.runs.params import validate
from pglab.runs.reading import load_manifest
from pglab.runs.session import session
from pglab.runs.store import RunStore
from pglab.workloads import adaptive

CONFIGS = ["a", "b", "c"]  # "a" the baseline; "b" stays open at the first look, "c" is decided
GROUP = sweep.Group("g")
FIRST = 6
PLANNED = sweep.plan_blocks(CONFIGS, "a", [GROUP], FIRST, seed=1)  # 6 x (3 + the A/A) = 24 points
CLAIM = claims.direction("b is faster than a", 1.2)


def added_block(n: int, open_configs: set[str]) -> list[sweep.Planned]:
    return sweep.plan_blocks(["a", *sorted(open_configs)], "a", [GROUP], n, 1 + n, start=n)


class Clock:
    """The time ``extend`` sees: each measured point takes 10 s of it."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """``extend`` with the fake clock, and observed.run as a plain sweep (no hosts, no samplers)."""
    c = Clock()
    monkeypatch.setattr(adaptive, "time", types.SimpleNamespace(monotonic=c.monotonic))

    def plain(run: Opened[Any], measure: Callable[..., str | None], *, desc: str, progress: bool = True,
              **_: Any) -> dict[str, int]:
        def one(pl: sweep.Planned, point: Any) -> str | None:
            c.now += 10.0
            return measure(pl, point, None)

        return sweep.run(run.store, run.points, one, desc=desc, progress=False)

    monkeypatch.setattr(adaptive.observed, "run", plain)
    yield c


def planned_run(root: Path) -> Opened[Any]:
    """A run whose 6 planned blocks are measured (60 s of sweep), ready for its first look."""
    store = RunStore(root, "synchronous_commit", "test", {})
    store.manifest["plan"] = sweep.plan_record(PLANNED, 1, "a", FIRST)
    sweep.run(store, PLANNED, lambda pl, pt: None, desc="planned", progress=False)
    store.manifest["sweep_s"] = [60.0]
    store.save()
    return Opened(None, store, None, list(PLANNED), None, 0.0)  # type: ignore[arg-type]


def extend(run: Opened[Any], measure: Callable[..., str | None], *, max_blocks: int = 9,
           budget_s: float | None = None, still_open: Callable[[], set[str]] = lambda: {"b"}) -> dict[str, Any]:
    return adaptive.extend(run, measure, first=FIRST, max_blocks=max_blocks, budget_s=budget_s,
                           still_open=still_open, block=added_block, desc="t", progress=False)


def row(manifest: dict[str, Any], blocks: int, open_: bool) -> dict[str, object]:
    """comparison.csv's row of a claim with ``blocks`` blocks, open (straddling 1.2) or decided (far above)."""
    x = (1.0 + 0.1 * np.arange(blocks)) if open_ else np.full(blocks, 3.0) + 0.01 * np.arange(blocks)
    return claims.comparison_row(CLAIM, x, adaptive=claims.first_look(manifest))


def ok_points(store: RunStore) -> set[str]:
    return {pid for pid, status in sweep.finished(store).items() if status == "ok"}


@pytest.mark.parametrize("how", ["interrupted", "failed"])
def test_a_stop_during_an_added_block_is_recorded_and_a_resume_finishes_it(
        tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Ctrl-C (or a failure that ends the run) on block 8's second point: block 7 is added and finished, block 8
    cut short and not counted; the counts stay whole (ok <= total); the analysis says so. The resume keeps the
    first look (never taken again over a folder with added blocks), finishes block 8 without measuring its
    finished point again, adds block 9 and ends on max_blocks."""
    run = planned_run(tmp_path / "runs")
    store = run.store
    victim = added_block(8, {"b"})[1].id

    def measure(pl: sweep.Planned, point: Any, watch: Any) -> str | None:
        if pl.id == victim:
            raise KeyboardInterrupt if how == "interrupted" else sweep.Abort("the standby died")
        return None

    with pytest.raises(KeyboardInterrupt if how == "interrupted" else RunAborted):
        with session(Inventory(), store):
            extend(run, measure)
    m = load_manifest(store.dir)
    record = m["plan"]["adaptive"]
    assert m["status"] == how and record["stopped"] == how and record["why"] == adaptive.STOPPED[how]
    assert (record["blocks_planned"], record["blocks_added"], record["blocks_finished"], record["cut_short"]) == (
        6, 1, 7, 8)
    assert record["looks"] == [{"blocks": 6, "open": ["b"]},
                               {"blocks": 7, "measured": ["b"], "verdicts": "comparison.csv"}]
    assert m["points"] == {"total": 24 + 3 + 3, "ok": 24 + 3 + 1, "failed": int(how == "failed")}
    look = claims.first_look(m)
    assert look is not None and look["stopped"] == how and look["blocks_added"] == 1
    still = row(m, 7, open_=True)
    assert still["verdict"] == "not resolvable here" and still["blocks"] == 7
    assert str(still["stopped"]).startswith(f"still open: {claims.STILL_OPEN[how][0]}; open at the first look (6")
    assert f"(stopped: {how})" in str(still["stopped"])
    cut = row(m, 8, open_=True)  # block 8's finished points give the claim an 8th value: said, not hidden
    assert "block 8 cut short (only its finished points count)" in str(cut["stopped"])
    decided = row(m, 6, open_=False)
    assert decided["verdict"] == "held" and "decided there" in str(decided["stopped"])
    assert f"stopped: {how}" in str(decided["stopped"])

    # --resume: the same folder, the plan checked as resume does (git and machine checks left to test_resume)
    measured_before = {pid: json.loads((store.dir / pid / "meta.json").read_text())["end"] for pid in ok_points(store)}
    monkeypatch.setattr(resume, "resumable", lambda run_dir, *a, **k: RunStore.reopen(run_dir))
    again = resume.open_run(tmp_path, "synchronous_commit", "test", {}, sweep.plan_record(PLANNED, 1, "a", FIRST),
                            Inventory(), resume=store.dir)
    assert again.manifest["plan"]["adaptive"]["cut_short"] == 8  # kept across the reopen
    rerun = Opened(None, again, None, list(PLANNED), None, 0.0)
    with session(Inventory(), again):
        sweep.run(again, PLANNED, lambda pl, pt: None, desc="planned", progress=False)
        assert again.manifest["points"]["ok"] <= again.manifest["points"]["total"]
        extend(rerun, lambda pl, pt, w: None, still_open=lambda: pytest.fail("the first look was taken again"))
    m = load_manifest(store.dir)
    record = m["plan"]["adaptive"]
    # a failed added point keeps the run partial, as a failed planned point does (reading.planned_points)
    assert m["status"] == ("partial" if how == "failed" else "complete")
    assert record["stopped"] == "max_blocks" and record["cut_short"] is None
    assert (record["blocks_added"], record["blocks_finished"]) == (3, 9)
    assert record["resumes"] == [{"previous": how, "blocks_finished": 7, "cut_short": 8}]
    assert record["added"] == [p.id for n in (7, 8, 9) for p in added_block(n, {"b"})]
    failed = int(how == "failed")  # a failed point is over: a resume does not measure it again
    assert m["points"] == {"total": 24 + 9, "ok": 24 + 9 - failed, "failed": failed}
    for pid, end in measured_before.items():  # finished points were not measured again
        assert json.loads((store.dir / pid / "meta.json").read_text())["end"] == end
    if how == "interrupted":
        assert (store.dir / "interrupted" / f"{victim}.1").is_dir()  # the one in flight, kept aside
    assert "1 blocks added" not in str(row(m, 9, open_=True)["stopped"])
    assert "3 blocks added, then max_blocks reached (stopped: max_blocks)" in str(row(m, 9, open_=True)["stopped"])


def test_a_budget_shorter_than_one_block_adds_none_and_the_open_claim_says_so(tmp_path: Path, clock: Clock) -> None:
    """60 s of sweep for 6 blocks, a budget of 65 s: the next block would end past it, so none is added; the
    claim the first look found open is "still open", never "decided there"."""
    run = planned_run(tmp_path / "runs")
    record = extend(run, lambda pl, pt, w: pytest.fail("no block fits the budget"), budget_s=65.0)
    m = load_manifest(run.store.dir)
    assert m["plan"]["adaptive"] == record
    assert (record["stopped"], record["blocks_added"], record["blocks_finished"], record["cut_short"]) == (
        "budget", 0, 6, None)
    assert record["looks"] == [{"blocks": 6, "open": ["b"]}] and record["added"] == []
    assert m["points"] == {"total": 24, "ok": 24, "failed": 0}
    still = row(m, 6, open_=True)
    assert still["verdict"] == "not resolvable here" and still["confidence"] == 0.95
    assert "decided there" not in str(still["stopped"])
    assert str(still["stopped"]).startswith("still open: the budget ended the adding before a block was added")
    assert "stopped: budget" in str(still["stopped"])


def test_the_budget_counts_each_added_block(tmp_path: Path, clock: Clock) -> None:
    """Blocks of 3 points (30 s) after 60 s of sweep, a budget of 135 s: blocks 7 and 8 end by 120 s, block 9
    would end at 150 s. A first look with nothing open adds none and says decided."""
    run = planned_run(tmp_path / "runs")
    record = extend(run, lambda pl, pt, w: None, max_blocks=12, budget_s=135.0)
    assert (record["stopped"], record["blocks_added"], record["blocks_finished"]) == ("budget", 2, 8)
    assert record["looks"][1] == {"blocks": 8, "measured": ["b"], "verdicts": "comparison.csv"}
    assert load_manifest(run.store.dir)["points"] == {"total": 30, "ok": 30, "failed": 0}
    decided = extend(planned_run(tmp_path / "other"), lambda pl, pt, w: None, still_open=set)
    assert (decided["stopped"], decided["blocks_added"], decided["why"]) == ("decided", 0, adaptive.STOPPED["decided"])


def test_older_records_read_the_same() -> None:
    """A record older code left ``running`` counted the block under way as added; one without ``stopped`` is read
    from its ``why``; the shipped fdw_overhead run (stopped on its budget) analyses as its derived comparison.csv
    says, verdicts and intervals alike, and its open claims now say so."""
    old = {"first_look": 6, "blocks_added": 2, "stopped": "running", "looks": [{"blocks": 6, "open": ["b"]}]}
    look = claims.first_look({"plan": {"adaptive": old}, "status": "interrupted"})
    assert look is not None and (look["stopped"], look["blocks_added"], look["cut_short"]) == ("interrupted", 1, 8)
    failed = claims.read_look(old, "failed")
    assert failed["stopped"] == "failed" and failed["why"] == claims.STOPPED["failed"]
    assert claims.read_look({"first_look": 6, "why": "max_blocks reached"})["stopped"] == "max_blocks"
    assert claims.first_look({"plan": {"points": []}}) is None
    with pytest.raises(ValueError, match="plan.adaptive.first_look: not a number of blocks"):
        claims.first_look({"plan": {"adaptive": {"first_look": "six", "stopped": "budget"}}})
    assert claims.STOPPED == adaptive.STOPPED  # the words the manifest and comparison.csv use are the same


def test_the_shipped_fdw_run_says_why_each_claim_got_its_blocks(tmp_path: Path) -> None:
    """The newest fdw_overhead run of the DVC remote that took a first look (the quick profile did until it became a
    campaign): its record is whole, and every claim's ``stopped`` names the run's stop; a claim left open never
    reads "decided there"."""
    from pglab.ledger.shipped import materialize, remote_runs
    from pglab.studies.fdw_overhead import analyze

    remote = REPO / "data" / "dvc-remote"
    dir_hash, m = next((h, m) for h, m in reversed(list(remote_runs(remote))) if m["study"] == "fdw_overhead"
                       and ((m.get("plan") or {}).get("adaptive") or {}).get("stopped") in adaptive.STOPPED)
    run = materialize(remote, dir_hash, tmp_path / m["run_id"])
    manifest = load_manifest(run)
    look = claims.first_look(manifest)
    assert look is not None and look["stopped"] in adaptive.STOPPED and look["stopped"] != "running"
    assert look["blocks_finished"] == look["blocks_planned"] + look["blocks_added"]
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data" / "reference")
    for r in a.comparison.itertuples():
        assert f"stopped: {look['stopped']}" in r.stopped
        still_open = (r.here_verdict if isinstance(r.here_verdict, str) and r.here_verdict else r.verdict) == \
            "not resolvable here"  # a claim not judged here (a machine unlike the article's) by its here_verdict
        assert r.stopped.startswith("still open: ") == (still_open and look["stopped"] != "decided"), r.stopped
        assert not (still_open and "decided there" in r.stopped), r.stopped


def _adaptive() -> list[str]:
    """The studies with a first look (their params are ``AdaptiveParams``), from the registry."""
    from pglab.runs.params import AdaptiveParams
    from pglab.studies import STUDIES, module

    return [s for s in STUDIES if issubclass(module(s, "params").Params, AdaptiveParams)]


@pytest.mark.parametrize("study", _adaptive())
def test_budget_s_without_max_blocks_is_refused(study: str) -> None:
    from pglab.studies import module

    params = module(study, "params").Params
    smoke = yaml.safe_load((REPO / f"params/{study}.yaml").read_text())["profiles"]["smoke"]
    body = {k: v for k, v in smoke.items() if k != "max_blocks"}
    with pytest.raises(ParameterError, match=r"budget_s: .*budget_s=300 is set without max_blocks"):
        validate(params, {**body, "budget_s": 300}, "test")
    validate(params, {**body, "budget_s": 300, "max_blocks": body.get("blocks", 6) + 1}, "test")


def test_the_cli_refuses_budget_s_alone_before_anything_starts(tmp_path: Path) -> None:
    smoke = yaml.safe_load((REPO / "params/synchronous_commit.yaml").read_text())["profiles"]["smoke"]
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": {**smoke, "budget_s": 300}}}))
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", "--params",
                          str(pfile), "--data-root", str(tmp_path / "data"), "--quiet"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "budget_s" in res.stderr and "without max_blocks" in res.stderr, res.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("manifest.json"))


def test_no_profile_sets_budget_s_without_max_blocks() -> None:
    for f in sorted((REPO / "params").glob("*.yaml")):
        for name, body in (yaml.safe_load(f.read_text()).get("profiles") or {}).items():
            if isinstance(body, dict) and body.get("budget_s") is not None:
                assert body.get("max_blocks") is not None, f"{f.name}: profile {name}"


@pytest.mark.servers
@pytest.mark.slow
@pytest.mark.xdist_group("adaptive")
def test_a_real_run_interrupted_in_an_added_block_resumes_to_the_same_record(tmp_path: Path) -> None:
    """synchronous_commit, 1 planned block, max_blocks 2: SIGINT once block 2 has begun. The run ends
    ``interrupted`` and so does its record (block 2 cut short, none added); ``--resume`` finishes block 2 and the
    record, the counts and comparison.csv agree: 1 block added, stopped on max_blocks."""
    from pglab.studies.synchronous_commit import analyze

    smoke = yaml.safe_load((REPO / "params/synchronous_commit.yaml").read_text())["profiles"]["smoke"]
    params = {**smoke, "levels": ["on", "off"], "clients": [2], "seconds": 2, "warmup_s": 1, "blocks": 1,
              "max_blocks": 2, "standby_read_blocks": 0, "fsync_test_seconds": 0, "transaction_log": False}
    params.pop("budget_s", None)
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump({"profile": "t", "profiles": {"t": params}}))
    base = ["--params", str(pfile), "--data-root", str(tmp_path / "data"), "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", *base],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            found = list((tmp_path / "data/runs/synchronous_commit").glob("*/write-b02-*"))
            if found:
                run = found[0].parent
                break
            time.sleep(0.1)
        assert run is not None and proc.poll() is None, "the run never began its added block"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    m = load_manifest(run)
    record = m["plan"]["adaptive"]
    assert m["status"] == "interrupted" and record["stopped"] == "interrupted"
    assert (record["blocks_added"], record["blocks_finished"], record["cut_short"]) == (0, 1, 2)
    assert m["points"]["ok"] <= m["points"]["total"] == 3 + 3
    assert not postgres_pids(m["workspaces"]["local"])

    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", *base,
                          "--resume", run.name], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    m = load_manifest(run)
    record = m["plan"]["adaptive"]
    assert m["status"] == "complete" and record["stopped"] == "max_blocks" and record["cut_short"] is None
    assert (record["blocks_added"], record["blocks_finished"]) == (1, 2)
    assert record["resumes"][0]["previous"] == "interrupted"
    assert m["points"] == {"total": 6, "ok": 6, "failed": 0}
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data" / "reference")
    off = a.comparison.set_index("claim").loc["off is an order of magnitude faster than on (slow disk)"]
    assert off["blocks"] == 2
    assert off["stopped"].endswith("1 blocks added, then max_blocks reached (stopped: max_blocks)")
    assert off["stopped"].startswith("still open: max_blocks ended the adding")
