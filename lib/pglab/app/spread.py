"""The run-to-run spread of whole runs of one study: ``pglab spread STUDY RUN RUN ...``.

A run's interval says how much its blocks varied within that run; it cannot say whether another run on
the same machine, minutes later, with new servers and new data, would reach the same verdict. Each run
is analysed into a folder of its own and the runs' ``comparison.csv`` are set side by side, one row per
claim: each run's reproduced value and verdict, their median, min, max and spread (max / min), and
whether the verdicts agree (``stable``), flip between "held" and "did not hold" (``opposite``), or
differ otherwise (``mixed``: a run could not resolve the claim, or lacks it).

``comparison.csv`` is read by the column names ``claim``, ``published``, ``reproduced`` and ``verdict``
only: the analyses add columns, and the spread does not depend on them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import over_runs
from pglab.analysis.comparable import check_comparable, find_run, mixing_message
from pglab.app.paths import output_dir
from pglab.errors import UserError
from pglab.ledger.book import record
from pglab.runs.reading import load_manifest
from pglab.runs.record import MANIFEST, inside

HELD, NOT_HELD = "held", "did not hold"
STABLE, OPPOSITE, MIXED = "stable", "opposite", "mixed"
MISSING = "(missing)"  # a run whose comparison has no row for the claim
USABLE = ("complete", "partial")  # statuses whose runs have every point tried (partial: failed ones excluded)
SPREAD_CSV = "spread.csv"
VERDICTS_CSV = "verdicts.csv"  # the verdicts over the runs (pglab.analysis.over_runs)
CLAIM_WIDTH = 48  # the printed table's claim column: long claims are cut, the CSV keeps them whole


def agreement(verdicts: Sequence[Any]) -> str:
    """``opposite`` when one run held and another did not, ``stable`` when all runs agree, else ``mixed``."""
    vs = [v if isinstance(v, str) and v else MISSING for v in verdicts]
    if HELD in vs and NOT_HELD in vs:
        return OPPOSITE
    return STABLE if len(set(vs)) == 1 and vs[0] != MISSING else MIXED


def spread_table(comparisons: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per claim (in the runs' order) from each run's comparison frame, keyed by a run label.

    Columns: ``claim``, ``published`` (when a run has it), ``reproduced_<label>`` and ``verdict_<label>``
    per run, then ``runs`` (how many runs reproduced a value), ``median``, ``min``, ``max``, ``spread``
    (max / min; NaN unless every value is positive) and ``agreement`` (see ``agreement``).
    """
    if not comparisons:
        raise ValueError("a spread needs at least one run")
    rows: dict[str, dict[str, tuple[Any, Any]]] = {}
    published: dict[str, Any] = {}
    for label, t in comparisons.items():
        for col in ("claim", "reproduced", "verdict"):
            if col not in t.columns:
                raise ValueError(f"run {label}: its comparison has no column {col!r}")
        pub = t["published"] if "published" in t.columns else [math.nan] * len(t)
        for claim, value, verdict, p in zip(t["claim"], t["reproduced"], t["verdict"], pub, strict=True):
            rows.setdefault(claim, {}).setdefault(label, (value, verdict))
            if claim not in published or pd.isna(published[claim]):
                published[claim] = p
    has_published = any("published" in t.columns for t in comparisons.values())
    out = []
    for claim, per_run in rows.items():
        row: dict[str, Any] = {"claim": claim}
        if has_published:
            row["published"] = published[claim]
        values, verdicts = [], []
        for label in comparisons:
            value, verdict = per_run.get(label, (math.nan, math.nan))
            value = pd.to_numeric(value, errors="coerce")
            row[f"reproduced_{label}"], row[f"verdict_{label}"] = value, verdict
            verdicts.append(verdict)
            if not pd.isna(value):
                values.append(float(value))
        low, high = (min(values), max(values)) if values else (math.nan, math.nan)
        row.update(runs=len(values), median=float(pd.Series(values).median()) if values else math.nan,
                   min=low, max=high, spread=high / low if values and low > 0 else math.nan,
                   agreement=agreement(verdicts))
        out.append(row)
    return pd.DataFrame(out)


def _num(x: Any) -> str:
    return "-" if pd.isna(x) else f"{x:.3g}"


def format_table(table: pd.DataFrame, labels: Sequence[str]) -> str:
    """The spread as a short text table: runs as r1, r2, ... and the distinct verdicts in run order."""
    show = pd.DataFrame({"claim": [c if len(c) <= CLAIM_WIDTH else c[:CLAIM_WIDTH - 3] + "..."
                                   for c in table["claim"].astype(str)]})
    for i, label in enumerate(labels, 1):
        show[f"r{i}"] = table[f"reproduced_{label}"].map(_num)
    for col in ("median", "min", "max"):
        show[col] = table[col].map(_num)
    show["spread"] = table["spread"].map(lambda x: "-" if pd.isna(x) else f"{x:.2f}")
    show["agreement"] = table["agreement"]
    show["verdicts"] = [" / ".join(dict.fromkeys(str(r[f"verdict_{lb}"]) if isinstance(r[f"verdict_{lb}"], str)
                                                  else MISSING for lb in labels))
                        for _, r in table.iterrows()]
    text = {"claim", "agreement", "verdicts"}  # left-aligned; the numbers right-aligned
    width = {c: max([len(c), *map(len, show[c])]) for c in show.columns}
    lines = [[c.ljust(width[c]) if c in text else c.rjust(width[c]) for c in show.columns]]
    lines += [[v.ljust(width[c]) if c in text else v.rjust(width[c]) for c, v in r.items()]
              for r in show.to_dict("records")]
    return "\n".join("  ".join(cells).rstrip() for cells in lines)


