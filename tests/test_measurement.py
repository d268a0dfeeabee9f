"""The measurement layer without servers: the plan, intervals, the noise floor, verdicts, the window."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from pglab.analysis import claims, effects
from pglab.analysis.claims import Claim
from pglab.analysis.effects import AA
from pglab.analysis.window import measured_window
from pglab.runs import sweep
from pglab.runs.sweep import Group

GROUPS = [Group("c001", {"clients": 1}), Group("c004", {"clients": 4}), Group("c016", {"clients": 16})]
LEVELS = ["on", "remote_write", "local", "off"]


def test_same_seed_same_order_other_seed_other_order() -> None:
    a = sweep.plan_blocks(LEVELS, "on", GROUPS, 6, seed=1)
    assert [p.id for p in a] == [p.id for p in sweep.plan_blocks(LEVELS, "on", GROUPS, 6, seed=1)]
    assert [p.id for p in a] != [p.id for p in sweep.plan_blocks(LEVELS, "on", GROUPS, 6, seed=2)]


def test_every_configuration_once_per_block_and_group_plus_the_second_baseline() -> None:
    plan = sweep.plan_blocks(LEVELS, "on", GROUPS, 6, seed=3)
    assert len(plan) == 6 * len(GROUPS) * (len(LEVELS) + 1)
    assert len({p.id for p in plan}) == len(plan)
    for (block, group), pts in pd.DataFrame([(p.block, p.group.name, p) for p in plan]).groupby([0, 1])[2]:
        got = Counter((p.config, p.copy) for p in pts)
        assert got == Counter({**{(c, 1): 1 for c in LEVELS}, ("on", 2): 1}), (block, group)
    # blocks run in turn: block 2 starts only when block 1 is over, so drift spreads over every level
    blocks = [p.block for p in plan]
    assert blocks == sorted(blocks)
    # within a block, the order is not the declared one everywhere
    assert any([p.config for p in plan if p.block == b and p.copy == 1][:4] != LEVELS for b in range(1, 7))


def test_the_baseline_must_be_a_configuration() -> None:
    with pytest.raises(ValueError, match="baseline 'x'"):
        sweep.plan_blocks(LEVELS, "x", GROUPS, 2, seed=1)


def synthetic(effect: float, noise: float, blocks: int = 8, seed: int = 0) -> pd.DataFrame:
    """Points of a baseline (twice per block) and one configuration ``effect`` times faster, with
    multiplicative noise of about ``noise`` and a drift between blocks that the blocks must cancel."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(1, blocks + 1):
        drift = 100 * (1 + 0.5 * rng.random())  # the machine: up to 1.5x between blocks
        for config, copy, factor in (("base", 1, 1.0), ("base", 2, 1.0), ("x", 1, effect)):
            rows.append({"block": b, "group": "g", "config": config, "copy": copy,
                         "value": drift * factor * float(np.exp(rng.normal(0, noise)))})
    return pd.DataFrame(rows)


def claim_verdict(points: pd.DataFrame, claim: Claim, **kw: object) -> dict[str, object]:
    r = effects.block_ratios(points, "base")
    return claims.comparison_row(claim, r[r.config == "x"].ratio, effects.noise_floor(r[r.config == AA].ratio),
                                 aa=r[r.config == AA].ratio, **kw)


def test_a_clear_effect_held_in_spite_of_drift_between_blocks() -> None:
    row = claim_verdict(synthetic(1.5, 0.02), claims.direction("x is faster", 1.5))
    assert row["verdict"] == "held"
    assert row["ci_low"] > 1.4 and row["ci_high"] < 1.6 and row["blocks"] == 8
    assert row["coverage"] > 0.95 and "above 1" in str(row["rule"])


def test_a_small_effect_is_decided_by_blocks_not_gated_by_the_noise_floor() -> None:
    """5% faster under 8% noise: open at 8 blocks, held at 60, although the floor (about 15%) never shrinks."""
    few = claim_verdict(synthetic(1.05, 0.08, blocks=8, seed=4), claims.direction("x is faster", 1.05))
    many = claim_verdict(synthetic(1.05, 0.08, blocks=60, seed=4), claims.direction("x is faster", 1.05))
    assert few["verdict"] == "not resolvable here" and many["verdict"] == "held"
    assert many["noise_floor"] > 2 * (many["reproduced"] - 1) > 0  # the effect is well inside the floor, and held


def test_a_clear_opposite_did_not_hold() -> None:
    assert claim_verdict(synthetic(0.6, 0.02), claims.direction("x is faster", 1.2))["verdict"] == "did not hold"


