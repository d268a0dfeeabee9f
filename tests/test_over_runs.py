"""Verdicts over runs (pglab.analysis.over_runs) and the campaign's layout (pglab.runs.campaign): the rules, on
frames built here and on archived runs of the DVC remote."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, pulled_analyses
from pglab.analysis import over_runs
from pglab.analysis.claims import about, comparison_frame, comparison_row, direction
from pglab.errors import UserError
from pglab.ledger import shipped
from pglab.runs import campaign

CLAIM = direction("a is faster than b", 1.2)


def run_frame(values: list[float], verdict: str | None = None, claim=CLAIM, aa: float = 1.0) -> pd.DataFrame:
    """One run's comparison.csv for ``claim`` from its per-block values (as the studies write it)."""
    row = comparison_row(claim, values, aa=[aa] * len(values))
    if verdict:
        row["verdict"] = verdict
    return comparison_frame([row])


def frames(*runs: list[float], **kw: object) -> dict[str, pd.DataFrame]:
    return {f"20261201T00000{i}Z-r{i}": run_frame(v, **kw) for i, v in enumerate(runs)}  # type: ignore[arg-type]


def test_the_interval_is_students_t_on_the_logs_of_the_runs_medians() -> None:
    c = over_runs.comparison(frames([1.10, 1.12], [1.20, 1.22], [1.15, 1.13], [1.18, 1.16], [1.11, 1.13]))
    medians = np.log([1.11, 1.21, 1.14, 1.17, 1.12])
    half = 2.7764451 * medians.std(ddof=1) / math.sqrt(5)  # t(0.975, 4)
    row = c.iloc[0]
    assert row["reproduced"] == pytest.approx(math.exp(medians.mean()), abs=1e-4)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((math.exp(medians.mean() - half),
                                                             math.exp(medians.mean() + half)), abs=1e-4)
    assert row["verdict"] == "held" and row["loo"] == "unchanged" and row["ci_method"] == over_runs.METHOD
    assert row["runs"] == 5 and row["blocks"] == 10 and row["run_values"] == "1.11 1.21 1.14 1.17 1.12"
    assert row["run_verdicts"].count("not resolvable here") == 5  # 2 blocks each: no run decides alone


def test_two_runs_never_decide_and_say_how_many_would() -> None:
    row = over_runs.comparison(frames([1.30, 1.31], [1.32, 1.33])).iloc[0]
    assert row["ci_low"] > 1 and row["verdict"] == "not resolvable here"  # the interval alone would hold
    assert "a verdict needs 3" in row["note"] and row["settle"].startswith("about 3 runs")


def test_a_verdict_one_run_carries_is_not_published() -> None:
    """Held on three close runs, but not with any one of them left out (two runs give t(1) = 12.7): open."""
    row = over_runs.comparison(frames([1.07, 1.09], [1.09, 1.11], [1.11, 1.13])).iloc[0]
    verdict, (_, lo, _), changed = over_runs.decide([1.08, 1.10, 1.12], 1.0, math.nan)
    assert lo > 1 and verdict == "not resolvable here" and changed == [0, 1, 2]
    assert row["verdict"] == "not resolvable here" and row["loo"] == "changes without r0, r1, r2"
    assert "leave-one-out" in row["note"] and row["settle"].startswith("about")


def test_a_claim_any_run_could_not_measure_is_not_measurable_over_the_runs() -> None:
    fs = frames([1.5, 1.6], [1.5, 1.55], [1.45, 1.5])
    last = list(fs)[-1]
    fs[last] = run_frame([1.5, 1.52], verdict="not measurable here")
    fs[last].loc[0, "note"] = "not judged: this machine differs"
    row = over_runs.comparison(fs).iloc[0]
    assert row["verdict"] == "not measurable here" and "machine differs" in row["note"]
    assert row["here_verdict"] == "held" and row["ci_low"] > 1  # the value over the runs is still given


