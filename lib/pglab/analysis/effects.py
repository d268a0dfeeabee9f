"""Effects from blocks: ratios within a block, intervals over blocks, the A/A noise floor, verdicts.

Why within a block: on a shared 2-core VM the same command varies by up to 2x between minutes, but two
points run back to back see nearly the same machine. So every configuration is divided by the
baseline of its own block, and only those ratios are summarised over blocks.

* Interval of the median ratio: the distribution-free order-statistic interval (``stats``) when there
  are at least 6 blocks, otherwise a percentile bootstrap over blocks (seeded, so deterministic);
  every row says which (``ci_method``) and over how many blocks (``blocks``).
* Noise floor: the baseline runs twice per block; ``second / first`` would be 1 on a quiet machine.
  The 95th percentile of ``|A/A - 1|`` is how far a ratio moves with no effect at all (0.08 = 8%).
* Verdicts: "held" / "did not hold" only when the interval excludes the other answer and the effect is
  larger than the noise floor; otherwise "not resolvable here". A claim that needs what this run did not
  have (separate machines, a level not run) is "not measurable here". Never a median against a threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pglab.analysis.stats import median_interval

VERDICTS = ("held", "did not hold", "not resolvable here", "not measurable here")
COMPARISON_COLUMNS = ["claim", "published", "reproduced", "ci_low", "ci_high", "noise_floor", "blocks", "verdict"]
BOOTSTRAP_RESAMPLES = 4000
MIN_BLOCKS = 3  # below this no verdict is decided (the smoke profiles); 6 give an order-statistic interval
AA = "A/A"  # the ``config`` label of the second baseline's ratio


def block_ratios(points: pd.DataFrame, baseline: str, by: Sequence[str] = ("group",),
                 value: str = "value") -> pd.DataFrame:
    """One row per (block, ``by``..., configuration): value / the block's first baseline.

    ``points`` has one row per point: ``block``, ``config``, ``copy`` (1, or 2 for the A/A baseline), the
    ``by`` columns and ``value``. The second baseline becomes the configuration ``A/A``. A block whose
    first baseline failed has no ratios (nothing to divide by); that is what ``blocks`` then counts.
    """
    keys = ["block", *by]
    first = (points.config == baseline) & (points["copy"] == 1)
    base = points[first].set_index(keys)[value].rename("baseline")
    rest = points[~first].copy()
    rest.loc[rest["copy"] > 1, "config"] = AA
    merged = rest.join(base, on=keys, how="inner")
    merged["ratio"] = merged[value] / merged["baseline"]
    cols = [*keys, "config", "ratio", value, "baseline"]
    return merged[cols].sort_values([*keys, "config"], kind="stable").reset_index(drop=True)


def per_block(ratios: pd.DataFrame) -> pd.DataFrame:
    """block x configuration: the geometric mean over groups (client counts) of the within-block ratio.

    One number per block is the honest unit of replication for a claim made "over all client counts".
    """
    if ratios.empty:
        return pd.DataFrame()
    logs = ratios.assign(log=np.log(ratios.ratio)).groupby(["block", "config"]).log.mean()
    return np.exp(logs).unstack("config")


def interval(values: Sequence[float] | np.ndarray, seed: int = 0) -> tuple[float, float, float, str]:
    """(median, low, high, method): order-statistic 95% interval with >= 6 values, else a bootstrap."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) >= 6 or len(x) < 2:
        return median_interval(x)
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(x, size=(BOOTSTRAP_RESAMPLES, len(x)), replace=True), axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(np.median(x)), float(lo), float(hi), "bootstrap"


def interval_method(n: int) -> str:
    """The ``ci_method`` :func:`interval` gives ``n`` values (what a figure's caption says of its bars)."""
    return "order-statistic" if n >= 6 else "bootstrap" if n >= 2 else "single" if n == 1 else "none"


def noise_floor(aa_ratios: Sequence[float] | np.ndarray) -> float:
    """The 95th percentile of |A/A - 1|; NaN without an A/A pair."""
    x = np.asarray(aa_ratios, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.percentile(np.abs(x - 1.0), 95)) if len(x) else math.nan


def summarise(ratios: pd.DataFrame, by: Sequence[str] = ("group", "config")) -> pd.DataFrame:
    """Per group and configuration: median ratio, its interval, method, blocks; and the group's noise floor."""
    rows = []
    floors = {}
    group_keys = [k for k in by if k != "config"]
    for key, g in ratios[ratios.config == AA].groupby(group_keys, sort=True) if group_keys else []:
        floors[key if isinstance(key, tuple) else (key,)] = noise_floor(g.ratio)
    overall = noise_floor(ratios[ratios.config == AA].ratio)
    for key, g in ratios.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        med, lo, hi, method = interval(g.ratio.to_numpy())
        row = dict(zip(by, key, strict=True))
        gk = tuple(row[k] for k in group_keys)
        row.update(median=med, ci_low=lo, ci_high=hi, ci_method=method, blocks=int(g.ratio.notna().sum()),
                   noise_floor=floors.get(gk, overall))
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "median", "ci_low", "ci_high", "ci_method", "blocks", "noise_floor"])


