"""The verdicts of a comparison.csv recomputed from its own columns under the rules docs pages state.

What a reader (or a held-out check) does to trust a verdict without pglab's code: the interval must lie
strictly inside (bound_low, bound_high) for "held" and strictly beyond one of them for "did not hold";
no verdict from fewer than 6 blocks (over runs: 3 runs), nor while the A/A interval excludes 1. Orderings are
recomputed from their steps' verdicts in the note.
"""

from __future__ import annotations

import math
import re

import pandas as pd

MIN_BLOCKS = 6
MIN_RUNS = 3


def recomputed(row: pd.Series) -> str | None:
    """The verdict the stated rules give ``row``; None for "not measurable here" (decided by what ran)."""
    if row.verdict == "not measurable here":
        return None
    if str(row.rule).startswith("held if every step holds"):
        steps = re.findall(r"\[[^\]]*\] (held|did not hold|not resolvable here)", str(row.note))
        assert steps, row.note
        return "did not hold" if "did not hold" in steps else "held" if set(steps) == {"held"} else \
            "not resolvable here"
    low = -math.inf if pd.isna(row.bound_low) else row.bound_low
    high = math.inf if pd.isna(row.bound_high) else row.bound_high
    if low < row.ci_low and row.ci_high < high:
        v = "held"
    elif row.ci_high < low or row.ci_low > high:
        v = "did not hold"
    else:
        v = "not resolvable here"
    if row.get("ci_method") == "t over runs":  # a verdict over runs: 3 runs, not 6 blocks (docs/measurement.md)
        few, biased = row.runs < MIN_RUNS, row.aa_blocks >= MIN_RUNS and (row.aa_low > 1 or row.aa_high < 1)
    else:
        few, biased = row.blocks < MIN_BLOCKS, row.aa_blocks >= MIN_BLOCKS and (row.aa_low > 1 or row.aa_high < 1)
    return "not resolvable here" if v != "not resolvable here" and (few or biased) else v


def mismatches(comparison: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(claim, verdict shown, verdict recomputed) for every row where they differ."""
    out = []
    for _, row in comparison.iterrows():
        v = recomputed(row)
        if v is not None and v != row.verdict:
            out.append((row.claim, row.verdict, v))
    return out
