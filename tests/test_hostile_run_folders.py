"""Run folders hand-edited the ways a colleague might (issue 47 part 4): every field the ledger or an analysis reads
is checked by the run record, campaign.json included. A number that is a string, a negative duration, NaN or
Infinity (JSON has neither; Python's json reads both), a status no run has, a point folder or a campaign's run
gone: ``pglab analyze`` and ``pglab ledger add`` refuse it in one line naming the file and the key, exit 2, no
traceback, and write nothing. The folders are copies of the shipped campaign of synchronous_commit."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, pulled_runs
from pglab.app.cli import main
from pglab.runs import record

STUDY = "synchronous_commit"
POINT = "write-b01-c020-local"  # a planned point of the shipped run
MEMBER = "20261129T094321Z-78c6fe"  # the shipped campaign's second run (campaign/<id>/), re-collected 2026-11-29
Edit = Callable[[Path], None]


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never the real user's runs index."""
    monkeypatch.setenv("PGLAB_STATE_DIR", str(tmp_path / "state"))


def published(tmp_path: Path) -> Path:
    """A copy of the shipped campaign as ``<tmp>/data/raw/<study>`` (its last run there, the others in campaign/)."""
    pulled_runs(STUDY)
    run = tmp_path / "data" / "raw" / STUDY
    shutil.copytree(REPO / "data" / "raw" / STUDY, run)
    return run


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def edit(rel: str, change: Callable[[Any], Any]) -> Edit:
    """The JSON file ``rel`` (in the run folder) rewritten after ``change`` edited it in place."""
    def make(run: Path) -> None:
        data = load(run / rel)
        change(data)
        (run / rel).write_text(json.dumps(data))
    return make


def text(rel: str, old: str, new: str) -> Edit:
    """``rel`` with ``old`` replaced in its text once (how a NaN, an Infinity or 1e400 gets in by hand)."""
    def make(run: Path) -> None:
        body = (run / rel).read_text()
        assert old in body, old
        (run / rel).write_text(body.replace(old, new, 1))
    return make


def host(m: dict[str, Any]) -> dict[str, Any]:
    return next(iter(m["hosts"].values()))


MANIFEST, META, CAMPAIGN = "manifest.json", f"{POINT}/meta.json", "campaign.json"
MEMBER_MANIFEST = f"campaign/{MEMBER}/manifest.json"

# name -> (the edit, the file the message names, what it says): the manifest, read by both commands
MANIFEST_CASES: dict[str, tuple[Edit, str, str]] = {
    "mem_total_kb Infinity": (lambda r: (r / MANIFEST).write_text(
        json.dumps(load(r / MANIFEST)).replace(f'"mem_total_kb": {host(load(r / MANIFEST))["mem_total_kb"]}',
                                               '"mem_total_kb": Infinity')),
        MANIFEST, "hosts.local.mem_total_kb: input should be a valid integer, not Infinity"),
    "cores a string": (edit(MANIFEST, lambda m: host(m).update(cores="2")), MANIFEST,
                       'hosts.local.cores: input should be a valid integer, not "2"'),
    "cores beyond 64 bits": (edit(MANIFEST, lambda m: host(m).update(cores=10**30)), MANIFEST,
                             "hosts.local.cores: 1000000000000000000000000000000 is too large a number"),
    "hostname a number with a fraction": (edit(MANIFEST, lambda m: host(m).update(hostname=1.5)), MANIFEST,
                                          "hosts.local.hostname: input should be a valid string, not 1.5"),
    "measurement_share 1e400": (text(MANIFEST, '"measurement_share": ', '"measurement_share": 1e400, "was": '),
                                MANIFEST, "measurement_share: input should be a finite number"),
    "wall_s NaN": (edit(MANIFEST, lambda m: m.update(wall_s=[float("nan")])), MANIFEST,
                   "wall_s.0: input should be a finite number, not NaN"),
    "seed NaN": (edit(MANIFEST, lambda m: m["parameters"].update(seed=float("nan"))), MANIFEST,
                 "parameters.seed: input should be a valid integer, not NaN"),
    "NaN where nothing is typed": (edit(MANIFEST, lambda m: m["packages"].update(x=float("-inf"))), MANIFEST,
                                   "packages.x: -Infinity is not a finite number"),
    "status unknown": (edit(MANIFEST, lambda m: m.update(status="done")), MANIFEST,
                       "status: input should be 'running', 'complete', 'partial', 'failed', 'interrupted', "
                       "'killed' or 'cleanup_failed', not \"done\""),
    "points total a string": (edit(MANIFEST, lambda m: m["points"].update(total="27")), MANIFEST,
                              'points.total: input should be a valid integer, not "27"'),
    "points a list": (edit(MANIFEST, lambda m: m.update(points=[1, 2])), MANIFEST,
                      "points: input should be a valid dictionary, not [1, 2]"),
    "plan points a string": (edit(MANIFEST, lambda m: m["plan"].update(points="all")), MANIFEST,
                             'plan.points: input should be a valid list, not "all"'),
    "plan blocks 2.0": (edit(MANIFEST, lambda m: m["plan"].update(blocks=2.0)), MANIFEST,
                        "plan.blocks: input should be a valid integer, not 2.0"),
    "format_version a string": (edit(MANIFEST, lambda m: m.update(format_version="2")), MANIFEST,
                                'format_version: input should be a valid integer, not "2"'),
    "own CPU negative": (edit(MANIFEST, lambda m: m["pglab_cpu"][0].update(process_cpu_s=-1.0)), MANIFEST,
                         "pglab_cpu.0.process_cpu_s: input should be greater than or equal to 0, not -1.0"),
}