def verdict(low: float, high: float, median: float, noise: float, *, claim: str = "greater",
            threshold: float = 1.0, band: float = 0.1) -> str:
    """The verdict of a claim about a ratio from its interval; see the module doc.

    ``claim``: "greater" (ratio > threshold), "less" (ratio < threshold) or "equal" (within
    ``max(band, noise)`` of 1). A direction claim (threshold 1) whose median is within the noise floor
    of 1 is never decided; a claim about a size (threshold 1.5, sqrt(10)) needs its interval to clear it.
    """
    if any(math.isnan(v) for v in (low, high, median)):
        return "not measurable here"
    noise = 0.0 if math.isnan(noise) else noise
    beyond_noise = abs(median - 1.0) > noise
    if claim == "equal":
        tol = max(band, noise)
        if low >= 1 - tol and high <= 1 + tol:
            return "held"
        if low > 1 + tol or high < 1 - tol:
            return "did not hold"
        return "not resolvable here"
    if claim == "less":  # mirror of greater
        return verdict(1 / high, 1 / low, 1 / median, noise, claim="greater", threshold=1 / threshold)
    if claim != "greater":
        raise ValueError(f"claim must be greater, less or equal, not {claim!r}")
    decisive = threshold != 1.0 or beyond_noise  # a direction claim (vs 1) must also clear the noise floor
    if low > threshold and decisive:
        return "held"
    if high < threshold and decisive:
        return "did not hold"
    return "not resolvable here"


@dataclass(frozen=True)
class Claim:
    """One claim of an article about a ratio: what is tested, and the published value."""

    text: str
    published: float
    claim: str = "greater"
    threshold: float = 1.0
    band: float = 0.1

    @property
    def tested(self) -> str:
        if self.claim == "equal":
            return f"ratio within 1 +- max({self.band:g}, noise floor)"
        return f"ratio {'>' if self.claim == 'greater' else '<'} {self.threshold:g} beyond the noise floor"


def comparison_row(claim: Claim, ratios: Sequence[float] | np.ndarray, noise: float, note: str = "",
                   measurable: bool = True, why_not: str = "") -> dict[str, object]:
    """A row of ``comparison.csv`` from the claim and the per-block ratios that answer it."""
    x = np.asarray(ratios, dtype=float)
    x = x[~np.isnan(x)]
    med, lo, hi, method = interval(x) if len(x) else (math.nan, math.nan, math.nan, "none")
    v = verdict(lo, hi, med, noise, claim=claim.claim, threshold=claim.threshold, band=claim.band)
    if measurable and len(x) and len(x) < MIN_BLOCKS and v in ("held", "did not hold"):
        v = "not resolvable here"  # two numbers are a range, not an interval
        note = "; ".join(s for s in (f"{len(x)} block(s): a verdict needs at least {MIN_BLOCKS}", note) if s)
    if not measurable:
        v = "not measurable here"
        note = "; ".join(s for s in (why_not, note) if s)
    elif not len(x):
        note = "; ".join(s for s in ("nothing measured for this claim", note) if s)
    return {"claim": claim.text, "published": round(claim.published, 4), "reproduced": _r(med), "ci_low": _r(lo),
            "ci_high": _r(hi), "noise_floor": _r(noise), "blocks": int(len(x)), "verdict": v,
            "tested": claim.tested, "ci_method": method, "note": note}


def _r(v: float) -> float:
    return round(float(v), 4) if not math.isnan(v) else math.nan


def comparison_frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    cols = [*COMPARISON_COLUMNS, "tested", "ci_method", "note"]
    return pd.DataFrame(rows, columns=cols)


def effect_label(row: pd.Series, unit: str = "x") -> str:
    """``1.19x [1.05, 1.31] (noise +-8%, 6 blocks)`` for tables and figure annotations."""
    if pd.isna(row["median"]):
        return "not measured"
    nf = "" if pd.isna(row["noise_floor"]) else f"noise +-{100 * row['noise_floor']:.0f}%, "
    return (f"{row['median']:.2f}{unit} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] "
            f"({nf}{int(row['blocks'])} blocks)")


@dataclass(frozen=True)
class BlockEffects:
    """One effect per block and configuration, and the noise floor its claims are judged against.

    The chain every study runs: within-block ratios, one number per block (``per_block``), the A/A
    column's noise floor, then a comparison row per claim.
    """

    table: pd.DataFrame  # block x configuration
    noise: float

    @classmethod
    def of(cls, ratios: pd.DataFrame) -> BlockEffects:
        """From within-block ratios; the noise floor from their A/A configuration."""
        table = per_block(ratios)
        return cls(table, noise_floor(table.get(AA, pd.Series(dtype=float))))

    def __contains__(self, config: object) -> bool:
        return config in self.table

    def __getitem__(self, config: str) -> pd.Series:
        """A configuration's per-block effects (empty when it was not run)."""
        return self.table[config] if config in self.table else pd.Series(dtype=float)

    def row(self, claim: Claim, config: str, note: str = "", why_not: str = "") -> dict[str, object]:
        """The comparison row of a claim about one configuration; "not measurable here" if it was not run."""
        return comparison_row(claim, self[config], self.noise, note, measurable=config in self,
                              why_not=why_not or f"{config} was not run")


def ordering_row(claim: Claim, steps: Mapping[str, Sequence[float] | np.ndarray | pd.Series], noise: float,
                 where: str = "") -> dict[str, object]:
    """A claim of an order (a > b > c): each step a ratio per block; the weaker step is shown, and all decide.

    Held only when every step held; did not hold when one did not.
    """
    rows = {k: comparison_row(claim, v, noise) for k, v in steps.items()}
    verdicts = {r["verdict"] for r in rows.values()}
    weaker = min(rows, key=lambda k: rows[k]["reproduced"] if not pd.isna(rows[k]["reproduced"]) else np.inf)
    row = dict(rows[weaker])
    row["verdict"] = ("did not hold" if "did not hold" in verdicts else
                      "held" if verdicts == {"held"} else "not resolvable here")
    row["note"] = (f"{where}; " if where else "") + f"the weaker step is shown ({weaker}); " + ", ".join(
        f"{k}: {r['reproduced']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" for k, r in rows.items())
    return row
