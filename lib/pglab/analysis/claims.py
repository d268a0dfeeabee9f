"""An article's claim, the rule that answers it, and the verdict: one place for what every study decides.

Why rules per kind of claim: "local is about 1.5x on" is a claim of a size, "FDW_external is no slower"
one of non-inferiority, "on < remote_write" one of a direction. Testing them all for direction, or
with margins that widen with the noise, answered a different question than the article asked.

The effect of a claim is one number per block (a within-block ratio; ``effects``); its 95% interval
is the distribution-free interval of the median over blocks (``stats``). Verdicts, with [lo, hi]
that interval:

* ``greater`` (value v): held when lo > v, did not hold when hi < v. A direction claim has v = 1;
  a threshold claim ("an order of magnitude": v = sqrt(10), nearer 10x than 1x on a log scale) its v.
* ``less`` (value v): the mirror.
* ``within`` [a, b]: held when a < lo and hi < b, did not hold when hi < a or lo > b.
  "About X" is within X / f .. X * f with f = 1 + ``ABOUT`` (narrower for an X near 1: :func:`about`);
  "no difference", "close to", "tie" within 1 / (1 + m) .. 1 + m with m = ``MARGIN``. The margins are
  fixed and written in each study's docs page: they never widen with the noise.
* Otherwise "not resolvable here". No verdict from fewer than ``MIN_BLOCKS`` blocks (the fewest that
  give a 95% interval), and none while the run's A/A (baseline / baseline, per block) has an interval
  that excludes 1: the effects are tested against what baseline vs baseline gives, and a design in which
  the baseline differs from itself cannot tell an effect from its own bias.
* "not measurable here": the claim needs what the run did not have (separate machines, a level not
  run, a cloud service); the row says what would answer it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binom

from pglab.analysis.stats import (
    CONFIDENCE,
    MIN_ORDER_STATISTIC,
    coverage,
    median_interval,
    order_coverage,
    order_k,
)
from pglab.runs.record import under_way

VERDICTS = ("held", "did not hold", "not resolvable here", "not measurable here")
COMPARISON_COLUMNS = ["claim", "published", "reproduced", "ci_low", "ci_high", "noise_floor", "blocks", "verdict"]
EXTRA_COLUMNS = ["rule", "bound_low", "bound_high", "ci_method", "confidence", "coverage", "aa_median", "aa_low",
                 "aa_high", "aa_blocks", "depends_on", "here", "article", "stopped", "note", "here_verdict",
                 "block_values", "aa_values", "emulated"]
MIN_BLOCKS = MIN_ORDER_STATISTIC  # 6: the fewest blocks whose interval of the median covers 95%
MARGIN = 0.10  # "no difference", "close to", "no slower": a 10% difference is the least a DBA would act on
ABOUT = 0.20  # "about X": X within a factor 1.2 either way (1.5x: 1.25x..1.8x)


@dataclass(frozen=True)
class Claim:
    """One claim of an article about a ratio, and its rule (see the module doc)."""

    text: str
    published: float
    rule: str = "greater"  # greater | less | within
    value: float = 1.0  # greater / less: the bound; within: the lower end
    upper: float = math.nan  # within: the upper end
    kind: str = "direction"  # how the rule is said: direction, threshold, size, equivalence, bound, range

    @property
    def tested(self) -> str:
        """The rule in words, with its numbers: what the report and the docs print beside the verdict."""
        v, u = f"{self.value:.4g}", f"{self.upper:.4g}"
        if self.rule == "within":
            return f"held if the interval lies inside ({v}, {u}) ({self.kind}); did not hold if it lies outside"
        side, other = ("above", "below") if self.rule == "greater" else ("below", "above")
        return f"held if the interval lies {side} {v} ({self.kind}); did not hold if it lies {other} it"


def direction(text: str, published: float, faster: bool = True) -> Claim:
    """The ratio is above 1 (``faster``) or below it."""
    return Claim(text, published, "greater" if faster else "less", 1.0, kind="direction")


def threshold(text: str, published: float, bound: float, above: bool = True) -> Claim:
    """The ratio is above (or below) a stated bound: "an order of magnitude", "flat"."""
    return Claim(text, published, "greater" if above else "less", bound, kind="threshold")


def about(text: str, published: float, size: float, tolerance: float = ABOUT) -> Claim:
    """The ratio is ``size`` within a factor f either way: f = 1 + ``tolerance``, or less for a size near 1
    (at most the square root of the size's distance from 1, so that the band never holds "no effect":
    "about 1.2x" is 1.095x..1.31x, not 1.0x..1.44x)."""
    f = min(1 + tolerance, math.sqrt(max(size, 1 / size)))
    return Claim(text, published, "within", size / f, size * f, kind="size")


def equivalent(text: str, published: float, margin: float = MARGIN) -> Claim:
    """No difference: the ratio within a factor 1 + ``margin`` of 1."""
    return Claim(text, published, "within", 1 / (1 + margin), 1 + margin, kind="equivalence")


def no_worse(text: str, published: float, higher_is_better: bool = True, margin: float = MARGIN) -> Claim:
    """Non-inferiority: not lower than 1 / (1 + margin) (or not higher than 1 + margin)."""
    if higher_is_better:
        return Claim(text, published, "greater", 1 / (1 + margin), kind="bound")
    return Claim(text, published, "less", 1 + margin, kind="bound")


def within(text: str, published: float, low: float, high: float) -> Claim:
    return Claim(text, published, "within", low, high, kind="range")


def last_look_confidence(first: int, n: int, alpha: float = 1 - CONFIDENCE) -> float:
    """The confidence of a verdict's interval over ``n`` blocks at the last of two looks (``pglab.workloads.adaptive``):
    that of the narrowest order-statistic interval for which the chance that the first look's 95% interval of
    ``first`` blocks or this one misses the median is at most ``alpha``.

    Why exact rather than split: whether either interval misses depends only on how many blocks fall below the true
    median, a binomial walk shared by both looks (the first ``first`` blocks are among the ``n``). The two misses
    are correlated, so the chance of either is computed, not bounded by their sum (Bonferroni's 98.1% at any ``n``
    after a first look at 6). At 10, 13, 16 and 19 blocks this gives one order statistic more on each side.
    It assumes ``n`` does not depend on this claim's values after the first look (``adaptive`` stops on
    ``max_blocks`` or the time budget only)."""
    if first < MIN_BLOCKS or n <= first:  # the first look decided nothing (a verdict needs MIN_BLOCKS), or is this one
        return 1 - alpha
    k1, best = max(order_k(first, 1 - alpha), 0), 0
    for k in range(0, (n + 1) // 2):
        if _either_misses(first, k1, n, k) > alpha:
            break
        best = k
    return order_coverage(n, best)


def _either_misses(first: int, k1: int, n: int, k: int) -> float:
    """P(the first look's interval (k1) misses, or the last look's (k) does): the first ``first`` of the ``n``
    values below the median are S ~ Binomial(first, 1/2), the later ones T ~ Binomial(n - first, 1/2)."""
    s = np.arange(first + 1)
    t = np.arange(n - first + 1)
    joint = np.outer(binom.pmf(s, first, 0.5), binom.pmf(t, n - first, 0.5))
    total = s[:, None] + t[None, :]
    first_misses = ((s <= k1) | (s >= first - k1))[:, None]
    last_misses = (total <= k) | (total >= n - k)
    return float(joint[first_misses | last_misses].sum())


#: why a first look's adding stopped (``pglab.workloads.adaptive.STOPPED`` writes these into the record; read here
#: for records that lack them: a run killed while adding, older code)
STOPPED = {"decided": "every claim was decided or needs nothing more at the first look",
           "max_blocks": "max_blocks reached", "budget": "the next block would have ended past budget_s",
           "interrupted": "the run was interrupted (Ctrl-C, SIGTERM) while adding blocks",
           "failed": "the run failed while adding blocks"}
#: a claim still open when the adding stopped: what ended it (blocks were added for the claim / none were)
STILL_OPEN = {"budget": ("the budget ended the adding", "the budget ended the adding before a block was added"),
              "max_blocks": ("max_blocks ended the adding", "max_blocks left no block to add"),
              "interrupted": ("the run was interrupted while adding", "the run was interrupted before an added "
                              "block finished"),
              "failed": ("the run failed while adding", "the run failed before an added block finished"),
              "decided": ("the adding ended", "the first look found no block to add for it")}


def first_look(manifest: Mapping[str, object]) -> dict[str, object] | None:
    """A run's first-look record (``plan.adaptive``) as the analysis reads it, whoever wrote it (None: a fixed
    plan). ``read_look`` with the run's outcome: a record left ``running`` was cut short by how the run ended."""
    plan = manifest.get("plan")
    record = plan.get("adaptive") if isinstance(plan, Mapping) else None
    if not isinstance(record, Mapping) or not record:
        return None
    return read_look(record, str(manifest.get("outcome") or manifest.get("status") or ""))