def test_size_claims_test_the_size_not_the_direction() -> None:
    """"About 1.5x": 1.29x faster is faster, but not about 1.5x (the band is 1.25x..1.8x)."""
    assert claim_verdict(synthetic(1.5, 0.02), claims.about("about 1.5x", 1.5, 1.5))["verdict"] == "held"
    assert claim_verdict(synthetic(1.1, 0.02), claims.about("about 1.5x", 1.5, 1.5))["verdict"] == "did not hold"
    assert claim_verdict(synthetic(1.26, 0.08), claims.about("about 1.5x", 1.5, 1.5))["verdict"] == \
        "not resolvable here"
    c = claims.about("about 1.2x", 1.2, 1.2)  # near 1 the band narrows so that it never holds "no effect"
    assert 1.0 < c.value < 1.1 < 1.3 < c.upper < 1.32


def test_equivalence_margins_are_fixed_whatever_the_noise() -> None:
    same = claims.equivalent("same", 1.0)
    assert (same.value, same.upper) == (pytest.approx(1 / 1.1), pytest.approx(1.1))
    assert claim_verdict(synthetic(1.0, 0.01), same)["verdict"] == "held"
    assert claim_verdict(synthetic(0.5, 0.01), same)["verdict"] == "did not hold"
    # a noisier machine makes "no difference" harder to show, never easier
    assert claim_verdict(synthetic(1.0, 0.3), same)["verdict"] == "not resolvable here"
    worse = claims.no_worse("no slower", 1.0)
    assert claim_verdict(synthetic(0.98, 0.01), worse)["verdict"] == "held"
    assert claim_verdict(synthetic(0.7, 0.01), worse)["verdict"] == "did not hold"


def test_thresholds_and_ranges() -> None:
    # "an order of magnitude": 3x faster is a clear effect, but not past sqrt(10)
    ten = claims.threshold("10x", 10, 10 ** 0.5)
    assert claim_verdict(synthetic(3.0, 0.02), ten)["verdict"] == "did not hold"
    flat = claims.threshold("flat", 1, 1.1, above=False)
    assert claim_verdict(synthetic(3.0, 0.02), flat)["verdict"] == "did not hold"
    assert claim_verdict(synthetic(1.0, 0.02), flat)["verdict"] == "held"
    between = claims.within("between", 1.0, 0.5, 1.5)
    assert claims.verdict(0.8, 1.2, between) == "held" and claims.verdict(1.6, 2.0, between) == "did not hold"
    assert claims.verdict(0.3, 1.2, between) == "not resolvable here"


def test_no_verdict_from_fewer_than_6_blocks() -> None:
    row = claim_verdict(synthetic(1.5, 0.01, blocks=5), claims.direction("x is faster", 1.5))
    assert row["verdict"] == "not resolvable here" and row["ci_method"] == "range"
    assert "a verdict needs 6" in str(row["note"]) and row["coverage"] == pytest.approx(0.9375)


def test_a_baseline_that_differs_from_itself_decides_nothing() -> None:
    """The A/A is what every effect is tested against: copy 2 of the baseline 20% slower than copy 1 in
    every block means the design is biased, and no verdict is given."""
    pts = synthetic(1.5, 0.01)
    pts.loc[(pts.config == "base") & (pts["copy"] == 2), "value"] *= 0.8
    row = claim_verdict(pts, claims.direction("x is faster", 1.5))
    assert row["verdict"] == "not resolvable here" and "excludes 1" in str(row["note"])


def test_a_machine_unlike_the_articles_is_not_judged_and_its_verdict_kept_apart() -> None:
    """The one policy (docs/measurement.md, "A machine unlike the article's"): a claim whose property differs is
    "not measurable here" whatever its interval gives, and that verdict is kept in ``here_verdict``; on a machine
    like the article's the interval decides as always."""
    disk = claims.Machine("disk flush rate", "4,167 fdatasync/s", "about 120 flushes/s", "a hard disk", differs=True)
    ten = claims.threshold("10x", 10, 10 ** 0.5)
    row = claim_verdict(synthetic(3.0, 0.02), ten, machine=disk)
    assert (row["verdict"], row["here_verdict"]) == ("not measurable here", "did not hold")
    assert "not judged: this machine differs from the article's in disk flush rate" in str(row["note"])
    assert "answered by a hard disk" in str(row["note"])
    held = claim_verdict(synthetic(20.0, 0.02), ten, machine=disk)  # a "held" is not counted either
    assert (held["verdict"], held["here_verdict"]) == ("not measurable here", "held")
    like = dataclasses.replace(disk, differs=False)
    alike = claim_verdict(synthetic(3.0, 0.02), ten, machine=like)
    assert (alike["verdict"], alike["here_verdict"]) == ("did not hold", "") and "not judged" not in alike["note"]
    assert (row["depends_on"], row["here"], row["article"]) == ("disk flush rate", "4,167 fdatasync/s",
                                                                "about 120 flushes/s")
    gone = claims.comparison_row(claims.direction("c", 1.0), [], measurable=False, why_not="needs two machines",
                                 machine=disk)
    assert gone["verdict"] == "not measurable here" and "answered by a hard disk" in str(gone["note"])


