"""``pglab slo``: a campaign of rate-at-a-latency-target searches on real servers (a primary and its synchronous
standby), read back into tables, intervals over runs, figures and a page; refusals before anything starts.

The search itself is tested on a simulated queue in tests/test_slo_search.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from pglab.analysis.slo_runs import RUN_COLUMNS, sentences, summary
from pglab.app.cli import main
from pglab.app.slo_campaign import new_campaign

REPO = Path(__file__).resolve().parents[1]


def _runs(rows: list[tuple[str, str, float, str]]) -> pd.DataFrame:
    out = [{c: None for c in RUN_COLUMNS} | {"run_id": r, "config": c, "slo_rate": v, "peak_tps": 1000.0,
                                             "marked": m} for r, c, v, m in rows]
    return pd.DataFrame(out, columns=RUN_COLUMNS)


def test_the_rate_over_runs_is_a_geometric_mean_with_a_t_interval_and_the_ratio_is_paired_within_runs() -> None:
    runs = _runs([("a", "on", 100, ""), ("a", "off", 300, ""), ("b", "on", 200, ""), ("b", "off", 600, ""),
                  ("c", "on", 150, ""), ("c", "off", 450, ""), ("d", "on", 10, "host local: busy"),
                  ("d", "off", 5000, "host local: busy")])
    s = summary(runs, "on", ["on", "off"]).set_index("config")
    assert s.loc["on", "runs"] == 3 and s.loc["on", "left_out"] == 1  # the marked run is out of the interval
    assert s.loc["on", "slo_rate"] == pytest.approx((100 * 200 * 150) ** (1 / 3), abs=0.1)
    assert s.loc["on", "ci_low"] < s.loc["on", "slo_rate"] < s.loc["on", "ci_high"]
    # off is exactly 3x on in every kept run: the paired ratio has no spread at all, the rates have plenty
    assert s.loc["off", "ratio_to_baseline"] == pytest.approx(3.0)
    assert s.loc["off", "ratio_low"] == pytest.approx(3.0) and s.loc["off", "ratio_high"] == pytest.approx(3.0)
    words = sentences(s.reset_index(), "on", 20)
    assert words[1].startswith("at p99 <= 20 ms, off sustains") and "3.00x [3.00, 3.00] the rate of on" in words[1]


def test_every_run_marked_gives_values_flagged_as_no_finding_and_a_failed_search_is_said() -> None:
    runs = _runs([("a", "on", 100, "busy"), ("a", "off", math.nan, "busy")])
    s = summary(runs, "on")
    assert bool(s.all_marked.all()) and s.set_index("config").loc["on", "slo_rate"] == 100
    words = sentences(s, "on", 5)
    assert words[0].startswith("every run is marked") and "(one run: no interval)" in words[0]
    assert "no search found a sustained rate" in words[1]


def test_a_new_campaign_never_reuses_a_folder(tmp_path: Path) -> None:
    a = new_campaign(tmp_path, "synchronous_commit", {"x": 1})
    b = new_campaign(tmp_path, "synchronous_commit", {"x": 2})
    assert a != b and json.loads((a / "campaign.json").read_text()) == {"x": 1}


@pytest.mark.parametrize("section, cli, says", [
    ("slo: 5", [], "slo: a YAML number where a mapping"),
    ("slo: {p99_ms: '20'}", [], "p99_ms"),
    ("slo: {p99_ms: 20, p95_ms: 5}", [], "p95_ms"),
    ("slo: {p99_ms: -1}", [], "p99_ms"),
    ("slo: {profile: smoke}", [], "name a study and a target"),
    ("slo: {p99_ms: 20, profile: smoke, configs: ['on', bogus]}", [], "'bogus' is not a configuration"),
    ("slo: {p99_ms: 20, profile: quick, runs: 0}", [], "runs"),
    ("slo: {p99_ms: 20, profile: slow}", [], "--profile slow"),
    ("slo: {p99_ms: 20}", ["--p99", "0"], "--p99 0"),  # the command line wins
    ("slo: {p99_ms: 20, configs: [bogus]}", ["--configs", "on,on"], "named twice"),
])
def test_the_params_files_slo_section_gives_the_defaults_checked_before_anything_starts(
        section: str, cli: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "sc.yaml"
    params.write_text(f"profile: smoke\nprofiles:\n  smoke: {{}}\n{section}\n")
    out = tmp_path / "slo"
    assert main(["slo", "synchronous_commit", "--params", str(params), *cli, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and not out.exists(), err


@pytest.mark.parametrize("study", ["synchronous_commit", "fdw_overhead"])
def test_the_shipped_slo_sections_pass_the_campaigns_own_check(study: str) -> None:
    from pglab.app.slo_campaign import check
    from pglab.app.slo_cli import defaults

    given = defaults(study, str(REPO / "params" / f"{study}.yaml"))
    assert given is not None and given.p99_ms == 20 and given.configs
    assert check(study, given.p99_ms, given.configs, given.profile, given.runs).study == study


@pytest.mark.parametrize("argv, says", [
    (["slo", "synchronous_commit", "--p99", "0"], "--p99 0"),
    (["slo", "synchronous_commit", "--p99", "nan"], "--p99 nan"),
    (["slo", "synchronous_commit", "--p99", "20", "--configs", "on,bogus"], "'bogus' is not a configuration"),
    (["slo", "synchronous_commit", "--p99", "20", "--configs", "on,on"], "named twice"),
    (["slo", "synchronous_commit", "--p99", "20", "--runs", "0"], "--runs 0"),
    (["slo", "synchronous_commit", "--p99", "20", "--max-trials", "1"], "--max-trials 1"),
    (["slo", "synchronous_commit", "--params", "params/streaming_scale_out.yaml"], "name a study and a target"),
    (["slo", "--analyse", "nowhere"], "not a pglab slo campaign"),
])
def test_bad_input_is_refused_in_one_line_before_anything_starts(argv: list[str], says: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "slo"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_a_smoke_campaign_searches_each_level_on_a_synchronous_pair_and_reports_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One run, two levels, generous target (the suite's machine is busy): what is checked is the whole path,
    raw first, not the rate this machine sustains."""
    out = tmp_path / "slo"
    ledger = tmp_path / "ledger.sqlite"
    assert main(["slo", "synchronous_commit", "--p99", "200", "--configs", "on,off", "--profile", "smoke",
                 "--max-trials", "4", "--seed", "3", "--out", str(out), "--no-progress", "--ledger", str(ledger)]) == 0
    printed = capsys.readouterr().out
    (campaign,) = (out / "synchronous_commit").iterdir()
    (run,) = (campaign / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["machine"]["before"] and manifest["machine"]["after"]
    assert manifest["topology"]["standbys"], "a primary with its synchronous standby"
    searched = {json.loads(p.read_text())["config"]: json.loads(p.read_text()) for p in run.glob("search-*.json")}
    assert set(searched) == {"on", "off"}
    for config, s in searched.items():
        assert s["trials"] and s["peak_tps"] > 0 and (run / f"peak-{config}" / "stdout.txt").exists()
        for t in s["trials"]:  # raw first: every trial's command, output, log and verdict kept
            d = run / t["point"]
            command = (d / "command.txt").read_text()
            assert f"-R {t['rate']:g}" in command and "--latency-limit 400" in command and " -S" not in command
            assert list((d / "txlog").glob("pgbench_log*")) and (d / "verdict.json").exists()
    runs = pd.read_csv(campaign / "slo_runs.csv")
    assert sorted(runs.config) == ["off", "on"] and len(pd.read_csv(campaign / "slo_trials.csv")) == \
        sum(len(s["trials"]) for s in searched.values())
    page = (campaign / "report.html").read_text()
    assert "p99 &le; 200 ms" in page and "slo_rates.png" in page and (campaign / "latency_curve.png").exists()
    assert "Every run is of one sitting (sitting of " in page  # the scope, as every verdict names it
    assert "off" in printed and str(campaign) in printed
    # in the ledger: the run, each level's rate as one of its rows, each trial as a point
    from pglab.ledger import book
    from pglab.ledger.backend import Ledger

    with Ledger(str(ledger)) as led:
        rows = book.claims(led)
        assert set(book.runs(led).study) == {"slo-synchronous_commit"} and len(book.points(led, run.name)) == \
            sum(len(s["trials"]) for s in searched.values())
    assert sorted(rows.claim) == ["off: the highest rate at p99 <= 200 ms (transactions/s)",
                                  "on: the highest rate at p99 <= 200 ms (transactions/s)"]
    for _, r in rows.iterrows():
        s = searched[r.claim.split(":")[0]]
        assert (r.reproduced == s["rate"] or (s["rate"] is None and math.isnan(r.reproduced)))
        assert "closed-loop peak" in r.note and (r.published is None or math.isnan(r.published))
    assert f"ledger: 1 run(s) in {ledger}" in printed
    assert main(["ledger", "list", "--study", "slo-synchronous_commit", "--ledger", str(ledger), "--with-marked"]) == 0
    listed = capsys.readouterr().out
    assert run.name in listed and "2 measured" in listed
    # analysed again from the raw folders: the same tables, and the ledger unchanged (the same analysis)
    before = (campaign / "slo_summary.csv").read_text()
    assert main(["slo", "--analyse", str(campaign), "--ledger", str(ledger)]) == 0
    assert (campaign / "slo_summary.csv").read_text() == before
    with Ledger(str(ledger)) as led:
        assert len(book.runs(led)) == 1 and len(book.claims(led)) == 2


@pytest.mark.slow
def test_fdw_overhead_searches_through_its_foreign_targets(tmp_path: Path) -> None:
    """The study's own set-up (two instances, postgres_fdw servers, REPEATABLE READ): each target's trials run
    against its own database, serialization failures retried as the study retries them."""
    out = tmp_path / "slo"
    assert main(["slo", "fdw_overhead", "--p99", "500", "--configs", "local,FDW_external", "--profile", "smoke",
                 "--max-trials", "3", "--out", str(out), "--no-progress", "--ledger", str(tmp_path / "l.sqlite")]) == 0
    (campaign,) = (out / "fdw_overhead").iterdir()
    (run,) = (campaign / "runs").iterdir()
    for config, db in (("local", "source"), ("FDW_external", "fdw_external")):
        s = json.loads((run / f"search-{config}.json").read_text())
        command = (run / s["trials"][0]["point"] / "command.txt").read_text()
        assert command.rstrip().endswith(f" {db}") and "--max-tries=10" in command
    assert json.loads((run / "init" / "fdw_setup.json").read_text())["FDW_external"]
    assert set(pd.read_csv(campaign / "slo_summary.csv").config) == {"local", "FDW_external"}


@pytest.mark.slow
def test_a_failed_run_is_one_line_and_the_campaign_goes_on_to_its_next(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A pgbench that refuses its options (a real failure of every run): each run says so in one line and is kept
    as failed, the next run still starts, and a campaign none of whose runs finished ends in pglab's one line."""
    from dataclasses import replace

    from pglab.app import slo_targets

    broken = replace(slo_targets.TARGETS["synchronous_commit"], extra=("--no-such-option",))
    monkeypatch.setitem(slo_targets.TARGETS, "synchronous_commit", broken)
    out = tmp_path / "slo"
    assert main(["slo", "synchronous_commit", "--p99", "200", "--configs", "on", "--profile", "smoke", "--runs", "2",
                 "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "slo run 1/2 failed: [local] closed-loop pgbench exited with 1" in err, err
    assert "slo run 2/2 failed" in err and "every run of the campaign failed" in err
    (campaign,) = (out / "synchronous_commit").iterdir()
    runs = sorted((campaign / "runs").iterdir())
    assert len(runs) == 2 and all(json.loads((r / "manifest.json").read_text())["status"] == "failed" for r in runs)