def read_look(record: Mapping[str, object], outcome: str = "") -> dict[str, object]:
    """The record with ``stopped`` one of ``STOPPED`` and ``blocks_added`` counting finished blocks only.

    Why: a run that ended while a block was under way (killed, or by older code that saved only before each
    block) left ``stopped: running`` and counted that block as added; its ``outcome`` says how it ended
    (``failed``, or else interrupted). An older record's missing ``blocks_finished``/``cut_short`` are derived
    (``runs.record.under_way``: older code counted the block under way as added)."""
    out = dict(record)
    first, added = _count(out, "first_look"), _count(out, "blocks_added")
    stopped = out.get("stopped")
    if stopped not in STOPPED:
        known = {why: key for key, why in STOPPED.items()}
        stopped = known.get(str(out.get("why"))) if stopped is None else None
        if stopped is None:  # ended while a block ran
            stopped = "failed" if outcome == "failed" else "interrupted"
            added, out["cut_short"] = under_way(out, first, added)
        out["why"] = STOPPED[stopped]
    out.update(stopped=stopped, blocks_planned=first, blocks_added=added, blocks_finished=first + added)
    out.setdefault("why", STOPPED[stopped])
    out.setdefault("cut_short", None)
    return out


def _count(record: Mapping[str, object], key: str) -> int:
    """A whole number of blocks from a run's record; a manifest from elsewhere may hold anything there."""
    v = record.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise ValueError(f"plan.adaptive.{key}: not a number of blocks ({str(v)[:60]!r})")
    return int(v)


