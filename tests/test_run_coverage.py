"""Verdicts over runs cover the machine's value when runs differ: a run-level random effect simulated.

Why: on this machine a run is itself a random draw. The between-run SD of a claim's log ratio was measured as
large as the block-to-block SD within a run (fdw RW: between 0.098, within 0.084, intra-class correlation
0.58; RO/RW 0.50, synchronous_commit local 0.33, pglogical 0.32). Here each simulated block's log value is

    mu + u (the run's, N(0, sb^2)) + sw * e (the block's: median 0, SD 1)

with sw fixed and sb set from the intra-class correlation icc = sb^2 / (sb^2 + sw^2). A run of endless blocks
would give exp(mu + u), its blocks' median; the machine's value is the centre of those, exp(mu). A run's value
is the median of its blocks, as ``over_runs`` takes each run's ``reproduced``; the interval is
``over_runs.log_t_interval`` over the runs' values, and ``over_runs.decide`` gives the verdict. The block
noises: normal, t(4) (heavy tails: the archived runs' log block values have an excess kurtosis of about 2) and
a median-centred lognormal (skewness 1.75; single claims' blocks show up to 2).

Vectorised as tests/test_interval_coverage.py is: the t factor and the verdicts are read from, and checked
against, the functions themselves, then applied to every simulated campaign at once.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pglab.analysis import over_runs, stats

#: Campaigns per case. The Monte Carlo standard error of a coverage near 95% is sqrt(0.95 * 0.05 / 50,000)
#: = 0.10 points: the 94% bar lies 10 standard errors below a true 95% (never missed by chance) and 4.5 above a
#: true 93.5% (passed by chance less than once in 100,000), so the test tells 95% from 93.5%.
REPS = 50_000
SW = 0.084  # within-run SD of a log block value (fdw RW, measured)
MU = math.log(1.7)  # the machine's value: 1.7 (fdw RW's "about 1.7x")
ICCS = (0.0, 0.2, 0.4, 0.6)
RUNS = (3, 4, 5)
BLOCKS = (1, 2, 3)
BAR = 0.94  # the bar for a "95%" interval
LOGNORMAL_SIGMA = 0.5
HELD, NOT_HELD, OPEN = over_runs.HELD_CODE, over_runs.NOT_HELD_CODE, over_runs.OPEN_CODE
VERDICT_CODE = over_runs.CODES


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape)


def _t4(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_t(4, shape) / math.sqrt(2.0)  # t(4) has variance 2


def _lognormal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """exp(s Z) - 1, scaled to SD 1: median 0, a long right tail."""
    s2 = LOGNORMAL_SIGMA**2
    return (np.exp(LOGNORMAL_SIGMA * rng.standard_normal(shape)) - 1.0) / math.sqrt((math.exp(s2) - 1) * math.exp(s2))


NOISES = {"normal": _normal, "t4": _t4, "lognormal": _lognormal}


def between_sd(icc: float, sw: float = SW) -> float:
    """sb from the intra-class correlation: icc = sb^2 / (sb^2 + sw^2)."""
    return sw * math.sqrt(icc / (1.0 - icc))


def block_logs(rng: np.random.Generator, reps: int, runs: int, blocks: int, icc: float, noise: str = "normal",
               mu: float = MU, sw: float = SW) -> np.ndarray:
    """Log block values, shape (reps, runs, blocks): reps campaigns of ``runs`` runs of ``blocks`` blocks."""
    run_effect = between_sd(icc, sw) * rng.standard_normal((reps, runs, 1))
    return mu + run_effect + sw * NOISES[noise](rng, (reps, runs, blocks))


def run_values(logs: np.ndarray) -> np.ndarray:
    """Each run's value as ``over_runs`` takes it: the median of its block values (not of their logs: with 2
    blocks the mean of the two ratios), shape (reps, runs)."""
    return np.median(np.exp(logs), axis=-1)


t_intervals = over_runs.log_t_intervals  # checked against log_t_interval one by one (the first test)
decide_many = over_runs.decide_many  # checked against decide one by one


def test_the_vectorised_interval_and_verdict_are_over_runs_own() -> None:
    """What the other tests apply to every campaign at once is what log_t_interval and decide give one by one."""
    rng = np.random.default_rng(7)
    bounds = [(1.4167, 2.04), (1.6, math.nan), (math.nan, 1.75)]
    for runs in (2, 3, 4, 5, 8):
        values = run_values(block_logs(rng, 150, runs, 2, 0.4, mu=MU + rng.normal(0, 0.1)))
        c, lo, hi = t_intervals(values)
        one = np.array([over_runs.log_t_interval(v) for v in values])
        assert np.allclose(one, np.column_stack([c, lo, hi]), rtol=1e-12, atol=0)
        for a, b in bounds:
            codes = [VERDICT_CODE[over_runs.decide(list(v), a, b)[0]] for v in values]
            assert decide_many(values, a, b).tolist() == codes, (runs, a, b)


CASES = [(n, icc, r, b) for n in NOISES for icc in ICCS for r in RUNS for b in BLOCKS]


@pytest.mark.parametrize(("noise", "icc", "runs", "blocks"), CASES,
                         ids=[f"{n}-icc{icc}-{r}x{b}" for n, icc, r, b in CASES])
def test_the_interval_over_runs_covers_the_machine_value(noise: str, icc: float, runs: int, blocks: int) -> None:
    """At least 94% at every intra-class correlation, 3-5 runs of 1-3 blocks, for each block noise.

    Seen: normal 94.8-95.3%, t(4) 94.9-95.9%. Nearest the bar: the skewed noise with 2 blocks a run (whose median
    is their mean, pulled by the long tail) at 5 runs, 94.2-94.4% (400,000 campaigns: 94.2-94.3%). Beyond the
    runs tested it falls, as the interval narrows around that pull (8 runs: 92.9%, 12: 90.7%); 1 or 3 blocks a
    run are pulled less (8 runs: 94.7-94.8%, 12: 93.6-94.4%)."""
    rng = np.random.default_rng([ICCS.index(icc), runs, blocks, list(NOISES).index(noise)])
    _, lo, hi = t_intervals(run_values(block_logs(rng, REPS, runs, blocks, icc, noise)))
    covered = float(np.mean((lo <= math.exp(MU)) & (math.exp(MU) <= hi)))
    assert covered >= BAR, (noise, icc, runs, blocks, covered)


def within_run_coverage(blocks: int, icc: float, seed: int) -> float:
    """How often stats.median_interval over the blocks of one run covers the machine's value (vectorised: the same
    pair of order statistics for every run, read from the function as tests/test_interval_coverage.py does)."""
    _, lo_i, hi_i, _ = stats.median_interval(np.arange(blocks, dtype=float))
    rng = np.random.default_rng(seed)
    x = np.sort(np.exp(block_logs(rng, REPS, 1, blocks, icc)[:, 0, :]), axis=1)
    return float(np.mean((x[:, int(lo_i)] <= math.exp(MU)) & (math.exp(MU) <= x[:, int(hi_i)])))


def test_one_runs_interval_over_its_blocks_covers_far_less() -> None:
    """Why verdicts rest on runs: at icc 0.6 the 95% order-statistic interval over one run's 6 blocks (today's run)
    covers the machine's value about 70% of the time, and more blocks make it worse (9: 64%, 15: 57%), as the
    interval narrows around that run's own value. At icc 0 it covers what stats.coverage states (96.9% at 6)."""
    alone = within_run_coverage(6, 0.0, seed=60)
    assert abs(alone - stats.coverage("order-statistic", 6)) < 4 * math.sqrt(0.03 * 0.97 / REPS)
    got = {b: within_run_coverage(b, 0.6, seed=b) for b in (6, 9, 15)}
    assert got[6] < 0.80 and got[15] < got[9] < got[6], got
    assert got[6] < BAR - 0.1  # far less than an interval over runs covers