def test_intervals_say_how_they_were_made() -> None:
    assert effects.interval([1.0, 1.1, 0.9, 1.05, 1.2, 0.95])[3] == "order-statistic"
    med, lo, hi, method = effects.interval([1.0, 1.2, 1.1])
    assert method == "range" and (lo, med, hi) == (1.0, 1.1, 1.2)
    assert claims.comparison_row(claims.direction("c", 1.0), [], 0.1, measurable=False)["verdict"] == \
        "not measurable here"


def test_both_baseline_copies_divide_and_a_block_without_any_gives_no_ratio() -> None:
    pts = synthetic(1.5, 0.02, blocks=3)
    r = effects.block_ratios(pts, "base")
    b1 = pts[(pts.block == 1) & (pts.config == "base")].set_index("copy").value
    x1 = float(pts[(pts.block == 1) & (pts.config == "x")].value.iloc[0])
    got = r[(r.block == 1) & (r.config == "x")].ratio.iloc[0]
    assert got == pytest.approx(x1 / np.sqrt(b1[1] * b1[2]))
    assert r[(r.block == 1) & (r.config == AA)].ratio.iloc[0] == pytest.approx(b1[2] / b1[1])
    one = pts[~((pts.block == 2) & (pts.config == "base") & (pts["copy"] == 1))]
    r = effects.block_ratios(one, "base")  # copy 2 alone divides block 2; it has no A/A
    assert set(r[r.config == "x"].block) == {1, 2, 3} and set(r[r.config == AA].block) == {1, 3}
    none = pts[~((pts.block == 2) & (pts.config == "base"))]
    assert set(effects.block_ratios(none, "base").block) == {1, 3}
    # the baseline alone, each block's second copy lost (logical_replication with one system): no ratio, no error
    alone = pts[(pts.config == "base") & (pts["copy"] == 1)]
    assert effects.block_ratios(alone, "base").empty


def test_steal_flagged_points_are_left_out_and_counted() -> None:
    pts = synthetic(1.5, 0.02, blocks=3).assign(steal_flag=False)
    pts.loc[(pts.block == 2) & (pts.config == "x"), "steal_flag"] = True
    r = effects.block_ratios(pts, "base")
    assert set(r[r.config == "x"].block) == {1, 3}
    assert effects.steal_note(pts) == "1 point(s) flagged for CPU steal > 20% left out"


PROGRESS = """progress: 1.0 s, 100.0 tps, lat 10.000 ms stddev 1.000, 0 failed
progress: 2.0 s, 200.0 tps, lat 5.000 ms stddev 1.000, 0 failed
progress: 3.0 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed
progress: 4.0 s, 400.0 tps, lat 2.500 ms stddev 1.000, 0 failed
"""


def test_the_window_cuts_the_warm_up_and_lists_stalls() -> None:
    w = measured_window(PROGRESS, warmup_s=1.0)
    assert w["tps"] == pytest.approx((200 + 0 + 400) / 3)
    assert w["window_s"] == 3.0 and w["intervals"] == 3
    assert w["stalls"] == [3.0]
    assert measured_window(PROGRESS, warmup_s=0)["tps"] == pytest.approx(700 / 4)
    assert measured_window("", warmup_s=1)["tps"] is None


def test_measured_time_is_the_union_of_a_points_workload_windows(tmp_path, monkeypatch) -> None:
    """Writes and reads at once count once; a set-up step between two runs does not count."""
    from pglab.runs.store import RunStore

    clock = iter([0.0, 1.0, 4.0, 5.0, 6.0, 10.0, 11.0, 12.0])  # started/ended in the order called below
    monkeypatch.setattr("pglab.runs.store.time.monotonic", lambda: next(clock))
    store = RunStore(tmp_path, "study", "test", {})
    point = store.point("b01-x", block=1)
    point.workload_started("primary_")  # 0
    point.workload_started("standby_")  # 1
    point.workload_ended("standby_")  # 4: reads 1..4 inside writes 0..5
    point.workload_ended("primary_")  # 5
    point.workload_ended("never started")  # ignored: no clock read
    point.workload_started()  # 6: a second run after set-up 5..6
    point.workload_ended()  # 10
    assert point.meta["measured_s"] == 9.0  # 0..5 and 6..10


def test_the_measurement_share_counts_finished_points_over_every_attempts_wall_time(tmp_path) -> None:
    from pglab.runs.opening import measurement_share
    from pglab.runs.store import RunStore

    store = RunStore(tmp_path, "study", "test", {})
    for pid, status, seconds in [("b01-a", "ok", 30.0), ("b01-b", "failed", 30.0), ("b02-a", "ok", 45.0)]:
        point = store.point(pid, block=1)
        point.meta["measured_s"] = seconds
        point.finish(status)
    store.point("setup-a", kind="setup").finish("ok")  # not a planned point
    store.manifest["collect_s"] = [60.0, 40.0]  # a run and its resume
    assert measurement_share(store) == {"measured_s": 75.0, "measurement_share": 0.75}