def look_of(blocks: int, adaptive: Mapping[str, object] | None, still_open: bool = False) -> tuple[float, str]:
    """(confidence, why the claim got ``blocks`` blocks) under a run's ``plan.adaptive`` record (None: a fixed
    plan). A claim with no more blocks than the first look was decided there at 95%, or (``still_open``: its
    verdict is "not resolvable here") stayed open, and the words then say what ended the adding: never
    "decided there" for a claim the budget, max_blocks, an interrupt or a failure left open."""
    if not adaptive:
        return CONFIDENCE, f"fixed plan: {blocks} blocks" if blocks else ""
    look = read_look(adaptive)
    first, added, key = _count(look, "first_look"), _count(look, "blocks_added"), str(look["stopped"])
    stop = f"stopped: {key} ({look['why']})"
    if blocks <= first:
        if not still_open:
            return CONFIDENCE, f"first look at {first} blocks: decided there, or needing no more blocks; {stop}"
        lead = STILL_OPEN[key][1] if added == 0 else "no added block measured it"
        return CONFIDENCE, f"still open: {lead} (first look at {first} blocks; {added} blocks added; {stop})"
    cut = look.get("cut_short")
    more = (f"{blocks - first} blocks added" if not cut or blocks - first <= added else
            f"{blocks - first} blocks added, block {cut} cut short (only its finished points count)")
    why = f"open at the first look ({first} blocks); {more}, then {look['why']} (stopped: {key})"
    return last_look_confidence(first, blocks), (f"still open: {STILL_OPEN[key][0]}; {why}" if still_open else why)


def bounds(claim: Claim) -> tuple[float, float]:
    """(low, high) of the region the interval must lie strictly inside for "held" (an open side is infinite);
    "did not hold" when it lies strictly beyond one of them. What comparison.csv records as bound_low/high."""
    if claim.rule == "greater":
        return claim.value, math.inf
    if claim.rule == "less":
        return -math.inf, claim.value
    if claim.rule == "within":
        return claim.value, claim.upper
    raise ValueError(f"rule must be greater, less or within, not {claim.rule!r}")