def test_a_published_verdict_survives_leaving_any_run_out() -> None:
    """Over campaigns of 5 runs around three kinds of rule: a held / did not hold that decide publishes is the rule's
    verdict on the interval of every 4 runs left (unrounded too); one it withholds names the runs that change it."""
    rng = np.random.default_rng(11)
    counts = {"held": 0, "did not hold": 0, "withheld": 0, "open": 0}
    for a, b in [(1.4167, 2.04), (2.1196, math.nan), (math.nan, 1.1)]:
        edge = math.log(a if not math.isnan(a) else b)
        for _ in range(250):
            values = np.exp(edge + rng.uniform(-0.25, 0.25) + 0.06 * rng.standard_normal(5)).tolist()
            verdict, (_, lo, hi), changed = over_runs.decide(values, a, b)
            full = over_runs.rule_verdict(lo, hi, a, b)
            left_out = []
            for i in range(5):
                _, l2, h2 = over_runs.log_t_interval(values[:i] + values[i + 1:])
                left_out.append((over_runs.rule_verdict(l2, h2, a, b),
                                 over_runs.rule_verdict(round(l2, 4), round(h2, 4), a, b)))
            if verdict in ("held", "did not hold"):
                counts[verdict] += 1
                assert verdict == full and not changed
                assert all(unrounded == rounded == verdict for unrounded, rounded in left_out), (values, a, b)
            elif full != "not resolvable here":
                counts["withheld"] += 1
                assert changed and all(left_out[i][1] != full for i in changed)
                assert all(left_out[i][1] == full for i in range(5) if i not in changed)
            else:
                counts["open"] += 1
                assert not changed
    assert min(counts.values()) >= 20, counts  # every branch seen often enough to mean something