# a point's meta.json, and a point gone: what an analysis reads (the ledger reads no point)
POINT_CASES: dict[str, tuple[Edit, str, str]] = {
    "measured_s a string": (edit(META, lambda m: m.update(measured_s="4.0")), META,
                            'measured_s: input should be a valid number, not "4.0"'),
    "negative duration": (edit(META, lambda m: m["commands"]["main"].update(duration_s=-3.5)), META,
                          "commands.main.duration_s: input should be greater than or equal to 0, not -3.5"),
    "negative warm-up": (edit(META, lambda m: m.update(warmup_s=-1)), META,
                         "warmup_s: input should be greater than or equal to 0, not -1"),
    "steal_flag a string": (edit(META, lambda m: m.update(steal_flag="no")), META,
                            'steal_flag: input should be a valid boolean, not "no"'),
    "block 1.0": (edit(META, lambda m: m.update(block=1.0)), META, "block: input should be a valid integer, not 1.0"),
    "load1 Infinity": (edit(META, lambda m: m["load1"].update(local=float("inf"))), META,
                       "load1.local: input should be a finite number, not Infinity"),
    "NaN in the CPU shares": (edit(META, lambda m: m["cpu"]["local"].update(user=float("nan"))), META,
                              "cpu.local.user: NaN is not a finite number"),
    "meta status unknown": (edit(META, lambda m: m.update(status="fine")), META,
                            "status: input should be 'running', 'ok', 'failed', 'inconsistent', 'interrupted' or "
                            "'beside_a_load'"),
    "meta truncated": (lambda r: (r / META).write_text((r / META).read_text()[:50]), META,
                       "not valid JSON, truncated or hand-edited"),
    "meta a list": (lambda r: (r / META).write_text("[]"), META, "not a point's meta.json: a JSON array"),
    "point folder gone": (lambda r: shutil.rmtree(r / POINT), MANIFEST,
                          f"status complete, but plan.points.5 '{POINT}' has no "),
    "a campaign run's meta": (edit(f"campaign/{MEMBER}/{POINT}/meta.json", lambda m: m.update(copy=0)),
                              f"campaign/{MEMBER}/{POINT}/meta.json",
                              "copy: input should be greater than 0, not 0"),
}

# campaign.json, and its runs: what analyze and the pipeline's `ledger add` read
CAMPAIGN_CASES: dict[str, tuple[Edit, str, str]] = {
    "truncated": (lambda r: (r / CAMPAIGN).write_text((r / CAMPAIGN).read_text()[:100]), CAMPAIGN,
                  "not valid JSON, truncated or hand-edited"),
    "empty": (lambda r: (r / CAMPAIGN).write_text(""), CAMPAIGN, "not valid JSON"),
    "a list": (lambda r: (r / CAMPAIGN).write_text("[]"), CAMPAIGN, "not a campaign record: a JSON array, not an "
                                                                    "object"),
    "runs not objects": (edit(CAMPAIGN, lambda c: c.update(runs=[1, "x"])), CAMPAIGN,
                         "not a campaign record: runs.0: input should be a valid dictionary, not 1 (and 1 more "
                         "problem)"),
    "no runs": (edit(CAMPAIGN, lambda c: c.update(runs=[])), CAMPAIGN, "runs: list should have at least 1 item"),
    "runs missing": (edit(CAMPAIGN, lambda c: c.pop("runs")), CAMPAIGN, "runs: missing"),
    "a run without its id": (edit(CAMPAIGN, lambda c: c["runs"][2].pop("run_id")), CAMPAIGN, "runs.2.run_id: missing"),
    "run id a path": (edit(CAMPAIGN, lambda c: c["runs"][0].update(run_id="../../etc")), CAMPAIGN,
                      "runs.0.run_id: '../../etc' is not a plain id"),
    "seed Infinity": (edit(CAMPAIGN, lambda c: c["runs"][0].update(seed=float("inf"))), CAMPAIGN,
                      "runs.0.seed: input should be a valid integer, not Infinity"),
    "asked a string": (edit(CAMPAIGN, lambda c: c.update(asked="5")), CAMPAIGN,
                       'asked: input should be a valid integer, not "5"'),
    "a run status unknown": (edit(CAMPAIGN, lambda c: c["runs"][1].update(status="great")), CAMPAIGN,
                             "runs.1.status: input should be 'running'"),
    "a newer format": (edit(CAMPAIGN, lambda c: c.update(format_version=9)), CAMPAIGN,
                       "format_version: format 9 is newer than this pglab reads"),
    "a run listed twice": (edit(CAMPAIGN, lambda c: c["runs"].insert(1, c["runs"][0])), CAMPAIGN,
                           "runs.1.run_id: '20261129T094026Z-f18495' is listed twice"),
    "a listed run missing": (lambda r: shutil.rmtree(r / "campaign" / MEMBER), CAMPAIGN,
                             f"lists runs that are not there: runs.1.run_id '{MEMBER}' has no run folder"),
    "the last run not the folder's": (edit(CAMPAIGN, lambda c: c["runs"].pop()), CAMPAIGN,
                                      "runs.8.run_id: '20261129T111214Z-eebef4' is not the run in"),
    "a campaign run's manifest": (edit(MEMBER_MANIFEST, lambda m: m.update(measured_s="lots")), MEMBER_MANIFEST,
                                  'measured_s: input should be a valid number, not "lots"'),
}


