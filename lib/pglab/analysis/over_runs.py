"""A verdict over several independent runs: the run, not the block, is the unit a verdict rests on.

Why: on a shared machine a run is itself a random draw. Its servers, data, caches and neighbours are new
each time, and the between-run spread of a claim's ratio was measured as large as the block-to-block
spread within a run (intra-class correlation up to 0.6). An interval over the blocks of one run says
nothing of that; simulated with the measured components, one run's "95%" interval covered the machine's
value 56-82% of the time, and more blocks made it worse. So:

* Each run's median of the claim's per-block values (its ``reproduced``) is one value; the interval is a
  Student t interval on the logs of those R medians, R - 1 degrees of freedom (``log_t_interval``). The
  reproduced value is their geometric mean.
* The claim's rule (its ``bound_low`` / ``bound_high`` from comparison.csv) decides as for one run.
  Decided only from 3 runs on, and only when leaving any one run out gives the same verdict
  (leave-one-out): a verdict that one run carries is not published.
* The A/A (baseline / baseline) is judged the same way over the runs' A/A medians: while its interval
  excludes 1 no claim is decided.
* A claim that any run could not measure (a machine unlike the article's, a level not run) is not
  measurable over the runs either; its value over the runs is still given.
* The spread is split per claim: ``within_sd`` (pooled SD of the log block values around each run's mean),
  ``between_sd`` (the runs' means beyond what within-run noise explains, one-way ANOVA) and ``icc``.
* An open verdict says what would settle it (``settle``): about how many runs, from the measured spread.
* One run alone keeps its own row, and says that its interval is within-run only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
MIN_RUNS = 3  # the fewest runs a verdict is decided from: with 2, leaving one out leaves no interval
MAX_SETTLE = 100  # beyond this many runs, "more runs" is no answer
POWER = 0.8  # runs_to_settle: the share of campaigns of that many runs that decide, if the runs stay as measured
METHOD = "t over runs"
RUNS_CSV = "runs.csv"  # beside comparison.csv: one row per claim and run (``runs_table``)
RUN_COLUMNS = ["runs", "run_ids", "run_values", "run_verdicts", "within_sd", "between_sd", "icc", "loo", "settle",
               "left_out", "scope"]
#: how often a 95% interval over one sitting's 5 runs covers the machine's value when sittings differ as much as runs
#: do, and its lowest and highest at the sitting effects the reference ledger shows (tests/test_run_coverage.py)
ONE_SITTING_COVERAGE, MEASURED_ONE_SITTING = 0.68, (0.31, 0.95)
ONE_RUN = ("one run: its interval is over the blocks of that run only, and another run on the same machine may differ "
           "as much as its blocks do (a campaign of 5 runs, `runs: 5`, decides over runs)")


def log_t_interval(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(geometric mean, low, high): Student's t interval of the mean of log(values), back-transformed.
    NaN and values <= 0 are dropped; fewer than 2 values give NaN bounds."""
    x = np.asarray(values, dtype=float)
    x = np.log(x[np.isfinite(x) & (x > 0)])
    if len(x) < 2:
        return (math.exp(float(x.mean())) if len(x) else math.nan), math.nan, math.nan
    m = float(x.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def rule_verdict(low: float, high: float, bound_low: float, bound_high: float) -> str:
    """``claims.verdict`` from the bounds comparison.csv records (NaN: an open side)."""
    if math.isnan(low) or math.isnan(high) or (pd.isna(bound_low) and pd.isna(bound_high)):
        return "not resolvable here"  # no interval, or no rule's region known (a ledger row of older code)
    a = -math.inf if pd.isna(bound_low) else float(bound_low)
    b = math.inf if pd.isna(bound_high) else float(bound_high)
    if a < low and high < b:
        return "held"
    return "did not hold" if high < a or low > b else "not resolvable here"


def sitting_means(values: Sequence[float], sittings: Sequence[str]) -> dict[str, list[float]]:
    """sitting -> its runs' measured values (in order of first appearance)."""
    out: dict[str, list[float]] = {}
    for v, g in zip(values, sittings, strict=True):
        if math.isfinite(v) and v > 0:
            out.setdefault(g, []).append(v)
    return out


def decide_sittings(values: Sequence[float], sittings: Sequence[str], bound_low: float, bound_high: float,
                    confidence: float = CONFIDENCE) -> tuple[str, tuple[float, float, float], list[int]]:
    """``decide`` with two levels, sitting and run: the t interval over the sittings' geometric means (S - 1
    degrees of freedom; exact for normal sitting and run effects with equal runs a sitting). Published only when
    every sitting measured ``MIN_RUNS`` runs and, from 3 sittings, leaving any one sitting out keeps the verdict;
    the runs returned are those of a sitting whose leaving-out changes it."""
    per = sitting_means(values, sittings)
    means = [math.exp(float(np.mean(np.log(v)))) for v in per.values()]
    centre, lo, hi = (round(v, 4) if not math.isnan(v) else v for v in log_t_interval(means, confidence))
    v = rule_verdict(lo, hi, bound_low, bound_high)
    if v == "not resolvable here" or min(len(x) for x in per.values()) < MIN_RUNS:
        return "not resolvable here", (centre, lo, hi), []
    changed = []
    for i, g in enumerate(per if len(means) >= 3 else []):
        _, l2, h2 = log_t_interval([m for j, m in enumerate(means) if j != i], confidence)
        if rule_verdict(round(l2, 4), round(h2, 4), bound_low, bound_high) != v:
            changed += [k for k, s in enumerate(sittings) if s == g]
    return ("not resolvable here" if changed else v), (centre, lo, hi), changed


def decide(values: Sequence[float], bound_low: float, bound_high: float, confidence: float = CONFIDENCE,
           sittings: Sequence[str] | None = None) -> tuple[str, tuple[float, float, float], list[int]]:
    """(verdict, (centre, low, high), the runs whose leaving-out changes it) for one claim's run medians; over two
    levels (``decide_sittings``) when ``sittings`` (one label a value) name two or more with measured runs."""
    if sittings is not None and len(sitting_means(values, sittings)) >= 2:
        return decide_sittings(values, sittings, bound_low, bound_high, confidence)
    centre, lo, hi = (round(v, 4) if not math.isnan(v) else v for v in log_t_interval(values, confidence))
    v = rule_verdict(lo, hi, bound_low, bound_high)
    x = np.asarray(values, dtype=float)
    n = int(np.sum(np.isfinite(x) & (x > 0)))  # the runs the interval is over
    if v == "not resolvable here" or n < MIN_RUNS:
        return "not resolvable here", (centre, lo, hi), []
    changed = []
    for i in range(len(values)):
        rest = [x for j, x in enumerate(values) if j != i]
        _, l2, h2 = log_t_interval(rest, confidence)
        if rule_verdict(round(l2, 4), round(h2, 4), bound_low, bound_high) != v:
            changed.append(i)
    return ("not resolvable here" if changed else v), (centre, lo, hi), changed

# -- the same, for many campaigns at once (the coverage test and bench/allocation.py simulate thousands) --------
HELD_CODE, NOT_HELD_CODE, OPEN_CODE = 1, -1, 0  # verdicts as numbers, for arrays
CODES = {"held": HELD_CODE, "did not hold": NOT_HELD_CODE, "not resolvable here": OPEN_CODE}


def log_t_intervals(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``log_t_interval`` of every row of ``values`` (campaigns x runs, all positive) at once."""
    x = np.log(values)
    n = x.shape[1]
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) / math.sqrt(n) * x.std(axis=1, ddof=1)
    m = x.mean(axis=1)
    return np.exp(m), np.exp(m - half), np.exp(m + half)


def rule_codes(low: np.ndarray, high: np.ndarray, bound_low: float, bound_high: float) -> np.ndarray:
    """``rule_verdict`` as ``CODES`` for arrays of intervals."""
    a = -np.inf if pd.isna(bound_low) else bound_low
    b = np.inf if pd.isna(bound_high) else bound_high
    return np.where((a < low) & (high < b), HELD_CODE, np.where((high < a) | (low > b), NOT_HELD_CODE, OPEN_CODE))


def decide_many(values: np.ndarray, bound_low: float, bound_high: float) -> np.ndarray:
    """``decide``'s verdict as a code for every row of ``values`` (campaigns x runs): the rule on the rounded
    interval, published only from ``MIN_RUNS`` runs and when no leave-one-out interval gives another verdict."""
    def verdict(v: np.ndarray) -> np.ndarray:
        _, lo, hi = log_t_intervals(v)
        return rule_codes(np.round(lo, 4), np.round(hi, 4), bound_low, bound_high)

    full = verdict(values)
    if values.shape[1] < MIN_RUNS:
        return np.zeros_like(full)
    same = np.ones(len(values), dtype=bool)
    for i in range(values.shape[1]):
        same &= verdict(np.delete(values, i, axis=1)) == full
    return np.where(same, full, OPEN_CODE)


def spread(block_values: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """(within_sd, between_sd, icc) of log block values grouped by run (one-way random-effects ANOVA)."""
    groups = [np.log(np.asarray([v for v in g if v > 0 and math.isfinite(v)], dtype=float)) for g in block_values]
    groups = [g for g in groups if len(g)]
    df_within = sum(len(g) - 1 for g in groups)
    if len(groups) < 1 or df_within < 1:
        return math.nan, math.nan, math.nan
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df_within
    if len(groups) < 2:
        return math.sqrt(within), math.nan, math.nan
    means = np.array([g.mean() for g in groups])
    n_bar = len(groups) / sum(1 / len(g) for g in groups)  # harmonic mean: the runs' means' noise is within / n
    between = max(0.0, float(means.var(ddof=1)) - within / n_bar)
    icc = between / (between + within) if between + within > 0 else math.nan
    return math.sqrt(within), math.sqrt(between), icc


def runs_to_settle(values: Sequence[float], bound_low: float, bound_high: float,
                   confidence: float = CONFIDENCE) -> int | None:
    """About how many runs would decide the claim, if the runs' spread and mean stay as measured: the fewest n
    whose leave-one-out interval (n - 1 runs) lies on one side of every bound in ``POWER`` of such campaigns.
    None: more than ``MAX_SETTLE``, or no spread to go by."""
    x = np.log(np.asarray([v for v in values if v > 0 and math.isfinite(v)], dtype=float))
    if len(x) < 2 or not x.std(ddof=1) > 0:
        return None
    m, s = float(x.mean()), float(x.std(ddof=1))
    edges = [math.log(b) for b in (bound_low, bound_high) if not pd.isna(b) and b > 0]
    if not edges:
        return None
    d = min(abs(m - e) for e in edges)  # inside: to the nearer bound; outside: to the one crossed
    for n in range(max(MIN_RUNS, len(x) + 1), MAX_SETTLE + 1):  # the t quantile plus POWER's normal quantile:
        # an interval that only just reaches the bound at today's mean decides half the campaigns of that size
        if (float(stats.t.ppf(0.5 + confidence / 2, n - 2)) + float(stats.norm.ppf(POWER))) * s / math.sqrt(n - 1) < d:
            return n
    return None


#: what a run's own note says of its own interval, which a note over the runs must not repeat as its own
HERE = re.compile(r'on this machine the interval gives "[^"]*"')
WITHIN_RUN = re.compile(r"(^|; )\d+ blocks: a verdict needs \d+, the fewest that give a 95% interval(?=;|$)")


def run_note(row: Mapping[str, Any]) -> str:
    """A run's own note without what only its own interval decided (too few blocks for a verdict of its own)."""
    return WITHIN_RUN.sub("", str(row.get("note") or "")).lstrip("; ")


def _values(text: Any) -> list[float]:
    if not isinstance(text, str) or not text.strip():
        return []
    return [float(v) for v in text.split()]


def _short(run_id: str) -> str:
    return str(run_id).rsplit("-", 1)[-1]


def _num(x: float) -> str:
    return "-" if pd.isna(x) else f"{x:.3g}"


def claim_row(claim: str, rows: Mapping[str, Mapping[str, Any]], confidence: float = CONFIDENCE,
              sittings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The row over runs of one claim from each run's own row (run id -> comparison.csv row, oldest first);
    ``sittings`` (run id -> its sitting): two or more make the interval two-level (``decide_sittings``)."""
    ids = list(rows)
    labels = [(sittings or {}).get(i, "") for i in ids]
    last = dict(rows[ids[-1]])
    values = [float(r["reproduced"]) if not pd.isna(r.get("reproduced")) else math.nan for r in rows.values()]
    own = [str(r.get("verdict")) for r in rows.values()]
    within, between, icc = spread([_values(r.get("block_values")) for r in rows.values()])
    out = dict(last)
    out.update(runs=len(ids), run_ids=" ".join(ids), run_values=" ".join(_num(v) for v in values),
               run_verdicts="; ".join(f"{_short(i)}: {v}" for i, v in zip(ids, own, strict=True)),
               within_sd=_round(within), between_sd=_round(between), icc=_round(icc), loo="", settle="")
    measured = [v for v in values if not math.isnan(v)]
    out["blocks"] = int(sum(int(r["blocks"]) for r in rows.values() if not pd.isna(r.get("blocks"))))
    if len(ids) == 1:
        out["scope"] = "one run"
        out["note"] = "; ".join(s for s in (ONE_RUN, str(last.get("note") or "")) if s)
        still_open = out["verdict"] == "not resolvable here"
        out["settle"] = "more runs: a campaign (`runs: 5` in the profile)" if still_open else ""
        return out
    verdict, (centre, lo, hi), changed = decide(values, last.get("bound_low"), last.get("bound_high"), confidence,
                                                labels)
    n_sittings = len(sitting_means(values, labels))
    out["scope"] = f"across {n_sittings} sittings" if n_sittings >= 2 else "this sitting"
    ordered = ordering_steps(rows) if str(last.get("rule", "")).startswith(ORDERING) else None
    if ordered is not None:  # an ordering: each step decided over the runs, then combined as within a run
        verdict, (centre, lo, hi), changed, said = decide_ordering(ordered, last.get("bound_low"),
                                                                   last.get("bound_high"), confidence, labels)
    aa = [float(r["aa_median"]) for r in rows.values() if not pd.isna(r.get("aa_median"))]
    aa_c, aa_lo, aa_hi = log_t_interval(aa, confidence)
    notes = []
    carried = run_note(last)
    if "not measurable here" in own:
        # the reason of the newest run that could not judge it, with what the interval over the runs gives here
        src = last if last.get("verdict") == "not measurable here" else next(
            r for r in reversed(list(rows.values())) if r.get("verdict") == "not measurable here")
        out["here_verdict"] = verdict if len(measured) else ""
        carried = HERE.sub(f'on this machine the interval over the {len(measured)} runs gives "{out["here_verdict"]}"',
                           run_note(src))
        verdict = "not measurable here"
    elif len(aa) >= MIN_RUNS and (aa_lo > 1 or aa_hi < 1) and verdict != "not resolvable here":
        verdict = "not resolvable here"
        notes.append(f"baseline / baseline (A/A) over the runs is {aa_c:.3g} [{aa_lo:.3g}, {aa_hi:.3g}]: its interval "
                     "excludes 1, so the design is biased")
    elif changed:
        which = ", ".join(_short(ids[i]) for i in changed)
        notes.append(f"decided on all {len(measured)} runs, but not with run {which} left out (leave-one-out): "
                     "one run carries it")
        out["loo"] = f"changes without {which}"
    elif verdict in ("held", "did not hold"):
        out["loo"] = "unchanged"
    elif len(measured) < MIN_RUNS:
        notes.append(f"{len(measured)} runs measured it: a verdict needs {MIN_RUNS}, so that leaving one out "
                     "still leaves an interval")
    if verdict == "not resolvable here":
        n = runs_to_settle(values, last.get("bound_low"), last.get("bound_high"), confidence)
        out["settle"] = (f"about {n} runs in all (now {len(measured)}), if their spread stays as measured (SD of the "
                         f"runs' log medians {np.std(np.log(measured), ddof=1):.3f})" if n else
                         "more runs will hardly settle it: the runs' mean sits too near the rule's bound for their "
                         "spread" if len(measured) >= 2 else "")
        if not math.isnan(between) and not math.isnan(within) and between > within and n:
            out["settle"] += "; more blocks per run would not: runs differ more than blocks do"
    if ordered is not None:
        carried = STEP.sub(lambda m: f"{m[1]} in the last run: {m[2]}", carried)
        notes.append(f"each step over the {len(measured)} runs: {said}" if said else
                     "a run lacks a step: an ordering over the runs needs each step in every run")
    notes.append(scope_note(out["scope"], labels, ids))
    notes.append(f"per run: {out['run_verdicts']}")
    if verdict == "not measurable here":  # why it is not judged comes first
        notes.insert(0, carried)
    else:
        notes.append(carried)
    out.update(reproduced=centre, ci_low=lo, ci_high=hi, verdict=verdict, ci_method=METHOD,
               confidence=confidence, coverage=math.nan, aa_median=_round(aa_c), aa_low=_round(aa_lo),
               aa_high=_round(aa_hi), aa_blocks=len(aa), block_values="", aa_values="",
               noise_floor=_round(float(np.nanmedian([r.get("noise_floor", math.nan) for r in rows.values()])))
               if any(not pd.isna(r.get("noise_floor")) for r in rows.values()) else math.nan,
               stopped="", note="; ".join(s for s in notes if s))
    return out


def scope_note(scope: str, labels: Sequence[str], ids: Sequence[str]) -> str:
    """What a verdict's interval is over: one sitting (and the coverage that really has), or several."""
    if scope == "this sitting":
        return (f"this sitting: the interval is over runs of one sitting (one boot, one stretch of time); when "
                f"sittings differ as much as runs do, such an interval covers the machine's value about "
                f"{ONE_SITTING_COVERAGE:.0%} of the time, not 95%, and at the sitting effects measured on this "
                f"project's machine between {MEASURED_ONE_SITTING[0]:.0%} and {MEASURED_ONE_SITTING[1]:.0%} (a second "
                "sitting an hour later decides across sittings: `pglab collect --add-sitting`)")
    groups = {g: [i for i, x in zip(ids, labels, strict=True) if x == g] for g in dict.fromkeys(labels)}
    return (f"{scope}, two levels (the interval is over the sittings' means): "
            + "; ".join(f"{g}: {len(v)} runs" for g, v in groups.items()))


#: an ordering's rule (``claims.ordering_row``), and a step as its note lists it: "local/remote_write: 0.98 [0.938,
#: 1.02] not resolvable here"
ORDERING = "held if every step holds"
STEP = re.compile(r"([A-Za-z_]+/[A-Za-z_]+): ([\d.]+) \[[^\]]*\] (?:held|did not hold|not resolvable here)")


def ordering_steps(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each step of an ordering -> its value in every run (from each run's note); {} when a run lacks one."""
    per_run = [{m[1]: float(m[2]) for m in STEP.finditer(str(r.get("note") or ""))} for r in rows.values()]
    names = set(per_run[0]) if per_run else set()
    if not names or any(set(p) != names for p in per_run):
        return {}
    return {name: [p[name] for p in per_run] for name in sorted(names)}


def decide_ordering(steps: Mapping[str, Sequence[float]], bound_low: float, bound_high: float,
                    confidence: float = CONFIDENCE, sittings: Sequence[str] | None = None
                    ) -> tuple[str, tuple[float, float, float], list[int], str]:
    """(verdict, the weaker step's (centre, low, high), the runs whose leaving-out changes a step's verdict, the
    steps in words): each step decided over the runs by ``decide``; did not hold if one did not, held if every one
    held, else open (as ``claims.order_verdict`` within a run)."""
    if not steps:
        return "not resolvable here", (math.nan, math.nan, math.nan), [], ""
    decided = {k: decide(v, bound_low, bound_high, confidence, sittings) for k, v in steps.items()}
    verdicts = {d[0] for d in decided.values()}
    verdict = "did not hold" if "did not hold" in verdicts else "held" if verdicts == {"held"} else \
        "not resolvable here"
    weaker = min(decided, key=lambda k: decided[k][1][0] if not math.isnan(decided[k][1][0]) else math.inf)
    changed = sorted({i for d in decided.values() for i in d[2]})
    said = ", ".join(f"{k}: {_num(c)} [{_num(lo)}, {_num(hi)}] {v}" for k, (v, (c, lo, hi), _) in decided.items())
    return verdict, decided[weaker][1], changed, said


def _round(v: float) -> float:
    return round(float(v), 4) if not pd.isna(v) else math.nan


def comparison(frames: Mapping[str, pd.DataFrame], confidence: float = CONFIDENCE,
               marked: Mapping[str, str] | None = None, sittings: Mapping[str, str] | None = None) -> pd.DataFrame:
    """comparison.csv over runs from each run's own (run id -> frame, oldest first): one row per claim, in the
    last run's order, with the run columns (``RUN_COLUMNS``) after the run's own. ``marked`` (run id -> why: the
    machine was busy, or moved during the run) are left out of every verdict, and each row says so; when every run
    is marked no verdict is given ("not resolvable here"), the one over the marked runs kept as ``here_verdict``."""
    if not frames:
        raise ValueError("a verdict over runs needs at least one run")
    ids = list(frames)
    marked = {i: why for i, why in (marked or {}).items() if why and i in frames}
    kept = {i: f for i, f in frames.items() if i not in marked} or frames
    last = frames[ids[-1]]
    out = []
    for claim in last["claim"]:
        rows = {i: f[f["claim"] == claim].iloc[0].to_dict() for i, f in kept.items() if (f["claim"] == claim).any()}
        if not rows:  # only marked runs have it
            rows = {i: frames[i][frames[i]["claim"] == claim].iloc[0].to_dict() for i in ids
                    if (frames[i]["claim"] == claim).any()}
        row = claim_row(claim, rows, confidence, sittings)
        out.append(_left_out(row, marked, len(frames), all_marked=set(rows) <= set(marked)))
    cols = [*last.columns, *(c for c in RUN_COLUMNS if c not in last.columns)]
    return pd.DataFrame(out).reindex(columns=cols)


def _left_out(row: dict[str, Any], marked: Mapping[str, str], n: int, all_marked: bool) -> dict[str, Any]:
    """A row over runs told which runs were left out and why (``comparison``)."""
    if not marked:
        return {**row, "left_out": ""}
    why = "; ".join(f"{_short(i)}: {w}" for i, w in marked.items())
    if all_marked:
        said = (f"every run is marked ({why}): no verdict rests on a machine that did not sit still; over the marked "
                f"runs it would be \"{row['verdict']}\" (PGLAB_WITH_MARKED=1 decides over them)")
        row.update(here_verdict=row["verdict"], verdict="not resolvable here")
    else:
        said = (f"{len(marked)} of {n} runs left out, marked ({why}): decided over the other {n - len(marked)} "
                "(PGLAB_WITH_MARKED=1 keeps them)")
    return {**row, "left_out": " ".join(marked), "note": "; ".join(s for s in (said, str(row.get("note") or "")) if s)}


def runs_table(frames: Mapping[str, pd.DataFrame], marked: Mapping[str, str] | None = None,
               sittings: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per (claim, run): each run's own value, interval, blocks and verdict, its sitting, and why it is
    marked (left out of the verdicts over runs) if it is (``runs.csv``)."""
    keep = ["claim", "reproduced", "ci_low", "ci_high", "blocks", "verdict", "here_verdict", "aa_median"]
    parts = [f.reindex(columns=keep).assign(run_id=i, sitting=(sittings or {}).get(i, ""),
                                            marked=(marked or {}).get(i, "")) for i, f in frames.items()]
    return pd.concat(parts, ignore_index=True)[["claim", "run_id", *keep[1:], "sitting", "marked"]]
