"""The measurement layer without servers: the plan, intervals, the noise floor, verdicts, the window."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from pglab.analysis import effects
from pglab.analysis.effects import AA, Claim
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


def claim_verdict(points: pd.DataFrame, claim: Claim) -> dict[str, object]:
    r = effects.block_ratios(points, "base")
    return effects.comparison_row(claim, r[r.config == "x"].ratio, effects.noise_floor(r[r.config == AA].ratio))


def test_a_clear_effect_held_in_spite_of_drift_between_blocks() -> None:
    row = claim_verdict(synthetic(1.5, 0.02), Claim("x is faster", 1.5))
    assert row["verdict"] == "held"
    assert row["ci_low"] > 1.4 and row["ci_high"] < 1.6 and row["blocks"] == 8


def test_an_effect_inside_the_noise_floor_is_not_resolvable() -> None:
    row = claim_verdict(synthetic(1.03, 0.08), Claim("x is faster", 1.2))
    assert row["verdict"] == "not resolvable here"
    assert row["noise_floor"] > 0.03


def test_a_clear_opposite_did_not_hold() -> None:
    assert claim_verdict(synthetic(0.6, 0.02), Claim("x is faster", 1.2))["verdict"] == "did not hold"


def test_equality_claims_and_thresholds() -> None:
    assert claim_verdict(synthetic(1.0, 0.01), Claim("same", 1.0, "equal", band=0.1))["verdict"] == "held"
    assert claim_verdict(synthetic(0.5, 0.01), Claim("same", 1.0, "equal", band=0.1))["verdict"] == "did not hold"
    # "an order of magnitude": 3x faster is a clear effect, but not past sqrt(10)
    assert claim_verdict(synthetic(3.0, 0.02), Claim("10x", 10, "greater", 10 ** 0.5))["verdict"] == "did not hold"
    assert claim_verdict(synthetic(3.0, 0.02), Claim("flat", 1, "less", 1.5))["verdict"] == "did not hold"
    assert claim_verdict(synthetic(1.0, 0.02), Claim("flat", 1, "less", 1.5))["verdict"] == "held"


def test_intervals_say_how_they_were_made() -> None:
    assert effects.interval([1.0, 1.1, 0.9, 1.05, 1.2, 0.95])[3] == "order-statistic"
    med, lo, hi, method = effects.interval([1.0, 1.2, 1.1])
    assert method == "bootstrap" and lo <= med <= hi
    assert effects.interval([1.0, 1.2, 1.1]) == effects.interval([1.0, 1.2, 1.1])  # seeded: deterministic
    assert effects.comparison_row(Claim("c", 1.0), [], 0.1, measurable=False)["verdict"] == "not measurable here"


def test_a_block_without_its_first_baseline_gives_no_ratio() -> None:
    pts = synthetic(1.5, 0.02, blocks=3)
    pts = pts[~((pts.block == 2) & (pts.config == "base") & (pts["copy"] == 1))]
    r = effects.block_ratios(pts, "base")
    assert set(r.block) == {1, 3}


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