def test_no_verdict_from_fewer_than_3_runs() -> None:
    """However tight and far from the bound, 1 or 2 measured runs decide nothing; 3 such runs do (so the test is
    not empty). A run that measured nothing (NaN) or a value that is no ratio (<= 0) does not count."""
    assert over_runs.MIN_RUNS == 3
    assert over_runs.log_t_interval([1.5, 1.5001])[1] > 1.4  # the interval of 2 alone would hold it
    for values in ([1.5], [1.5, 1.5001], [1.5, math.nan, 1.5001], [1.5, 1.5001, 0.0], [1.5, -1.0, 1.5001, 0.0],
                   [math.nan] * 4, []):
        assert over_runs.decide(values, 1.0, math.nan)[0] == "not resolvable here", values
    assert over_runs.decide([1.5, 1.5001, 1.5002], 1.0, math.nan)[0] == "held"
    assert over_runs.decide([1.5, 1.5001, 1.5002], math.nan, 1.2)[0] == "did not hold"
    rng = np.random.default_rng(3)
    decided_at = {n: 0 for n in range(6)}
    for _ in range(300):
        values = np.exp(0.5 + 0.01 * rng.standard_normal(5))
        measured = int(rng.integers(0, 6))
        values[rng.permutation(5)[measured:]] = math.nan
        decided_at[measured] += over_runs.decide(values.tolist(), 1.0, math.nan)[0] == "held"
    assert decided_at[0] == decided_at[1] == decided_at[2] == 0 and min(decided_at[3], decided_at[5]) > 0, decided_at


@pytest.mark.parametrize("blocks", [2, 6])
@pytest.mark.parametrize("icc", [0.0, 0.2, 0.4, 0.58])
def test_spread_recovers_the_within_and_between_sd(icc: float, blocks: int) -> None:
    """On 2,000 simulated runs (a tenth of the blocks lost as NaN, so runs differ in size) ``spread`` gives the
    within and between SD within 25% (at icc 0: a between SD under a quarter of the within) and the icc within 0.1."""
    rng = np.random.default_rng([blocks, int(100 * icc)])
    values = np.exp(block_logs(rng, 1, 2000, blocks, icc, sw=0.084)[0])
    values[rng.random(values.shape) < 0.1] = math.nan
    within, between, got_icc = over_runs.spread(values.tolist())
    assert abs(within / 0.084 - 1) < 0.25, within
    sb = between_sd(icc, 0.084)
    assert (abs(between / sb - 1) < 0.25) if sb else between < 0.25 * 0.084, (between, sb)
    assert abs(got_icc - icc) < 0.1, got_icc


