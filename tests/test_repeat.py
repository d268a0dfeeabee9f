"""Whole runs repeated (`pglab collect --repeat N`) and their run-to-run spread (`pglab spread`)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import REPO, pulled_runs, workspaces
from pglab.app import collect, spread
from pglab.app.cli import main
from pglab.ledger import book
from pglab.runs.campaign import CAMPAIGN, MEMBERS

STUDY = "synchronous_commit"
HELD, NOT, UNRES = "held", "did not hold", "not resolvable here"


def frame(*rows: tuple[str, float, str]) -> pd.DataFrame:
    """A comparison.csv as the analyses write it (the columns the spread reads, and one it must ignore)."""
    return pd.DataFrame([{"claim": c, "published": 1.5, "reproduced": r, "ci_low": r - 0.1, "verdict": v,
                          "note": "n"} for c, r, v in rows])


def run_copy(where: Path, run_id: str, **changes: object) -> Path:
    """A copy of the shipped synchronous_commit run under another run id (a second run of the same setup)."""
    pulled_runs(STUDY)  # the campaign's last run alone: not its record, not its earlier runs
    shutil.copytree(REPO / "data" / "raw" / STUDY, where, ignore=shutil.ignore_patterns(CAMPAIGN, MEMBERS))
    m = json.loads((where / "manifest.json").read_text())
    m.update(run_id=run_id, **changes)
    (where / "manifest.json").write_text(json.dumps(m))
    return where


def manifest_only(where: Path, **fields: object) -> Path:
    """A run folder with only a manifest: enough for the checks made before any analysis."""
    where.mkdir(parents=True)
    m = {"study": STUDY, "profile": "quick", "status": "complete", "run_id": where.name, **fields}
    (where / "manifest.json").write_text(json.dumps(m))
    return where


# -- the pure table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("verdicts, expected", [
    ([HELD, HELD, HELD], "stable"),
    ([UNRES, UNRES], "stable"),
    ([HELD], "stable"),
    ([HELD, NOT], "opposite"),
    ([NOT, UNRES, HELD], "opposite"),
    ([HELD, UNRES], "mixed"),
    ([NOT, "not measurable here"], "mixed"),
    ([HELD, math.nan], "mixed"),  # a run without the claim
])
def test_agreement(verdicts: list, expected: str) -> None:
    assert spread.agreement(verdicts) == expected


def test_spread_table_one_row_per_claim_in_the_runs_order() -> None:
    runs = {"r-a": frame(("x", 2.0, HELD), ("y", 1.0, HELD), ("z", 1.1, UNRES)),
            "r-b": frame(("x", 1.0, HELD), ("y", 1.2, NOT), ("w", 0.5, NOT)),
            "r-c": frame(("x", 4.0, HELD), ("y", 1.1, UNRES), ("z", 1.3, UNRES))}
    t = spread.spread_table(runs)
    assert list(t.columns) == ["claim", "published", "reproduced_r-a", "verdict_r-a", "reproduced_r-b",
                               "verdict_r-b", "reproduced_r-c", "verdict_r-c", "runs", "median", "min", "max",
                               "spread", "agreement"]
    assert list(t["claim"]) == ["x", "y", "z", "w"]
    x, y, z, w = (t.iloc[i] for i in range(4))
    assert (x["median"], x["min"], x["max"], x["spread"], x["runs"], x["agreement"]) == (2.0, 1.0, 4.0, 4.0, 3,
                                                                                           "stable")
    assert y["agreement"] == "opposite" and y["spread"] == pytest.approx(1.2)
    assert z["agreement"] == "mixed" and z["runs"] == 2 and math.isnan(z["reproduced_r-b"])  # absent from r-b
    assert z["median"] == pytest.approx(1.2)
    assert w["agreement"] == "mixed" and w["spread"] == 1.0 and w["published"] == 1.5


def test_spread_is_undefined_unless_every_value_is_positive() -> None:
    t = spread.spread_table({"a": frame(("x", 0.0, NOT)), "b": frame(("x", 2.0, HELD))})
    assert math.isnan(t.loc[0, "spread"]) and t.loc[0, "agreement"] == "opposite"


def test_the_printed_table_names_runs_r1_r2_and_cuts_long_claims() -> None:
    claim = "a claim far longer than the printed column is wide, kept whole in the CSV"
    t = spread.spread_table({"id-1": frame((claim, 1.5, HELD)), "id-2": frame((claim, 1.2, UNRES))})
    text = spread.format_table(t, ["id-1", "id-2"])
    head, row = text.splitlines()
    assert head.split() == ["claim", "r1", "r2", "median", "min", "max", "spread", "agreement", "verdicts"]
    assert claim[:spread.CLAIM_WIDTH - 3] + "..." in row and "1.25" in row and "mixed" in row
    assert row.endswith(f"{HELD} / {UNRES}")


# -- real analyses ----------------------------------------------------------------------------------------


def test_spread_of_two_runs_analysed_for_real(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped run and a copy of it under another id: every claim's runs agree exactly."""
    a = run_copy(tmp_path / "a", "20261123T114111Z-aaaaaa")
    b = run_copy(tmp_path / "b", "20261123T114112Z-bbbbbb")
    out = tmp_path / "spread"
    assert main(["spread", STUDY, str(a), str(b), "--out", str(out), "--data-root", str(tmp_path)]) == 0
    t = pd.read_csv(out / "spread.csv")
    for col in ("claim", "published", "reproduced_20261123T114111Z-aaaaaa", "verdict_20261123T114112Z-bbbbbb",
                "runs", "median", "min", "max", "spread", "agreement"):
        assert col in t.columns, col
    assert len(t) >= 4 and (t["agreement"] == "stable").all() and (t["runs"] == 2).all()
    assert (t["spread"] == 1.0).all() and (t["median"] == t["min"]).all()
    for run in ("20261123T114111Z-aaaaaa", "20261123T114112Z-bbbbbb"):  # each run's own analysis
        claims = pd.read_csv(out / run / "derived" / "comparison.csv")["claim"]
        assert list(claims) == list(t["claim"])
        assert any((out / run / "figures").iterdir())
    over = pd.read_csv(out / spread.VERDICTS_CSV)  # the verdicts over the two runs: two never decide
    assert list(over["claim"]) == list(t["claim"]) and (over["runs"] == 2).all()
    assert not set(over["verdict"]) & {"held", "did not hold"}
    printed = capsys.readouterr().out
    assert f"r1 = 20261123T114111Z-aaaaaa ({a})" in printed and "agreement" in printed
    assert "verdicts over the 2 runs" in printed
    assert f"{len(t)} stable, 0 mixed, 0 opposite" in printed


