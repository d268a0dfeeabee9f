"""The article's claims about write throughput, and which levels an open claim still needs.

One place for both uses: the analysis decides each claim from the run's per-block ratios, and the
collect's first look (``pglab.workloads.adaptive``) asks which levels to measure in the blocks it adds. Imported
by the collect stage, so it holds the claims and nothing that draws or reads files.
"""

from __future__ import annotations

import math

import pandas as pd

from pglab.analysis import claims
from pglab.analysis.claims import Claim
from pglab.analysis.effects import AA

#: level -> the claim about its write tps over ``on``'s (published value filled in from the reference)
LEVEL_CLAIMS: dict[str, Claim] = {
    "remote_write": claims.about("remote_write is about 1.2x on", math.nan, 1.2),
    "local": claims.about("local is about 1.5x on", math.nan, 1.5),
    "off": claims.threshold("off is an order of magnitude faster than on (slow disk)", math.nan, math.sqrt(10)),
}
ORDER = claims.direction("on < remote_write < local", 1.0)
#: the ordering's steps, each a ratio per block of two levels (numerator, denominator)
ORDER_STEPS = {"remote_write/on": ("remote_write", None), "local/remote_write": ("local", "remote_write")}
READS = claims.equivalent("standby read tps does not depend on primary load", math.nan)


def order_steps(per_block: pd.DataFrame) -> dict[str, pd.Series]:
    """The ordering's steps per block from ``per_block`` (block x level, ratios to the baseline)."""
    out = {}
    for name, (num, den) in ORDER_STEPS.items():
        if num in per_block and (den is None or den in per_block):
            out[name] = per_block[num] / (per_block[den] if den else 1.0)
    return out


def open_levels(per_block: pd.DataFrame, baseline: str) -> set[str]:
    """The levels an open claim still needs after the first look: each level claim not decided at 95%, and
    both levels of an ordering step not decided; with the A/A check, as the analysis decides them (a baseline
    against itself that shows an effect leaves every claim open). ``per_block``: block x level, ratios to
    ``baseline``, and the baseline's second copy over its first in column ``A/A``."""
    aa = per_block[AA] if AA in per_block else pd.Series(dtype=float)
    needed: set[str] = set()
    for level, claim in LEVEL_CLAIMS.items():
        if level in per_block and claims.is_open(claim, per_block[level], aa):
            needed.add(level)
    for name, steps in order_steps(per_block).items():
        if claims.is_open(ORDER, steps, aa):
            needed.update(x for x in ORDER_STEPS[name] if x)
    return needed - {baseline}