def test_a_claim_not_judged_says_why_first_with_the_verdict_over_the_runs_not_a_runs_own() -> None:
    """The note over the runs names what this machine lacks and what the interval over the runs gives here, not what
    one run's own interval gave (open, with its 2 blocks), and drops a run's own too-few-blocks words."""
    from pglab.analysis.claims import Machine

    disk = Machine("disk flush rate", "9,000 fdatasync/s", "about 120 flushes/s", "a hard disk", differs=True)
    fs = {f"r{i}": comparison_frame([comparison_row(CLAIM, [v, v * 1.02], machine=disk)])
          for i, v in enumerate([1.3, 1.32, 1.31, 1.29, 1.33])}
    assert all(f.loc[0, "here_verdict"] == "not resolvable here" for f in fs.values())  # 2 blocks each
    row = over_runs.comparison(fs).iloc[0]
    assert row["verdict"] == "not measurable here" and row["here_verdict"] == "held"
    assert row["note"].startswith("not judged: this machine differs from the article's in disk flush rate")
    assert 'the interval over the 5 runs gives "held"' in row["note"] and '"not resolvable here"' not in row["note"]
    assert "a verdict needs 6" not in row["note"]


def test_an_aa_that_excludes_one_over_the_runs_decides_nothing() -> None:
    fs = {f"r{i}": run_frame([1.3, 1.31], aa=a) for i, a in enumerate([1.05, 1.06, 1.055, 1.05, 1.06])}
    row = over_runs.comparison(fs).iloc[0]
    assert row["aa_low"] > 1 and row["verdict"] == "not resolvable here" and "design is biased" in row["note"]


def test_one_run_keeps_its_own_row_and_says_its_interval_is_within_run_only() -> None:
    fs = frames([1.2, 1.25, 1.22, 1.24, 1.21, 1.23])
    row = over_runs.comparison(fs).iloc[0]
    own = next(iter(fs.values())).iloc[0]
    assert row["verdict"] == own["verdict"] == "held" and row["ci_method"] == own["ci_method"]
    assert row["note"].startswith("one run: its interval is over the blocks of that run only")


def test_spread_splits_within_and_between_runs() -> None:
    rng = np.random.default_rng(7)
    groups = [np.exp(rng.normal(m, 0.05, 40)) for m in rng.normal(0, 0.1, 60)]
    within, between, icc = over_runs.spread(groups)
    assert within == pytest.approx(0.05, rel=0.1) and between == pytest.approx(0.1, rel=0.3)
    assert icc == pytest.approx(0.8, abs=0.1)
    assert math.isnan(over_runs.spread([[1.1], [1.2], [1.0]])[0])  # one block a run: nothing within to go by


def test_settle_estimates_more_runs_or_says_more_will_not_help() -> None:
    n = over_runs.runs_to_settle([1.05, 1.10, 1.00], 1.0, math.nan)
    assert n is not None and n > 3
    assert over_runs.runs_to_settle([1.0, 1.001, 0.999], 1.0, math.nan) is None  # on the bound itself
    row = over_runs.comparison({f"r{i}": run_frame([v, v]) for i, v in enumerate([0.99, 1.01, 1.0])}).iloc[0]
    assert row["settle"].startswith("more runs will hardly settle it")


def test_a_size_claim_outside_its_band_on_every_run_did_not_hold() -> None:
    claim = about("x is about 1.5x y", 1.5, 1.5)
    fs = {f"r{i}": run_frame([v, v * 1.01], claim=claim) for i, v in enumerate([1.02, 1.04, 1.03, 1.05, 1.01])}
    assert over_runs.comparison(fs).iloc[0]["verdict"] == "did not hold"