def verdict(low: float, high: float, claim: Claim) -> str:
    """The verdict of ``claim`` from the interval [low, high] of its effect (the interval alone decides)."""
    if math.isnan(low) or math.isnan(high):
        return "not measurable here"
    a, b = bounds(claim)
    if a < low and high < b:
        return "held"
    return "did not hold" if high < a or low > b else "not resolvable here"


@dataclass(frozen=True)
class Machine:
    """The machine property a claim's answer depends on: measured here, and the article's."""

    property: str  # "disk flush rate"
    here: str  # "4,167 fdatasync/s (pg_test_fsync)"
    article: str = ""  # "a SATA hard disk: about 120 flushes/s"
    answer: str = ""  # what would answer the claim where this machine cannot
    differs: bool = False  # this machine is unlike the article's in a way the claim depends on
    # the article's property imitated here (pglab.nodes.emulation), as measured: a verdict then says it is made
    # under it, and is counted apart from the verdicts on this machine as it is
    emulated: str = ""


def aa_check(aa: Sequence[float] | np.ndarray | pd.Series) -> tuple[tuple[float, float, float, int], bool]:
    """The A/A's (median, low, high, blocks), and whether its 95% interval excludes 1 (then no verdict)."""
    x = np.asarray(aa, dtype=float)
    x = x[~np.isnan(x)]
    med, lo, hi, method = median_interval(x)
    lo, hi = _r(lo), _r(hi)
    return (_r(med), lo, hi, len(x)), method == "order-statistic" and (lo > 1 or hi < 1)


def comparison_row(claim: Claim, ratios: Sequence[float] | np.ndarray | pd.Series, noise: float = math.nan,
                   note: str = "", measurable: bool = True, why_not: str = "", *,
                   aa: Sequence[float] | np.ndarray | pd.Series = (), machine: Machine | None = None,
                   adaptive: Mapping[str, object] | None = None) -> dict[str, object]:
    """A row of ``comparison.csv``: the claim, its effect per block summarised, the rule and the verdict.
    ``adaptive``: the run's ``plan.adaptive`` record, which sets the interval's confidence (``look_of``)."""
    x = np.asarray(ratios, dtype=float)
    x = x[~np.isnan(x)]
    confidence, _ = look_of(len(x), adaptive)
    med, lo, hi, method = median_interval(x, confidence)
    med, lo, hi = _r(med), _r(lo), _r(hi)  # decided on the numbers comparison.csv shows, so it can be recomputed
    v = verdict(lo, hi, claim) if len(x) >= 2 else "not resolvable here" if len(x) else "not measurable here"
    here_v = ""
    (aa_med, aa_lo, aa_hi, aa_n), biased = aa_check(aa)
    notes = [note]
    if measurable and len(x) and v in ("held", "did not hold"):
        if len(x) < MIN_BLOCKS:
            v = "not resolvable here"
            notes.insert(0, f"{len(x)} blocks: a verdict needs {MIN_BLOCKS}, the fewest that give a 95% interval")
        elif biased:
            v = "not resolvable here"
            notes.insert(0, f"baseline / baseline (A/A) is {aa_med:.3g} [{aa_lo:.3g}, {aa_hi:.3g}]: its interval "
                         "excludes 1, so the design is biased")
    if not measurable:
        v = "not measurable here"
        notes.insert(0, why_not)
        if machine and machine.answer:
            notes.insert(1, f"answered by {machine.answer}")
    elif not len(x):
        notes.insert(0, "nothing measured for this claim")
    elif machine and machine.differs:  # the policy for every study: judged where the machine is like the article's
        here_v, v = v, "not measurable here"
        notes.insert(0, differs_note(machine, here_v))
    low, high = bounds(claim)
    stopped = look_of(len(x), adaptive, still_open=(here_v or v) == "not resolvable here")[1]
    return {"claim": claim.text, "published": _r(claim.published), "reproduced": med, "ci_low": lo,
            "ci_high": hi, "noise_floor": _r(noise), "blocks": int(len(x)), "verdict": v, "rule": claim.tested,
            "bound_low": _r(low) if math.isfinite(low) else math.nan,
            "bound_high": _r(high) if math.isfinite(high) else math.nan, "ci_method": method,
            "confidence": _r(confidence), "coverage": _r(coverage(method, len(x), confidence)), "aa_median": aa_med,
            "aa_low": aa_lo, "aa_high": aa_hi, "aa_blocks": aa_n, "depends_on": machine.property if machine else "",
            "here": machine.here if machine else "", "article": machine.article if machine else "",
            "stopped": stopped if measurable else "", "note": "; ".join(s for s in notes if s), "here_verdict": here_v,
            "block_values": values_text(x), "aa_values": values_text(np.asarray(aa, dtype=float)),
            "emulated": machine.emulated if machine else ""}