# -- runs of one study -----------------------------------------------------------------------------------


def label(run: Path) -> str:
    """A run's label in the table's column names and its folder under ``--out``: its run id, checked to be a
    plain id (``pglab.runs.record``), so that no run can name a folder outside ``--out``."""
    return str(load_manifest(run)["run_id"])


def check_runs(study: str, runs: Sequence[Path], allow_mixed: bool = False) -> None:
    """Refuse (UserError, before any analysis) runs of another study or profile, a run given twice, a run
    that did not end complete or partial, and runs that ``pglab compare`` would refuse (unless ``allow_mixed``)."""
    if not runs:
        raise UserError("give at least one run")
    manifests = [load_manifest(r) for r in runs]
    problems = []
    for run, m in zip(runs, manifests, strict=True):
        if m["study"] != study:
            problems.append(f"{Path(run) / MANIFEST} is a run of {m['study']}, not {study}")
        elif m.get("status") not in USABLE:
            problems.append(f"{run} ended {m.get('status')}: not a whole run (only complete or partial runs)")
    profiles = {str(m.get("profile")) for m in manifests}
    if len(profiles) > 1:
        problems.append("the runs are of different profiles: " + ", ".join(
            f"{r} {m.get('profile')}" for r, m in zip(runs, manifests, strict=True)))
    labels = [label(r) for r in runs]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        problems.append(f"run {', '.join(twice)} given twice: a spread needs different runs")
    if problems:
        raise UserError("no spread: " + "; ".join(problems))
    for run, m in zip(runs[1:], manifests[1:], strict=True):
        mixed = mixing_message(check_comparable(manifests[0], m, allow_mixed=allow_mixed))
        if mixed:
            print(f"pglab: {run} vs {runs[0]}: {mixed}", file=sys.stderr)


def analyse(study: str, runs: Sequence[Path], out: Path, reference_dir: str | Path,
            data_root: str | Path = "data") -> dict[str, pd.DataFrame]:
    """Each run analysed by the study's own analysis into ``out/<run-id>/derived`` and ``figures``; its
    comparison frame (the columns this module reads) by run label. Each analysis goes into the ledger."""
    from pglab.studies import module

    analyze = module(study, "analyze").analyze
    frames = {}
    for run in runs:
        dest = inside(out, out / label(run), f"analysis of {run}")
        analyze(run, dest / "derived", dest / "figures", Path(reference_dir))
        record(run, dest / "derived", data_root=data_root)
        frames[label(run)] = pd.read_csv(dest / "derived" / "comparison.csv")
    return frames


def write(study: str, runs: Sequence[Path], frames: Mapping[str, pd.DataFrame], out: Path) -> pd.DataFrame:
    """``out/spread.csv`` from the runs' comparison frames (``analyse``), and the short table with its legend; then
    ``out/verdicts.csv``, the verdicts decided over these runs (``analysis.over_runs``), and their tally."""
    ordered = {label(r): frames[label(r)] for r in runs}
    table = spread_table(ordered)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / SPREAD_CSV, index=False)
    show(table, runs)
    if all("bound_low" in f.columns for f in ordered.values()):  # comparisons of today's analyses
        over = over_runs.comparison(ordered)
        over.to_csv(out / VERDICTS_CSV, index=False)
        tally = over["verdict"].value_counts()
        print(f"verdicts over the {len(runs)} runs ({out / VERDICTS_CSV}): "
              + ", ".join(f"{n} {v}" for v, n in tally.items()))
    print(f"spread of {len(runs)} run{'s' if len(runs) > 1 else ''} of {study}: {out / SPREAD_CSV} "
          f"(each run's tables and figures in {out}/<run-id>/)")
    return table


def show(table: pd.DataFrame, runs: Sequence[Path]) -> None:
    for i, run in enumerate(runs, 1):
        print(f"r{i} = {label(run)} ({run})")
    print(format_table(table, [label(r) for r in runs]))
    counts = table["agreement"].value_counts()
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in (STABLE, MIXED, OPPOSITE)) + " (verdicts over the runs)")
    sys.stdout.flush()


def cmd_spread(a: Any) -> int:
    """``pglab spread``: the runs named (ids or folders) and ``--out`` checked as a whole first, then analysed and
    tabulated."""
    runs = [find_run(a.data_root, r) for r in a.runs]
    check_runs(a.study, runs, allow_mixed=a.allow_mixed)
    out = output_dir(Path(a.out) if a.out else Path(a.data_root) / "repeats" / a.study / label(runs[0]))
    write(a.study, runs, analyse(a.study, runs, out, a.reference, a.data_root), out)
    return 0