@pytest.mark.parametrize("distance", [0.5, 0.75, 1.5, 2.0, 3.0])
def test_runs_to_settle_is_enough_runs(distance: float) -> None:
    """Five runs whose log medians sit ``distance`` SDs above a "greater than 1" bound: ``runs_to_settle`` gives a
    count, and a campaign of that many runs at the same mean and spread decides in most cases (its POWER, 80%, is
    aimed at; over two thirds is asked)."""
    s = 0.1
    z = np.arange(5.0)
    measured = np.exp(distance * s + s * (z - z.mean()) / z.std(ddof=1))
    n = over_runs.runs_to_settle(measured.tolist(), 1.0, math.nan)
    assert n is not None and max(over_runs.MIN_RUNS, 6) <= n <= over_runs.MAX_SETTLE
    rng = np.random.default_rng(int(10 * distance))
    campaigns = np.exp(distance * s + s * rng.standard_normal((4000, n)))
    decided = float(np.mean(decide_many(campaigns, 1.0, math.nan) != OPEN))
    assert decided > 2 / 3, (distance, n, decided)


def test_runs_to_settle_grows_as_the_mean_nears_the_bound() -> None:
    z = np.arange(5.0)
    counts = [over_runs.runs_to_settle(np.exp(d * 0.1 + 0.1 * (z - z.mean()) / z.std(ddof=1)).tolist(), 1.0,
                                       math.nan) for d in (3.0, 1.5, 1.0, 0.5, 0.15)]
    assert counts[:4] == sorted(counts[:4]) and counts[-1] is None, counts  # 0.15 SD: more than 100 runs


@pytest.mark.parametrize("sitting_sd", [0.5, 1.0, 2.0])
def test_across_sittings_the_two_level_interval_covers_and_one_sitting_does_not(sitting_sd: float) -> None:
    """Run values = machine value + a sitting's effect (shared by its runs) + the run's own: the interval over two
    sittings' means covers the machine's value at least 94% of the time whatever the sitting effect; one sitting's
    interval over its 5 runs covers what ``over_runs.ONE_SITTING_COVERAGE`` says at a sitting SD equal to the runs'
    (the size the reference ledger's campaigns showed: 27 of 37 intervals covered other campaigns' means)."""
    rng = np.random.default_rng(29)
    n, runs, truth = 4000, 5, 1.3
    covered = one = 0
    for _ in range(n):
        effects = rng.normal(0, 0.05 * sitting_sd, 2)
        values = np.exp(math.log(truth) + np.repeat(effects, runs) + rng.normal(0, 0.05, 2 * runs))
        labels = ["a"] * runs + ["b"] * runs
        _, (_, lo, hi), _ = over_runs.decide_sittings(list(values), labels, 0.0, math.inf)
        covered += lo <= truth <= hi
        _, lo1, hi1 = over_runs.log_t_interval(values[:runs])
        one += lo1 <= truth <= hi1
    assert covered / n >= 0.94
    if sitting_sd == 1.0:
        assert one / n == pytest.approx(over_runs.ONE_SITTING_COVERAGE, abs=0.025)
    assert one / n < 0.9  # a sitting effect of any of these sizes leaves one sitting's interval short of 95%