def differs_note(machine: Machine, here_verdict: str) -> str:
    """Why a claim is not judged on a machine unlike the article's in what it depends on (one policy for every study,
    docs/measurement.md): the verdict the interval gives here is kept (``here_verdict``), never counted as one."""
    return (f"not judged: this machine differs from the article's in {machine.property} ({machine.here}; the article: "
            f"{machine.article}); on this machine the interval gives \"{here_verdict}\", counted apart"
            + (f"; answered by {machine.answer}" if machine.answer else ""))


def values_text(values: np.ndarray) -> str:
    """Per-block values as comparison.csv keeps them (space-separated, 6 significant digits, NaN dropped): what a
    verdict over several runs (``over_runs``) and anyone recomputing a verdict read back."""
    return " ".join(f"{v:.6g}" for v in values if not math.isnan(v))


def _r(v: float) -> float:
    return round(float(v), 4) if not pd.isna(v) else math.nan


def is_open(claim: Claim, values: Sequence[float] | np.ndarray | pd.Series,
            aa: Sequence[float] | np.ndarray | pd.Series = ()) -> bool:
    """Whether a first look (``pglab.workloads.adaptive``) finds ``claim`` still "not resolvable here" at 95%, decided
    by the analysis's own rule and A/A check from the values so far (NaN dropped); no values: nothing to add
    blocks for."""
    x = np.asarray(values, dtype=float)
    a = np.asarray(aa, dtype=float)
    x, a = x[~np.isnan(x)], a[~np.isnan(a)]
    return bool(len(x)) and comparison_row(claim, x, aa=a)["verdict"] == "not resolvable here"


def comparison_frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=[*COMPARISON_COLUMNS, *EXTRA_COLUMNS])


def ordering_row(claim: Claim, steps: Mapping[str, Sequence[float] | np.ndarray | pd.Series], noise: float = math.nan,
                 where: str = "", **kw: object) -> dict[str, object]:
    """A claim of an order (a > b > c): each step a direction per block; the weaker step is shown.

    Held only when every step held; did not hold when one did not.
    """
    rows = {k: comparison_row(claim, v, noise, **kw) for k, v in steps.items()}  # type: ignore[arg-type]
    verdicts = {r["verdict"] for r in rows.values()}
    weaker = min(rows, key=lambda k: rows[k]["reproduced"] if not pd.isna(rows[k]["reproduced"]) else np.inf)
    row = dict(rows[weaker])
    row["verdict"] = order_verdict(verdicts)
    here = {str(r["here_verdict"]) for r in rows.values() if r["here_verdict"]}
    row["here_verdict"] = order_verdict(here) if here else ""
    steps_words = ", ".join(f"{k}: {r['reproduced']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}] {r['verdict']}"
                            for k, r in rows.items())
    same = next((r for r in rows.values() if r["verdict"] == row["verdict"]), row)
    row["stopped"] = same["stopped"]  # a step that left the ordering open says so, not a decided weaker step
    row["rule"] = "held if every step holds (each: " + claim.tested + "); did not hold if one step does not"
    row["note"] = "; ".join(s for s in (where, f"the weaker step is shown ({weaker})", steps_words,
                                        str(rows[weaker]["note"])) if s)
    return row



def order_verdict(verdicts: set[str]) -> str:
    """An ordering's verdict from its steps': not measurable if a step is not, did not hold if one did not, held
    if every step held, else open."""
    if "not measurable here" in verdicts:
        return "not measurable here"
    return "did not hold" if "did not hold" in verdicts else "held" if verdicts == {"held"} else "not resolvable here"
