"""The article's claims about write throughput, where they are judged, and which levels an open claim still needs.

One place for both uses: the analysis decides each claim from the run's per-block ratios, and the collect's
first look (``pglab.workloads.adaptive``) asks which levels to measure in the blocks it adds. Imported
by the collect stage, so it holds the claims and nothing that draws or reads files.

Every claim is tested as the article made it: at 10 to 100 clients (its table's range; ``judged_clients``),
against the article's value computed by the statistic the analysis computes (the geometric mean over those
client counts of tps(level) / tps(on); ``article_value``), each size claim centred on the article's table, not
its words ("local is about 1.5x" in its text, 1.38x over its table).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from pglab.analysis import claims
from pglab.analysis.claims import Claim
from pglab.analysis.effects import AA

#: the article's client counts: 10 to 100 (step 10); the run's counts in this range are the ones judged
ARTICLE_CLIENTS = (10, 100)
#: the article's ratio to ``on`` over its 10-100 clients: the geometric mean over its ten client counts of
#: tps(level) / tps(on) (data/reference/synchronous_commit.csv; tests/test_claims_articles.py checks them), what
#: the size claims are centred on
ARTICLE_RATIO = {"remote_write": 1.1886, "local": 1.3835, "off": 23.2001}

#: the points of the article's table the emulation is calibrated on (``pglab.workloads.calibrate``), knob ->
#: (level, clients, tps): the CPU on ``off`` at 10 clients (CPU-bound: no commit waits for a flush), then both disks'
#: flush on ``local`` at 10 clients (flush-bound: a commit waits for the primary's own flush, not the standby's).
#: Neither is a claim's ratio: ``on`` (what waiting for the standby costs) and ``remote_write`` are predictions at
#: every client count, as is every level at the other counts (data/reference/synchronous_commit.csv;
#: tests/test_fidelity.py). The flush is calibrated only with one flush level (no ladder).
CALIBRATION = {"cpu": ("off", 10, 6247.446356), "flush": ("local", 10, 351.743383)}

#: level -> the claim about its write tps over ``on``'s (published value filled in from the reference)
LEVEL_CLAIMS: dict[str, Claim] = {
    "remote_write": claims.about("remote_write is about 1.2x on", math.nan, ARTICLE_RATIO["remote_write"]),
    "local": claims.about("local is about 1.4x on", math.nan, ARTICLE_RATIO["local"]),
    "off": claims.threshold("off is an order of magnitude faster than on (slow disk)", math.nan, math.sqrt(10)),
}
#: the article's words where its table says otherwise (said in the note)
WORDS = {"local": "the article's text says about 1.5x; its table gives 1.38x over 10-100 clients"}
ORDER = claims.direction("on < remote_write < local", 1.0)
#: the ordering's steps, each a ratio per block of two levels (numerator, denominator)
ORDER_STEPS = {"remote_write/on": ("remote_write", None), "local/remote_write": ("local", "remote_write")}
READS = claims.equivalent("standby read tps does not depend on primary load", math.nan)


def judged_clients(counts: Iterable[int]) -> tuple[list[int], str]:
    """(the client counts a level claim is judged at, words for its note): the run's counts within the article's
    10-100; all of them when none is (said so: the article's value is then over its whole range)."""
    run = sorted({int(c) for c in counts})
    lo, hi = ARTICLE_CLIENTS
    inside = [c for c in run if lo <= c <= hi]
    if inside or not run:
        return inside, f"at {', '.join(map(str, inside))} clients" if inside else ""
    return run, (f"at {', '.join(map(str, run))} clients: none in the article's range ({lo}-{hi} clients), so all "
                 f"of the run's, against the article's value over its {lo}-{hi}")


def judged_ratios(ratios: pd.DataFrame) -> pd.DataFrame:
    """The within-block ratios (a ``clients`` column) at the counts the claims are judged at: what the analysis
    and the first look both summarise per block."""
    if ratios.empty:
        return ratios
    counts, _ = judged_clients(ratios.clients.dropna())
    return ratios[ratios.clients.isin(counts)]


def article_value(ratio: pd.Series, counts: Sequence[int]) -> float:
    """The article's value of a ratio (indexed by its client counts) by the analysis's statistic: the geometric
    mean over ``counts`` of the ratio at each count, interpolated on a log scale between the article's two
    nearest counts where it did not run that one; over its whole range when no count of ``counts`` is in it."""
    r = ratio.dropna().sort_index()
    lo, hi = ARTICLE_CLIENTS
    inside = [c for c in counts if lo <= c <= hi] or list(r.index)
    logs = np.interp(inside, r.index.to_numpy(dtype=float), np.log(r.to_numpy(dtype=float)))
    return float(np.exp(np.mean(logs)))


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
    ``baseline`` over the judged client counts (``judged_ratios``), and the baseline's second copy over its
    first in column ``A/A``."""
    aa = per_block[AA] if AA in per_block else pd.Series(dtype=float)
    needed: set[str] = set()
    for level, claim in LEVEL_CLAIMS.items():
        if level in per_block and claims.is_open(claim, per_block[level], aa):
            needed.add(level)
    for name, steps in order_steps(per_block).items():
        if claims.is_open(ORDER, steps, aa):
            needed.update(x for x in ORDER_STEPS[name] if x)
    return needed - {baseline}