def files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if "state" not in p.relative_to(root).parts[:1]}


def analyze(tmp_path: Path) -> list[str]:
    root = tmp_path / "data"
    return ["analyze", STUDY, "--data-root", str(root), "--figures", str(tmp_path / "figures"),
            "--reference", str(REPO / "data" / "reference")]


def ledger_add(tmp_path: Path, run: Path | None) -> list[str]:
    """``pglab ledger add RUN`` (with ``run``), else the pipeline's runs (each campaign's) and the archived ones."""
    return ["ledger", "add", *([str(run)] if run else []), "--ledger", str(tmp_path / "ledger.sqlite"),
            "--data-root", str(tmp_path / "data")]


def refused(tmp_path: Path, argv: list[str], path: Path, says: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``pglab <argv>``: exit 2, one line naming ``path`` and saying ``says``, no traceback, nothing written."""
    before = files(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pglab: "), captured.err
    assert f"{record.shown(path, 400)}: " in lines[0] and says in lines[0], lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert files(tmp_path) == before  # no analysis, figure, ledger or metric: not a byte
    return lines[0]


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
@pytest.mark.parametrize("command", ["analyze", "ledger add RUN"])
def test_a_hand_edited_manifest_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       case: str, command: str) -> None:
    run = published(tmp_path)
    make, rel, says = MANIFEST_CASES[case]
    make(run)
    argv = analyze(tmp_path) if command == "analyze" else ledger_add(tmp_path, run)
    line = refused(tmp_path, argv, run / rel, says, capsys)
    assert "more problem" not in line  # a union's members: one key, one problem


@pytest.mark.parametrize("case", sorted(POINT_CASES))
def test_a_hand_edited_point_is_one_line_and_exit_2_for_the_analysis(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    run = published(tmp_path)
    make, rel, says = POINT_CASES[case]
    make(run)
    refused(tmp_path, analyze(tmp_path), run / rel, says, capsys)


@pytest.mark.parametrize("case", sorted(CAMPAIGN_CASES))
@pytest.mark.parametrize("command", ["analyze", "ledger add"])
def test_a_hand_edited_campaign_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       case: str, command: str) -> None:
    run = published(tmp_path)
    make, rel, says = CAMPAIGN_CASES[case]
    make(run)
    argv = analyze(tmp_path) if command == "analyze" else ledger_add(tmp_path, None)
    refused(tmp_path, argv, run / rel, says, capsys)


def test_the_ledger_reads_no_point_so_a_bad_meta_does_not_keep_a_run_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ledger add RUN`` reads the manifest only (a row of the run and its machine): a point's meta is the
    analysis's to refuse, and the run folder named is added as ever."""
    run = published(tmp_path)
    POINT_CASES["measured_s a string"][0](run)
    assert main(ledger_add(tmp_path, run)) == 0
    captured = capsys.readouterr()
    assert "1 run seen: 1 new" in captured.out and "Traceback" not in captured.err


def test_the_shipped_campaigns_pass_whole() -> None:
    """Every published folder shipped (a campaign's record, each run's manifest and metas) passes the checks the
    analysis makes first: none of the refusals above is a shipped run's."""
    from pglab.runs.reading import checked_published
    from pglab.studies import STUDIES

    pulled_runs(*STUDIES)
    for study in STUDIES:
        runs = checked_published(REPO / "data" / "raw" / study, study)
        assert runs[-1] == REPO / "data" / "raw" / study and len(runs) in (1, 5, 10), study


def test_not_finite_names_the_key_and_never_recurses() -> None:
    assert record.not_finite({"a": [1, {"b": 2.5}], "c": True}) is None
    assert record.not_finite({"a": [1, {"b": float("nan")}]}) == "a.1.b: NaN is not a finite number (JSON has no " \
                                                                  "NaN or Infinity)"
    assert record.not_finite({"n": -(2**64)}).startswith("n: -18446744073709551616 is too large")
    deep: Any = 1.0
    for _ in range(100_000):  # deeper than any recursion would go
        deep = [deep]
    assert record.not_finite(deep) is None


def test_a_manifest_nested_too_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = published(tmp_path)
    (run / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    refused(tmp_path, analyze(tmp_path), run / MANIFEST, "nested too deep", capsys)
