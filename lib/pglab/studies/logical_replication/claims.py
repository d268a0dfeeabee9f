"""The claim a first look can still act on (pglogical close to streaming), and the value every claim is about.

One place for both uses: the analysis decides the claim from the run's per-block ratios, and the collect's
first look (``pglab.workloads.adaptive``) asks whether it is still open, and so whether to add blocks of
streaming and pglogical alone. The other claims of the article (flatness from 4 to 32 clients, the order at
the most clients) need client counts or machines a run either has from its start or never gets, so more
blocks cannot decide them. Imported by the collect stage: claims and readers of a point's raw files only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import claims, effects
from pglab.analysis.claims import Claim
from pglab.analysis.window import measured_points
from pglab.parsers.pgbench import parse_summary
from pglab.runs.reading import read_optional

#: the system whose claim added blocks can decide, and the baseline it is compared with
CLOSE_SYSTEM = "pglogical"
CLOSE_BASELINE = "streaming"


def close_to_streaming(published: float = math.nan) -> Claim:
    """"pglogical is close to streaming": sustainable tps within 10% of streaming's (``claims.MARGIN``)."""
    return claims.equivalent("pglogical is close to streaming", published)


def sustainable(transactions: float, timing: dict[str, Any]) -> float:
    """The article's metric: a point's transactions over its run plus its catch-up (until the subscriber has
    applied everything)."""
    return transactions / (timing["run_s"] + timing["catchup_s"])


def sustainable_tps(d: Path, meta: dict[str, Any]) -> float:
    """:func:`sustainable` of the point in folder ``d``, from its raw output."""
    summary = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
    return sustainable(float(summary["transactions"]), meta["timing"])


def interim_per_block(run_dir: Path, baseline: str) -> pd.DataFrame:
    """block x system: the geometric mean over client counts of sustainable tps / the baseline's, and the A/A,
    from the points measured so far and read as the analysis reads them (steal-flagged points left out)."""
    pts = pd.DataFrame(measured_points(run_dir, "b[0-9]*-*", ("clients",), value=sustainable_tps),
                       columns=["block", "config", "copy", "steal_flag", "tps", "clients"])
    if pts.empty:
        return pd.DataFrame()
    return effects.per_block(effects.block_ratios(pts, baseline, by=["clients"], value="tps"))


def open_systems(per_block: pd.DataFrame, baseline: str) -> set[str]:
    """The first look: {pglogical} while "close to streaming" is neither held nor refuted at 95% (with the
    analysis's A/A check), else nothing. A run whose baseline is not streaming cannot answer it."""
    if baseline != CLOSE_BASELINE or CLOSE_SYSTEM not in per_block:
        return set()
    aa = per_block[effects.AA] if effects.AA in per_block else ()
    return {CLOSE_SYSTEM} if claims.is_open(close_to_streaming(), per_block[CLOSE_SYSTEM], aa) else set()