def measured_sittings() -> list[tuple[str, float, float]]:
    """From the reference ledger, per comparable group (study, profile, PostgreSQL, emulation, claim) that ran in two
    or more sittings of at least ``over_runs.MIN_RUNS`` unmarked runs each: (group, the sitting SD, the run SD) of
    the claim's log value. The run SD is pooled within sittings; the sitting SD is what the sittings' means vary
    beyond what their runs' spread explains (method of moments, 0 when they vary less)."""
    from conftest import REPO
    from pglab.ledger import book
    from pglab.ledger.backend import Ledger
    from pglab.runs.marks import SITTING_GAP_S, when

    with Ledger(str(REPO / "data" / "ledger" / "reference.sqlite.gz"), readonly=True) as ledger:
        claims = book.claims(ledger, with_marked=False)
        ends = book.runs(ledger, with_marked=False).set_index("run_id")["ended"]
    claims = claims[(claims.reproduced > 0) & (claims.status == "complete")].assign(ended=lambda c: c.run_id.map(ends))
    out = []
    keys = ["study", "profile", "pg_version", "emulation", "claim"]
    for key, g in claims.groupby(keys, dropna=False, sort=True):
        labels, sitting, last = [], 0, None
        for r in g.sort_values("started").itertuples():
            start = when(r.started)
            if last is not None and start is not None and (start - last).total_seconds() > SITTING_GAP_S:
                sitting += 1
            labels.append(sitting)
            last = when(r.ended) or start
        logs = pd.Series(np.log(g.sort_values("started").reproduced.to_numpy()), index=labels)
        per = [s.to_numpy() for _, s in logs.groupby(level=0) if len(s) >= over_runs.MIN_RUNS]
        if len(per) < 2:
            continue
        run_var = sum(float(((p - p.mean()) ** 2).sum()) for p in per) / sum(len(p) - 1 for p in per)
        means = np.array([p.mean() for p in per])
        sitting_var = float(means.var(ddof=1)) - run_var * float(np.mean([1 / len(p) for p in per]))
        out.append((" / ".join(str(k) for k in key), math.sqrt(max(sitting_var, 0.0)), math.sqrt(run_var)))
    return out


def test_the_two_level_interval_covers_at_the_sitting_effects_measured_here() -> None:
    """The sitting effects the reference ledger shows (every group of two or more sittings), simulated at their own
    sizes: two sittings of 5 runs, the two-level interval covers the machine's value at least 94% of the time in
    every group. One sitting's interval over its 5 runs covers what the groups' sizes give: measured on 2026-11-29,
    13 groups, 7 with no sitting effect (94-95%), 6 with one (93%, 90%, 87%, 64%, 65%, 31%): where the sitting SD
    is about the runs' (0.75-1.5x), within 5 points of ``over_runs.ONE_SITTING_COVERAGE`` (what a one-sitting
    verdict states of itself), some group falls short of 90% (so one sitting is not enough here), and the lowest and
    highest are what the scope note says (``over_runs.MEASURED_ONE_SITTING``)."""
    groups = measured_sittings()
    assert len(groups) >= 3, groups  # the shipped campaigns ran in two sittings: their claims are such groups
    rng = np.random.default_rng(31)
    n, runs, truth = 4000, 5, 1.3
    one_sitting = []
    for name, sitting_sd, run_sd in groups:
        effects = rng.normal(0, sitting_sd, (n, 2, 1))
        values = np.exp(math.log(truth) + effects + rng.normal(0, run_sd, (n, 2, runs))).reshape(n, 2 * runs)
        labels = ["a"] * runs + ["b"] * runs
        covered = 0
        for v in values:
            _, (_, lo, hi), _ = over_runs.decide_sittings(list(v), labels, 0.0, math.inf)
            covered += lo <= truth <= hi
        assert covered / n >= 0.94, (name, sitting_sd, run_sd, covered / n)
        _, lo1, hi1 = t_intervals(values[:, :runs])
        share = float(np.mean((lo1 <= truth) & (truth <= hi1)))
        one_sitting.append((sitting_sd / run_sd if run_sd else math.inf, share))
    alike = [share for ratio, share in one_sitting if 0.75 <= ratio <= 1.5]
    assert alike and all(abs(share - over_runs.ONE_SITTING_COVERAGE) <= 0.05 for share in alike), sorted(one_sitting)
    assert min(share for _, share in one_sitting) < 0.9, sorted(one_sitting)
    low, high = over_runs.MEASURED_ONE_SITTING  # what a one-sitting verdict's scope note states of this machine
    shares = [share for _, share in one_sitting]
    assert abs(min(shares) - low) <= 0.03 and abs(max(shares) - high) <= 0.03, (sorted(shares), low, high)
