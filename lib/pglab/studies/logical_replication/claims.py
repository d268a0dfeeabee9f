"""The article's claims, where each is made, and the one a first look can still act on (pglogical close to
streaming up to 8 clients).

One place for both uses: the analysis decides the claims from the run's per-block ratios, and the collect's
first look (``pglab.workloads.adaptive``) asks whether the pglogical claim is still open, and so whether to add
blocks of streaming and pglogical alone. The other claims (flatness from 4 to 32 clients, the order at the most
clients) need client counts or machines a run either has from its start or never gets, so more blocks cannot
decide them. Imported by the collect stage: claims, where they are made, and readers of a point's raw files only.

Each claim is tested where the article makes it (tests/test_claims_articles.py checks that every rule holds on
the article's own table there): pglogical is within 1-3% of streaming from 1 to 8 clients and falls behind
after (0.86 at 16, 0.63 at 32), so "close" is judged up to 8 clients; the order streaming > pglogical at the
most clients only from 16 clients, where pglogical has fallen behind; flatness from 4 clients to 16 or more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis import claims, effects
from pglab.analysis.claims import Claim
from pglab.analysis.window import measured_points
from pglab.parsers.pgbench import parse_summary
from pglab.runs.reading import read_optional

#: the system whose claim added blocks can decide, and the baseline it is compared with
CLOSE_SYSTEM = "pglogical"
CLOSE_BASELINE = "streaming"
#: the article makes "close to streaming" up to 8 clients (0.97-0.99 there; 0.86 at 16, 0.63 at 32)
CLOSE_UP_TO = 8
#: the order at the most clients is the article's from 16 clients on, where pglogical has fallen behind streaming
#: (at 8 it is within 1% of it, and the order of the two is no claim)
RANK_FROM = 16
#: flatness "beyond a few clients": from 4 clients (the smallest count from 4 up) to 16 or more, up to 32
FLAT_FROM, FLAT_REACH, FLAT_TO = 4, 16, 32
#: the systems the article ranks (the built-in one it did not run)
ARTICLE_SYSTEMS = ("streaming", "pglogical", "slony", "londiste")


def close_to_streaming(published: float = math.nan) -> Claim:
    """"pglogical is close to streaming" where the article makes it: sustainable tps within 10% of streaming's
    (``claims.MARGIN``) up to 8 clients."""
    return claims.equivalent(f"pglogical is close to streaming up to {CLOSE_UP_TO} clients", published)


def close_clients(counts: Iterable[int]) -> list[int]:
    """The run's client counts the pglogical claim is judged at: those up to ``CLOSE_UP_TO``."""
    return sorted({int(c) for c in counts if c <= CLOSE_UP_TO})


def flat_span(counts: Iterable[int]) -> tuple[int, int] | None:
    """(c_low, c_high) a flatness claim is judged over: the smallest count from 4 up and the largest up to 32, the
    largest at least 16; None when the run has no such pair (it did not reach where the article saw flatness)."""
    above = sorted({int(c) for c in counts if FLAT_FROM <= c <= FLAT_TO})
    if len(above) < 2 or above[-1] < FLAT_REACH:
        return None
    return above[0], above[-1]


def article_value(values: pd.Series, counts: Sequence[int]) -> float:
    """The article's value of a per-client-count quantity (indexed by its client counts) by the analysis's
    statistic: the geometric mean over ``counts`` of its value at each, interpolated on a log scale between the
    article's two nearest counts where it did not run that one."""
    v = values.dropna().sort_index()
    logs = np.interp(list(counts), v.index.to_numpy(dtype=float), np.log(v.to_numpy(dtype=float)))
    return float(np.exp(np.mean(logs)))


def sustainable(transactions: float, timing: dict[str, Any]) -> float:
    """The article's metric: a point's transactions over its run plus its catch-up (until the subscriber has
    applied everything)."""
    return transactions / (timing["run_s"] + timing["catchup_s"])


def sustainable_tps(d: Path, meta: dict[str, Any]) -> float:
    """:func:`sustainable` of the point in folder ``d``, from its raw output."""
    summary = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
    return sustainable(float(summary["transactions"]), meta["timing"])


def interim_per_block(run_dir: Path, baseline: str) -> pd.DataFrame:
    """block x system: the geometric mean over the client counts up to 8 (where the pglogical claim is made) of
    sustainable tps / the baseline's, and the A/A, from the points measured so far and read as the analysis
    reads them (steal-flagged points left out)."""
    pts = pd.DataFrame(measured_points(run_dir, "b[0-9]*-*", ("clients",), value=sustainable_tps),
                       columns=["block", "config", "copy", "steal_flag", "tps", "clients"])
    pts = pts[pts.clients.isin(close_clients(pts.clients))]
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
