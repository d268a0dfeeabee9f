"""A campaign's analysis: each run analysed on its own, then the verdicts decided over the runs.

Layout of the analysis (``data/derived/<study>/``)::

    comparison.csv            one row per claim: the verdict over the runs (pglab.analysis.over_runs), each run's
                              value and verdict, the within- and between-run spread, what would settle it; runs
                              marked for a busy or moving machine (pglab.runs.marks.marks) left out, and said
    runs.csv                  one row per claim and run: that run's own value, interval and verdict
    runs/<run-id>/            each run's own tables (comparison.csv with its per-block values, points.csv, ...)
    points.csv, figures, ...  the campaign's last run, as for a single run: the verdicts are over the runs,
                              the tables and figures of effects are the last run's (the report says so)

A single run is analysed as ever (``analyze_any``), with ``runs.csv`` and ``runs/<run-id>/comparison.csv`` of its own
(``Analysis.write_as_one_run``); the report and the docs say that its interval is within-run only.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import fidelity, over_runs
from pglab.analysis.result import OverRuns, deciding_over_runs
from pglab.runs import campaign, marks
from pglab.runs.reading import load_manifest
from pglab.studies import module

FIDELITY = "fidelity.csv"  # each run's own, pooled over the runs (``fidelity.pooled``)


def analyze(study: str, run_dir: Path, derived: Path, figures: Path, reference: Path) -> Any:
    """The campaign published in ``run_dir`` analysed into ``derived`` and ``figures``; returns the last run's
    Analysis, whose ``comparison`` is the one over the runs."""
    members = campaign.members(run_dir)
    manifests = [load_manifest(m, study=study) for m in members]
    ids = [str(m["run_id"]) for m in manifests]
    marked = marks.left_out(dict(zip(ids, manifests, strict=True)))
    sittings = marks.sittings(dict(zip(ids, manifests, strict=True)))
    analyze_run = module(study, "analyze").analyze
    shutil.rmtree(derived / campaign.OWN, ignore_errors=True)  # derived, never raw: an earlier campaign's runs go
    own: dict[str, pd.DataFrame] = {}
    with tempfile.TemporaryDirectory(prefix="pglab-campaign-") as scratch:
        for run, run_id in zip(members[:-1], ids[:-1], strict=True):
            with deciding_over_runs(OverRuns(derived / campaign.OWN / run_id)):
                own[run_id] = analyze_run(run, derived / campaign.OWN / run_id, Path(scratch), reference).comparison

    def decide(last: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        frames = {**own, ids[-1]: last}
        extra = {over_runs.RUNS_CSV: over_runs.runs_table(frames, marked, sittings)}
        kept = [i for i in ids if i not in marked] or ids  # marked runs out, as in the verdicts
        tables = [derived / campaign.OWN / i / FIDELITY for i in kept]
        if all(t.exists() for t in tables):  # an emulated study's: over the runs, each run's median one value
            extra[FIDELITY] = fidelity.pooled([pd.read_csv(t) for t in tables])
        return over_runs.comparison(frames, marked=marked, sittings=sittings), extra

    with deciding_over_runs(OverRuns(derived / campaign.OWN / ids[-1], decide)):
        return analyze_run(run_dir, derived, figures, reference)


def analyze_any(study: str, run_dir: Path, derived: Path, figures: Path, reference: Path) -> Any:
    """A published folder analysed as what it is: a campaign over its runs (``analyze``), a single run as ever."""
    if campaign.read(run_dir) is not None:
        return analyze(study, run_dir, derived, figures, reference)
    return module(study, "analyze").analyze(run_dir, derived, figures, reference)
