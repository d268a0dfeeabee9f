"""Runs or blocks: how the same measuring time, split into runs and blocks, covers the machine's value and decides.

Why: on this machine a run is itself a random draw; the between-run SD of a claim's log ratio was measured as
large as the block-to-block SD within a run. One run's interval over its blocks (today: 1 run of 6 blocks,
``stats.median_interval``, verdict by ``claims``' rule) says nothing of the run's own draw; a verdict over runs
(``over_runs.decide``: a t interval on the logs of the runs' medians, from 3 runs on, kept only if leaving any
one run out gives the same verdict) does. This script simulates campaigns of each allocation (runs x blocks)
at the measured variance components of four claims, each block's log value being

    mu + u (the run's, N(0, between^2)) + e (the block's, N(0, within^2); --noise for t(4) or a skewed one)

and prints per allocation:

* ``cover``: how often its interval covers the machine's value exp(mu) (a "95%" interval should: 95%);
* ``width``: the median of the interval's high / low;
* ``decided``: the share of campaigns that publish "held" or "did not hold"; ``wrong``: the share that
  publish the verdict the machine's value does not have;
* ``opposite``: the chance that two campaigns of this allocation publish opposite verdicts (one "held", the
  other "did not hold"); ``flip``: the chance that one decides and the other leaves the claim open
  (2 p q from each verdict's share: the campaigns are independent);
* ``wall``: the campaign's time, runs x set-up + runs x blocks x block (``--setup-s``, ``--block-s``).

Each claim is simulated at two places of its machine value: ``near``, one SD (of a block's log value,
sqrt(within^2 + between^2)) inside the claim's bound, where it holds; ``beyond``, three SDs the other side
of that bound, where it does not. The verdicts, vectorised here, are checked against ``over_runs.decide`` and
``claims.comparison_row`` on a sample of the campaigns first.

Run from the project root::

    .venv/bin/python bench/allocation.py                    # 20,000 campaigns per cell, about 10 s
    .venv/bin/python bench/allocation.py --block-s 90 --noise t4
    .venv/bin/python bench/allocation.py --tiny             # seconds: does the script still work?

Exit code 0 whatever it finds (no goal); 1 if the vectorised verdicts disagree with the library's.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
from pglab.analysis import claims, over_runs, stats
from tiny import parse

HELD, NOT_HELD, OPEN = over_runs.HELD_CODE, over_runs.NOT_HELD_CODE, over_runs.OPEN_CODE
CODE = over_runs.CODES
ALLOCATIONS = "1x6,3x2,6x1,5x1,4x2,4x3,5x2"  # runs x blocks; 1x6 is today's run
CHECKED = 300  # campaigns per cell checked one by one against the library


@dataclass(frozen=True)
class Component:
    """A claim's variance components (SDs of its log block value) and its rule's bounds (NaN: an open side)."""

    name: str
    within: float
    icc: float
    bound_low: float
    bound_high: float
    source: str

    @property
    def between(self) -> float:
        return self.within * math.sqrt(self.icc / (1.0 - self.icc))

    @property
    def sd(self) -> float:
        return math.hypot(self.within, self.between)


# The intra-class correlations as measured between archived runs on this machine; the within SDs: fdw RW as
# measured with them, the others pooled over the two archived runs of their study in data/runs. (Where the value
# sits is set in units of ``sd``, so the within SD changes little but the rounding of the bounds.)
COMPONENTS = [
    Component("fdw RW", 0.084, 0.58, 1.4167, 2.04, "about 1.7x: within (1.4167, 2.04)"),
    Component("fdw RO/RW", 0.229, 0.50, 2.1196, math.nan, "far above: greater than 2.1196"),
    Component("sync local", 0.059, 0.33, 1.25, 1.8, "about 1.5x: within (1.25, 1.8)"),
    Component("pglogical", 0.067, 0.32, 0.9091, 1.1, "close to streaming: within (0.9091, 1.1)"),
]
PLACES = {"near": 1.0, "beyond": -3.0}  # SDs inside (+) or outside (-) the claim's first bound


def machine_value(c: Component, place: str) -> tuple[float, int]:
    """(mu, the verdict the machine's value has) for ``c`` at ``place``."""
    d = PLACES[place] * c.sd
    if not math.isnan(c.bound_low):
        mu = math.log(c.bound_low) + d
    else:
        mu = math.log(c.bound_high) - d
    return mu, HELD if d > 0 else NOT_HELD


def noise(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Block noise of median 0 and SD 1."""
    if kind == "t4":
        return rng.standard_t(4, shape) / math.sqrt(2.0)
    if kind == "lognormal":  # exp(0.5 Z) - 1, scaled: skewness 1.75
        s2 = 0.25
        return (np.exp(0.5 * rng.standard_normal(shape)) - 1.0) / math.sqrt((math.exp(s2) - 1) * math.exp(s2))
    return rng.standard_normal(shape)


def block_values(c: Component, mu: float, runs: int, blocks: int, sims: int, kind: str,
                 rng: np.random.Generator) -> np.ndarray:
    """Block values (ratios), shape (sims, runs, blocks)."""
    u = c.between * rng.standard_normal((sims, runs, 1))
    return np.exp(mu + u + c.within * noise(kind, rng, (sims, runs, blocks)))


rule = over_runs.rule_codes  # the claim's rule as codes, for arrays of intervals


def t_interval(medians: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, lo, hi = over_runs.log_t_intervals(medians)
    return lo, hi


def over_runs_verdicts(medians: np.ndarray, c: Component) -> np.ndarray:
    """``over_runs.decide`` for every campaign (rows of run medians), as the library computes it for arrays."""
    return over_runs.decide_many(medians, c.bound_low, c.bound_high)


def within_run(values: np.ndarray, c: Component) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, verdict) of one run's order-statistic interval over its blocks, by the claim's rule (no verdict
    from fewer than ``claims.MIN_BLOCKS`` blocks), for every campaign."""
    n = values.shape[1]
    _, lo_i, hi_i, _ = stats.median_interval(np.arange(n, dtype=float))
    x = np.sort(values, axis=1)
    lo, hi = x[:, int(lo_i)], x[:, int(hi_i)]
    v = rule(np.round(lo, 4), np.round(hi, 4), c.bound_low, c.bound_high)
    return lo, hi, v if n >= claims.MIN_BLOCKS else np.zeros_like(v)


def library_claim(c: Component) -> claims.Claim:
    if math.isnan(c.bound_high):
        return claims.Claim(c.name, 1.0, "greater", c.bound_low, kind="threshold")
    if math.isnan(c.bound_low):
        return claims.Claim(c.name, 1.0, "less", c.bound_high, kind="threshold")
    return claims.within(c.name, 1.0, c.bound_low, c.bound_high)


def simulate(c: Component, place: str, runs: int, blocks: int, sims: int, kind: str, seed: int,
             check: int) -> tuple[dict[str, float], int]:
    """One cell's figures, and how many of its first ``check`` campaigns the library decided otherwise."""
    mu, truth = machine_value(c, place)
    rng = np.random.default_rng([seed, runs, blocks, COMPONENTS.index(c), list(PLACES).index(place)])
    values = block_values(c, mu, runs, blocks, sims, kind, rng)
    if runs == 1:
        lo, hi, v = within_run(values[:, 0, :], c)
        claim = library_claim(c)
        lib = [CODE[str(claims.comparison_row(claim, x)["verdict"])] for x in values[:check, 0, :]]
    else:
        medians = np.median(values, axis=2)  # each run's reproduced value: the median of its blocks
        lo, hi = t_interval(medians)
        v = over_runs_verdicts(medians, c)
        lib = [CODE[over_runs.decide(list(m), c.bound_low, c.bound_high)[0]] for m in medians[:check]]
    disagree = int(np.sum(np.asarray(lib) != v[:check]))
    p_held, p_not = float(np.mean(v == HELD)), float(np.mean(v == NOT_HELD))
    decided = p_held + p_not
    return {"cover": float(np.mean((lo <= math.exp(mu)) & (math.exp(mu) <= hi))),
            "width": float(np.median(hi / lo)), "decided": decided, "wrong": float(np.mean(v == -truth)),
            "opposite": 2 * p_held * p_not, "flip": 2 * decided * (1 - decided)}, disagree


def allocations(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        r, b = part.lower().split("x")
        out.append((int(r), int(b)))
    return out


HEADER = (f"{'allocation':<11} {'wall':>6} {'cover':>6} {'width':>6} {'decided':>8} {'wrong':>6} {'opposite':>9} "
          f"{'flip':>6}  interval")


def line(runs: int, blocks: int, wall: float, f: dict[str, float]) -> str:
    how = "order statistics over blocks" if runs == 1 else "t over runs' medians"
    return (f"{runs} x {blocks:<7} {wall / 60:5.1f}m {100 * f['cover']:5.1f}% {f['width']:6.3f} "
            f"{100 * f['decided']:7.1f}% {100 * f['wrong']:5.1f}% {100 * f['opposite']:8.2f}% {100 * f['flip']:5.1f}%"
            f"  {how}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=20_000, help="campaigns per allocation and claim")
    ap.add_argument("--allocations", default=ALLOCATIONS, help="runs x blocks, comma-separated")
    ap.add_argument("--setup-s", type=float, default=25.0, help="a run's set-up (servers, data), seconds")
    ap.add_argument("--block-s", type=float, default=60.0, help="a block, seconds (45-90 s in the studies)")
    ap.add_argument("--noise", choices=["normal", "t4", "lognormal"], default="normal", help="block noise")
    ap.add_argument("--seed", type=int, default=1)
    a = parse(ap, argv, sims=500)
    t0 = time.perf_counter()
    plan = allocations(a.allocations)
    totals: dict[tuple[int, int], dict[str, float]] = {rb: {} for rb in plan}
    disagree, checked = 0, 0
    print(f"{a.sims} campaigns per cell; block noise {a.noise}; a run's set-up {a.setup_s:.0f} s, a block "
          f"{a.block_s:.0f} s; 'near': 1 SD inside the claim's bound (it holds), 'beyond': 3 SD the other side")
    for c in COMPONENTS:
        for place in PLACES:
            mu, _ = machine_value(c, place)
            print(f"\n{c.name} ({c.source}); within {c.within:.3f}, between {c.between:.3f} (icc {c.icc:.2f}); "
                  f"{place}: machine value {math.exp(mu):.4g}")
            print(HEADER)
            for runs, blocks in plan:
                check = min(CHECKED, a.sims)
                f, bad = simulate(c, place, runs, blocks, a.sims, a.noise, a.seed, check)
                disagree, checked = disagree + bad, checked + check
                wall = runs * a.setup_s + runs * blocks * a.block_s
                print(line(runs, blocks, wall, f))
                for k, v in f.items():
                    totals[(runs, blocks)][k] = totals[(runs, blocks)].get(k, 0.0) + v / (len(COMPONENTS) * len(PLACES))
    print(f"\nmean over the {len(COMPONENTS)} claims x {len(PLACES)} places")
    print(HEADER)
    for runs, blocks in plan:
        print(line(runs, blocks, runs * a.setup_s + runs * blocks * a.block_s, totals[(runs, blocks)]))
    print(f"\nchecked against over_runs.decide / claims.comparison_row: {checked - disagree} of {checked} campaigns "
          f"agree; {time.perf_counter() - t0:.1f} s")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