@pytest.mark.parametrize("case, says", [
    ("study", "is a run of fdw_overhead, not synchronous_commit"),
    ("profile", "the runs are of different profiles"),
    ("twice", "given twice"),
    ("failed", "ended failed: not a whole run"),
])
def test_spread_refuses_before_any_analysis(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                                            says: str) -> None:
    a = manifest_only(tmp_path / "runs" / STUDY / "20261101T000000Z-aaaaaa")
    b = manifest_only(tmp_path / "runs" / STUDY / "20261101T000001Z-bbbbbb",
                      **{"study": {"study": "fdw_overhead"}, "profile": {"profile": "smoke"},
                         "failed": {"status": "failed"}, "twice": {}}[case])
    runs = [a.name, a.name] if case == "twice" else [a.name, str(b)]  # ids under data/runs, or folders
    out = tmp_path / "out"
    assert main(["spread", STUDY, *runs, "--data-root", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pglab: no spread: ") and says in err and "Traceback" not in err
    assert not out.exists()


def test_spread_refuses_runs_compare_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run_copy(tmp_path / "a", "20261123T114111Z-aaaaaa")
    m = json.loads((a / "manifest.json").read_text())
    m["tools"]["pgbench"] = "pgbench (PostgreSQL) 9.6.24"
    b = run_copy(tmp_path / "b", "20261123T114112Z-bbbbbb", tools=m["tools"])
    assert main(["spread", STUDY, str(a), str(b), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "not comparable" in err and "tools.pgbench" in err and "--allow-mixed" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, says", [
    (["--repeat", "0"], "--repeat 0: the number of runs must be at least 1"),
    (["--repeat", "-3"], "--repeat -3: the number of runs must be at least 1"),
    (["--repeat", "2", "--resume"], "--resume continues one run; it cannot be combined with --repeat 2"),
])
def test_collect_refuses_a_bad_repeat_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             args: list[str], says: str) -> None:
    before = workspaces()
    assert main(["collect", STUDY, "--profile", "smoke", "--data-root", str(tmp_path / "data"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pglab: {says}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "data").exists() and workspaces() == before


def test_repeat_stops_at_a_partial_run_publishes_nothing_and_spreads_the_runs_that_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs ending complete, partial (the study's collect replaced by copies of the shipped run): a campaign is
    published whole or not at all, so it stops there (exit 3, as for one partial run), the third run never starts,
    data/raw is left as it was, and the spread has the two runs that ended."""
    root = tmp_path / "data"
    statuses = iter(["complete", "partial", "complete"])
    ids = iter(["20261201T000001Z-aaaaaa", "20261201T000002Z-bbbbbb", "20261201T000003Z-cccccc"])
    seeds = []

    def fake(p: object, *, data_root: str, **kw: object) -> Path:
        run_id = next(ids)
        seeds.append(p.seed)  # type: ignore[attr-defined]
        return run_copy(Path(data_root) / "runs" / STUDY / run_id, run_id, status=next(statuses))

    real = collect.module
    monkeypatch.setattr(collect, "module", lambda study, part: SimpleNamespace(collect=fake) if part == "collect"
                        else real(study, part))
    code = main(["collect", STUDY, "--profile", "smoke", "--repeat", "3", "--data-root", str(root), "--quiet"])
    assert code == 3
    out = root / "repeats" / STUDY / "20261201T000001Z-aaaaaa"
    t = pd.read_csv(out / "spread.csv")
    assert {"reproduced_20261201T000001Z-aaaaaa", "reproduced_20261201T000002Z-bbbbbb"} <= set(t.columns)
    assert (t["runs"] == 2).all() and not (root / "runs" / STUDY / "20261201T000003Z-cccccc").exists()
    assert not (root / "raw" / STUDY).exists()
    assert len(seeds) == 2 and seeds[0] != seeds[1]  # a seed drawn for each run
    err = capsys.readouterr().err
    assert "run 2 of 3" in err and "is partial" in err and "none was published" in err


@pytest.mark.servers
@pytest.mark.slow
def test_collect_repeat_two_smoke_runs_is_a_campaign(tmp_path: Path) -> None:
    """Two real runs, smaller than smoke (two levels, one block, about 20 s each): both archived with seeds of their
    own, published together as a campaign, each analysed with the spread written; then `pglab analyze` decides
    over the two runs (and says two runs cannot decide), and the ledger holds each run with its own analysis."""
    root = tmp_path / "data"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "tiny", "inventory": str(REPO / "params" / "hosts.yaml"),
                                      "profiles": {"tiny": {
                                          "levels": ["on", "off"], "clients": [2], "seconds": 2, "warmup_s": 1,
                                          "blocks": 1, "scale": 1, "standby_read_blocks": 0,
                                          "fsync_test_seconds": 0, "transaction_log": False}}}))
    before = workspaces()
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "collect", STUDY, "--params", str(params),
                          "--repeat", "2", "--data-root", str(root), "--quiet"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    runs = sorted(p.name for p in (root / "runs" / STUDY).iterdir())
    assert len(runs) == 2 and runs[0] != runs[1]
    out = root / "repeats" / STUDY / runs[0]
    t = pd.read_csv(out / "spread.csv")
    assert {f"reproduced_{r}" for r in runs} | {f"verdict_{r}" for r in runs} <= set(t.columns)
    assert set(t["agreement"]) <= {"stable", "mixed", "opposite"} and (t["runs"] <= 2).all()
    for r in runs:
        assert (out / r / "derived" / "comparison.csv").exists() and any((out / r / "figures").iterdir())
    manifests = [json.loads((root / "runs" / STUDY / r / "manifest.json").read_text()) for r in runs]
    seeds = [m["parameters"]["seed"] for m in manifests]
    assert all(m["status"] == "complete" for m in manifests) and seeds[0] != seeds[1]
    raw = root / "raw" / STUDY
    record = json.loads((raw / CAMPAIGN).read_text())
    assert [r["run_id"] for r in record["runs"]] == runs and [r["seed"] for r in record["runs"]] == seeds
    assert json.loads((raw / "manifest.json").read_text())["run_id"] == runs[1]
    assert json.loads((raw / MEMBERS / runs[0] / "manifest.json").read_text())["run_id"] == runs[0]
    assert "run 1 of 2" in res.stderr and "run 2 of 2" in res.stderr and "agreement" in res.stdout
    assert workspaces() == before

    assert main(["analyze", STUDY, "--data-root", str(root), "--figures", str(tmp_path / "figures")]) == 0
    derived = root / "derived" / STUDY
    c = pd.read_csv(derived / "comparison.csv")
    assert (c["runs"] == 2).all() and set(c["run_ids"]) == {" ".join(runs)}
    assert not set(c["verdict"]) & {"held", "did not hold"}  # two runs never decide
    off = c[c["claim"].str.startswith("off")].iloc[0]
    assert off["ci_method"] == "t over runs" and off["ci_low"] <= off["reproduced"] <= off["ci_high"]
    per_run = pd.read_csv(derived / "runs.csv")
    assert sorted(set(per_run["run_id"])) == runs and len(per_run) == 2 * len(c)
    for r in runs:
        own = pd.read_csv(derived / "runs" / r / "comparison.csv")
        assert list(own["claim"]) == list(c["claim"])
        assert own.set_index("claim").loc[off["claim"], "reproduced"] == pytest.approx(
            per_run[(per_run.run_id == r) & (per_run.claim == off["claim"])].reproduced.iloc[0])
    _, claims = book.load(data_root=root, study=STUDY)  # each run with its own analysis, never the campaign's
    mine = claims[claims["run_id"].isin(runs)]
    assert set(mine["run_id"]) == set(runs) and len(mine) == 2 * len(c)