def test_verdicts_over_three_archived_runs_recompute_from_their_own_rows() -> None:
    """The archived fdw_overhead runs of the DVC remote analysed on their own: the verdicts over them are the
    t interval recomputed here from each run's reproduced value (over the sittings' geometric means, the shipped
    campaign being of two sittings), and each run's per-block values give its median."""
    found = [(h, m) for h, m in shipped.remote_runs(REPO / "data" / "dvc-remote") if m["study"] == "fdw_overhead"]
    assert len(found) >= 3
    pulled_analyses("fdw_overhead")
    derived = sorted((REPO / "data" / "derived" / "fdw_overhead" / campaign.OWN).glob("*/comparison.csv"))
    assert len(derived) == 10  # the shipped quick profile's campaign of 5 runs, and a second sitting of 5
    fs = {p.parent.name: pd.read_csv(p) for p in derived}
    runs = pd.read_csv(REPO / "data" / "derived" / "fdw_overhead" / over_runs.RUNS_CSV)
    sittings = dict(zip(runs.run_id, runs.sitting, strict=True))
    assert len(set(sittings.values())) == 2
    c = over_runs.comparison(fs, sittings=sittings)
    shipped_c = pd.read_csv(REPO / "data" / "derived" / "fdw_overhead" / "comparison.csv")
    assert list(c["verdict"]) == list(shipped_c["verdict"])
    assert list(c["here_verdict"]) == list(shipped_c["here_verdict"])
    for claim, row in c.set_index("claim").iterrows():
        values = [float(f.set_index("claim").loc[claim, "reproduced"]) for f in fs.values()]
        per = over_runs.sitting_means(values, [sittings[i] for i in fs])
        centre, lo, hi = over_runs.log_t_interval([math.exp(float(np.mean(np.log(v)))) for v in per.values()])
        assert (row["reproduced"], row["ci_low"], row["ci_high"]) == pytest.approx((centre, lo, hi), abs=2e-4)
        for f in fs.values():
            r = f.set_index("claim").loc[claim]
            if isinstance(r["block_values"], str):
                assert float(np.median([float(v) for v in r["block_values"].split()])) == pytest.approx(
                    r["reproduced"], abs=2e-4)


def test_members_refuse_a_campaign_read_in_part(tmp_path: Path) -> None:
    top = tmp_path / "raw"
    (top / campaign.MEMBERS / "20261201T000001Z-aaaaaa").mkdir(parents=True)
    (top / "manifest.json").write_text(json.dumps({"status": "complete", "study": "fdw_overhead",
                                                   "run_id": "20261201T000002Z-bbbbbb"}))
    record = campaign.record_of([{"run_id": "20261201T000001Z-aaaaaa"}, {"run_id": "20261201T000002Z-bbbbbb"}],
                                "fdw_overhead", "quick", 2)
    campaign.write(top, record)
    with pytest.raises(UserError, match="lists runs that are not there: runs.0.run_id '20261201T000001Z-aaaaaa'"):
        campaign.members(top)
    (top / campaign.MEMBERS / "20261201T000001Z-aaaaaa" / "manifest.json").write_text("{}")
    assert campaign.members(top) == [top / campaign.MEMBERS / "20261201T000001Z-aaaaaa", top]
    assert campaign.members(tmp_path) == [tmp_path]  # no record: a single run
    bad = dict(record, runs=[{"run_id": "../../etc"}, {"run_id": "x"}])
    (top / campaign.CAMPAIGN).write_text(json.dumps(bad))
    with pytest.raises(UserError, match="runs.0.run_id: '../../etc' is not a plain id"):
        campaign.members(top)


def test_a_campaign_member_in_the_remote_is_materialised_alone(tmp_path: Path) -> None:
    """A campaign's earlier run is named by its folder's .dir hash and its path: materialised, it is that run only."""
    remote = tmp_path / "remote"
    files = {"manifest.json": b'{"run_id": "b"}', "campaign/a/manifest.json": b'{"run_id": "a"}',
             "campaign/a/p1/meta.json": b"{}", "p2/meta.json": b"{}"}
    entries = []
    for rel, data in files.items():
        md5 = __import__("hashlib").md5(data).hexdigest()
        (remote / "files" / "md5" / md5[:2]).mkdir(parents=True, exist_ok=True)
        (remote / "files" / "md5" / md5[:2] / md5[2:]).write_bytes(data)
        entries.append({"relpath": rel, "md5": md5})
    listing = json.dumps(entries).encode()
    dir_md5 = __import__("hashlib").md5(listing).hexdigest() + ".dir"
    (remote / "files" / "md5" / dir_md5[:2]).mkdir(parents=True, exist_ok=True)
    (remote / "files" / "md5" / dir_md5[:2] / dir_md5[2:]).write_bytes(listing)
    member = shipped.materialize(remote, shipped.member_hash(dir_md5, "campaign/a"), tmp_path / "a")
    assert sorted(p.relative_to(member).as_posix() for p in member.rglob("*") if p.is_file()) == \
        ["manifest.json", "p1/meta.json"]
    top = shipped.materialize(remote, dir_md5, tmp_path / "b")
    assert (top / "p2" / "meta.json").exists()
    shutil.rmtree(tmp_path / "a")


