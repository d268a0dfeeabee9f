"""Effects from blocks: ratios within a block, intervals over blocks, the A/A noise floor.

Why within a block: on a shared 2-core VM the same command varies by up to 2x between minutes, but two
points run back to back see nearly the same machine. So every configuration is divided by the
baseline of its own block, and only those ratios are summarised over blocks.

* The baseline of a block is the geometric mean of its two copies (the baseline runs twice in every
  block, in a random place each): dividing by the first copy alone let one copy's noise into every ratio.
* Points flagged for CPU steal (more than 20% of a point's time taken by the hypervisor) are left out
  before dividing, and counted (:func:`steal_note`): a block whose baseline copies were both flagged
  has no ratios.
* Interval of the median ratio: ``stats.median_interval`` (order statistics from 6 blocks, else the
  range, said as such); every row says which (``ci_method``) and over how many blocks (``blocks``).
* Noise floor: ``second / first`` baseline copy (A/A) would be 1 on a quiet machine; the 95th
  percentile of ``|A/A - 1|`` is how far one point moves with no effect at all (0.08 = 8%). It is
  reported beside every effect; verdicts (``claims``) use the intervals, never this floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pglab.analysis.claims import Claim, Machine, comparison_row
from pglab.analysis.stats import median_interval, method_for

AA = "A/A"  # the ``config`` label of the second baseline's ratio


def block_ratios(points: pd.DataFrame, baseline: str, by: Sequence[str] = ("group",),
                 value: str = "value") -> pd.DataFrame:
    """One row per (block, ``by``..., configuration): value / the block's baseline (both copies).

    ``points`` has one row per point: ``block``, ``config``, ``copy`` (1, or 2 for the A/A baseline), the
    ``by`` columns and ``value``. The baseline is the geometric mean of the block's copies that were
    measured and not steal-flagged; the A/A row is copy 2 / copy 1. A block without a baseline has no
    ratios (nothing to divide by); that is what ``blocks`` then counts.
    """
    keys = ["block", *by]
    points = kept(points)
    is_base = points.config == baseline
    copies = points[is_base].pivot_table(index=keys, columns="copy", values=value, aggfunc="first")
    base = np.exp(np.log(copies).mean(axis=1)).rename("baseline")
    rest = points[~is_base].copy()
    if 1 in copies and 2 in copies:
        aa = (copies[2] / copies[1]).dropna().rename("ratio").reset_index()
        aa = aa.join(copies[2].rename(value), on=keys).join(np.sqrt(copies[1] * copies[2]).rename("baseline"),
                                                               on=keys).assign(config=AA)
    else:
        aa = pd.DataFrame(columns=[*keys, "config", "ratio", value, "baseline"])
    merged = rest.join(base, on=keys, how="inner")
    merged["ratio"] = merged[value] / merged["baseline"]
    cols = [*keys, "config", "ratio", value, "baseline"]
    out = pd.concat([merged[cols], aa[cols]], ignore_index=True) if len(aa) else merged[cols]
    # reset first: a run with no baseline measured leaves the join's key levels as its (empty) index
    return out.reset_index(drop=True).sort_values([*keys, "config"], kind="stable").reset_index(drop=True)


def steal_note(points: pd.DataFrame) -> str:
    """What every claim's note says of the points left out for CPU steal ("" when none was)."""
    n = int(points.steal_flag.fillna(False).astype(bool).sum()) if "steal_flag" in points else 0
    busy = int(points.busy_flag.fillna(False).astype(bool).sum()) if "busy_flag" in points else 0
    said = [f"{n} point(s) flagged for CPU steal > 20% left out" if n else "",
            f"{busy} point(s) measured while other processes took > 10% of the CPU (twice) left out" if busy else ""]
    return "; ".join(x for x in said if x)


def kept(points: pd.DataFrame) -> pd.DataFrame:
    """The points every ratio and summary rests on: those flagged for CPU steal or another load left out."""
    for flag in ("steal_flag", "busy_flag"):
        if flag in points:
            points = points[~points[flag].fillna(False).astype(bool)]
    return points


def per_block(ratios: pd.DataFrame) -> pd.DataFrame:
    """block x configuration: the geometric mean over groups (client counts) of the within-block ratio.

    One number per block is the honest unit of replication for a claim made "over all client counts".
    """
    if ratios.empty:
        return pd.DataFrame()
    logs = ratios.assign(log=np.log(ratios.ratio)).groupby(["block", "config"]).log.mean()
    return np.exp(logs).unstack("config")


def interval(values: Sequence[float] | np.ndarray) -> tuple[float, float, float, str]:
    """(median, low, high, method) over blocks: ``stats.median_interval``."""
    return median_interval(values)


def interval_method(n: int) -> str:
    """The ``ci_method`` :func:`interval` gives ``n`` values (what a figure's caption says of its bars)."""
    return method_for(n)


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


def effect_label(row: pd.Series, unit: str = "x") -> str:
    """``1.19x [1.05, 1.31] (noise +-8%, 6 blocks)`` for tables and figure annotations."""
    if pd.isna(row["median"]):
        return "not measured"
    nf = "" if pd.isna(row["noise_floor"]) else f"noise +-{100 * row['noise_floor']:.0f}%, "
    return (f"{row['median']:.2f}{unit} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] "
            f"({nf}{int(row['blocks'])} blocks)")


@dataclass(frozen=True)
class BlockEffects:
    """One effect per block and configuration, the A/A each effect is tested against, and the noise floor
    reported beside it.

    The chain every study runs: within-block ratios, one number per block (``per_block``), the A/A
    column, then a comparison row per claim (``claims``).
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

    @property
    def aa(self) -> pd.Series:
        """The A/A per block (baseline copy 2 / copy 1): what every effect is tested against."""
        return self[AA]

    def row(self, claim: Claim, config: str, note: str = "", why_not: str = "",
            machine: Machine | None = None, adaptive: dict[str, object] | None = None) -> dict[str, object]:
        """The comparison row of a claim about one configuration; "not measurable here" if it was not run."""
        return comparison_row(claim, self[config], self.noise, note, measurable=config in self,
                              why_not=why_not or f"{config} was not run", aa=self.aa, machine=machine,
                              adaptive=adaptive)