def test_an_ordering_over_runs_decides_each_step_not_the_weaker_one_each_run_showed() -> None:
    """Each run shows its weaker step (the smaller of two): pooling those is biased low. Over the runs each step is
    decided on its own values from every run's note, then combined as within a run."""
    from pglab.analysis.over_runs import claim_row

    rule = ("held if every step holds (each: held if the interval lies above 1 (direction)); did not hold if one "
            "step does not")

    def rows(a: list[float], b: list[float], lack: bool = False) -> dict:
        return {f"r{i}": {"claim": "x < y < z", "reproduced": min(a[i], b[i]), "ci_low": 0.9, "ci_high": 1.1,
                          "blocks": 2, "verdict": "not resolvable here", "rule": rule, "bound_low": 1.0,
                          "bound_high": float("nan"), "block_values": "",
                          "note": f"the weaker step is shown; y/x: {a[i]} [0.9, 1.1] not resolvable here"
                                  + ("" if lack and i == 4 else f", z/y: {b[i]} [0.9, 1.1] not resolvable here")}
                for i in range(5)}

    a, b = [0.99, 1.01, 0.98, 1.02, 1.00], [1.01, 0.99, 1.02, 0.98, 1.00]  # each about 1: open
    row = claim_row("x < y < z", rows(a, b))
    assert row["verdict"] == "not resolvable here"  # the pooled minimum (0.98-0.99 each run) would say did not hold
    assert "each step over the 5 runs: y/x: 1 [" in row["note"] and "z/y in the last run: 1.0" in row["note"]
    assert claim_row("x < y < z", rows(a, b, lack=True))["verdict"] == "not resolvable here"
    assert claim_row("x < y < z", rows([x + 0.5 for x in a], [x + 0.4 for x in b]))["verdict"] == "held"
    assert claim_row("x < y < z", rows([x + 0.5 for x in a], [x - 0.2 for x in b]))["verdict"] == "did not hold"


def test_marked_runs_are_left_out_of_the_verdict_and_said() -> None:
    """A run whose machine was busy or moved decides nothing; with every run marked there is no verdict."""
    f = frames([1.10, 1.12], [1.20, 1.22], [1.15, 1.13], [1.18, 1.16], [1.11, 1.13], [0.60, 0.62])
    ids = list(f)
    alone = over_runs.comparison({i: f[i] for i in ids[:5]}).iloc[0]
    row = over_runs.comparison(f, marked={ids[5]: "host local: other processes took 40% of the CPU"}).iloc[0]
    assert row["runs"] == 5 and row["reproduced"] == alone["reproduced"] and row["verdict"] == "held"
    assert row["left_out"] == ids[5] and "1 of 6 runs left out" in row["note"] and "40% of the CPU" in row["note"]
    assert over_runs.comparison(f).iloc[0]["runs"] == 6  # unmarked: all six count
    every = over_runs.comparison(f, marked={i: "moved" for i in ids}).iloc[0]
    assert every["verdict"] == "not resolvable here" and every["here_verdict"] in ("held", "did not hold",
                                                                                   "not resolvable here")
    assert every["note"].startswith("every run is marked")
    table = over_runs.runs_table(f, {ids[5]: "busy"})
    assert list(table[table.run_id == ids[5]].marked) == ["busy"] and set(table[table.run_id != ids[5]].marked) == {""}
