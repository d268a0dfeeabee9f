"""What a study's analysis returns and writes: one dataclass for the tables every study derives, one writer.

Each study's ``analyze`` reads its run with ``read_run``, extends ``Analysis`` with its own tables (more
fields, more files in ``tables``) and ends with ``Analysis.finish``: every table to ``derived`` as CSV,
the metrics to metrics.json, then the figures. One writer, so that every study writes its files the same
way and the same raw run gives the same bytes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import matplotlib.pyplot as plt
import pandas as pd
from pydantic import BaseModel

from pglab.analysis import figures, over_runs, tables, tally
from pglab.analysis.window import pgbench_window
from pglab.runs.campaign import OWN
from pglab.runs.reading import load_manifest
from pglab.runs.writing import write_json

FLOAT_FORMAT = "%.6g"  # six significant digits: more than a measurement has, and stable between platforms


def read_run(run_dir: Path, values: tables.PointValues = pgbench_window, nodes: dict[str, str] | None = None
             ) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """The run's manifest, its measured points and its failed ones; a run with nothing measured is refused."""
    manifest = load_manifest(run_dir)
    points, failed = tables.points_table(run_dir, values, nodes, manifest)
    if points.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    return manifest, points, failed


def run_metrics(manifest: dict[str, Any], failed: pd.DataFrame, comparison: pd.DataFrame,
                points: pd.DataFrame | None = None) -> dict[str, Any]:
    """What every study's metrics.json holds: the run, its failed points, the verdicts (and CPU steal)."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"],
                           "failed_points": len(failed),
                           "verdicts": {row.claim: row.verdict for _, row in comparison.iterrows()}}
    if points is not None:
        out["steal_flagged_points"] = int(points.steal_flag.sum()) if "steal_flag" in points else 0
    return out


#: verdict -> its column in the headline metrics (short: `dvc metrics show` fits in 120 columns)
VERDICT_KEYS = {"held": "held", "did not hold": "not_held", "not resolvable here": "open",
                "not measurable here": "n_a"}


def headline(comparison: pd.DataFrame, manifest: dict[str, Any]) -> dict[str, Any]:
    """``<data root>/metrics/<study>.json``, what `dvc metrics show` and `dvc exp show` list: the same ten
    keys for every study. The run (its id's random suffix), the verdicts counted on this machine as it is, how
    many were made under an emulated machine property (``emu``, counted apart: ``analysis.tally``), the noise
    floor (3 decimals), and the study's first claim (its headline, named in its docs page) as ratio with its
    interval (3 significant digits). The full numbers are in ``details.json`` and the derived tables."""
    own, under = tally.split(comparison)
    counts = own.value_counts()
    out: dict[str, Any] = {"run": str(manifest["run_id"]).rsplit("-", 1)[-1]}
    out.update({key: int(counts.get(verdict, 0)) for verdict, key in VERDICT_KEYS.items()})
    out["emu"] = len(under)  # short: `dvc metrics show` stays within 120 columns
    floor = verdicts_noise_floor(comparison)
    out["floor"] = None if floor is None else round(floor, 3)
    first = comparison.dropna(subset=["reproduced"]).head(1).to_dict("records")
    for key, col in (("ratio", "reproduced"), ("low", "ci_low"), ("high", "ci_high")):
        value = first[0].get(col) if first else None
        # 3 significant digits (11.2, 0.991): a ratio of 10 or more at 3 decimals widened `dvc metrics show` past 120
        out[key] = None if value is None or pd.isna(value) else float(f"{float(value):.3g}")
    return out


def metrics_path(derived: Path, study: str) -> Path:
    """``<data root>/metrics/<study>.json`` beside ``<data root>/derived/<study>/`` (a short path: it is the
    first column of `dvc metrics show`); ``derived/metrics.json`` for a folder laid out otherwise."""
    if derived.parent.name == "derived":
        return derived.parent.parent / "metrics" / f"{study}.json"
    return derived / "metrics.json"


def verdicts_noise_floor(comparison: pd.DataFrame) -> float | None:
    """The noise floor the verdicts use: the first claim's that has one."""
    nf = comparison.noise_floor.dropna()
    return round(float(nf.iloc[0]), 4) if len(nf) else None


@dataclass(kw_only=True)
class Analysis:
    """What the notebook shows; every table is also written to ``derived`` (``tables``)."""

    # tables written as they are (text, raw values), not rounded to FLOAT_FORMAT
    EXACT: ClassVar[frozenset[str]] = frozenset({"failed_points.csv", "stalls.csv"})

    run_dir: Path
    manifest: dict[str, Any]
    points: pd.DataFrame  # one row per measured point
    failed: pd.DataFrame  # the points that failed, and why
    summary: pd.DataFrame  # per group and configuration: median effect, its interval, the noise floor
    ratios: pd.DataFrame  # the per-block ratios behind it
    comparison: pd.DataFrame  # published vs reproduced: one row per claim, with its verdict
    waits: pd.DataFrame  # wait-event shares per configuration
    stalls: pd.DataFrame  # points with intervals of 0 tps in their measured window
    metrics: dict[str, Any]  # every headline number (details.json); `dvc metrics show` lists ``headline``
    params: BaseModel | None = None  # the run's parameters as its study's model reads them (runs.record.parameters)
    figures: dict[str, list[Path]] = field(default_factory=dict)

    def ratio_lines(self) -> pd.DataFrame:
        """One column per configuration of its median ratio: what `dvc plots` draws."""
        raise NotImplementedError

    def baseline_at_one(self, lines: pd.DataFrame) -> pd.DataFrame:
        """The baseline's column at 1 where another configuration was measured: its ratio to itself, which the
        analysis leaves empty (a plot drew it as a line at 0)."""
        base = (self.manifest.get("plan") or {}).get("baseline")
        if base not in lines.columns[1:]:  # the first column is the x axis (clients, nodes)
            return lines
        measured = lines[[c for c in lines.columns[1:] if c != base]].notna().any(axis=1)
        return lines.assign(**{base: lines[base].mask(lines[base].isna() & measured, 1.0)})

    def tables(self) -> dict[str, pd.DataFrame]:
        """File name (under ``derived``) -> table: every study's, and a subclass adds its own."""
        return {"points.csv": self.points, "summary.csv": self.summary, "ratios.csv": self.ratios,
                "ratio_lines.csv": self.baseline_at_one(self.ratio_lines()), "comparison.csv": self.comparison,
                "failed_points.csv": self.failed, "waits.csv": self.waits, "stalls.csv": self.stalls}

    def write(self, derived: Path) -> None:
        for name, table in self.tables().items():
            path = derived / name
            path.parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(path, index=False, float_format=None if name in self.EXACT else FLOAT_FORMAT)
        write_json(derived / "details.json", self.metrics)
        metrics = metrics_path(derived, str(self.manifest.get("study", derived.name)))
        metrics.parent.mkdir(parents=True, exist_ok=True)
        write_json(metrics, headline(self.comparison, self.manifest))

    def write_as_one_run(self, derived: Path) -> None:
        """``runs.csv`` (one row per claim) and ``runs/<run-id>/comparison.csv`` for one run, so that every analysis
        has the files a campaign's has (``pglab.app.campaign``; the pipeline's outputs are the same for every study)."""
        shutil.rmtree(derived / OWN, ignore_errors=True)  # derived, never raw: an earlier campaign's runs go
        own = derived / OWN / str(self.manifest["run_id"])
        own.mkdir(parents=True)
        self.comparison.to_csv(own / "comparison.csv", index=False, float_format=FLOAT_FORMAT)
        over_runs.runs_table({str(self.manifest["run_id"]): self.comparison}).to_csv(
            derived / over_runs.RUNS_CSV, index=False, float_format=FLOAT_FORMAT)

    def finish(self, derived_dir: str | Path, figures_dir: str | Path,
               draw: Callable[[Self, Path], dict[str, list[Path]]]) -> Self:
        """Write the tables, details and headline metrics, then draw the figures (``draw``: this analysis,
        the folder -> files). In a campaign (``deciding_over_runs``) the run's own tables go to its folder first,
        and the verdicts written and drawn are those over the runs."""
        over = _OVER_RUNS.get()
        if over is None:  # one run: the two outputs a campaign's analysis has, of this one run
            self.write_as_one_run(Path(derived_dir))
        else:
            self.write(over.own)
            if over.decide is None:  # an earlier run of a campaign: its own tables only
                return self
            self.comparison, extra = over.decide(self.comparison)
            self.metrics = {**self.metrics, "verdicts": dict(zip(self.comparison.claim, self.comparison.verdict,
                                                                 strict=True)),
                            "runs": int(self.comparison["runs"].max()) if "runs" in self.comparison else 1}
        self.write(Path(derived_dir))
        if over is not None:  # after the last run's own: a table over the runs takes the place of its (fidelity.csv)
            for name, table in extra.items():
                table.to_csv(Path(derived_dir) / name, index=False, float_format=FLOAT_FORMAT)
        figures.style()
        self.figures = draw(self, Path(figures_dir))
        plt.close("all")
        return self


@dataclass(frozen=True)
class OverRuns:
    """How ``Analysis.finish`` writes one run of a campaign: its own tables to ``own``; then, for the last run,
    ``decide`` turns its own comparison into the one over every run (and extra tables by file name)."""

    own: Path
    decide: Callable[[pd.DataFrame], tuple[pd.DataFrame, dict[str, pd.DataFrame]]] | None = None


_OVER_RUNS: ContextVar[OverRuns | None] = ContextVar("pglab_over_runs", default=None)


@contextmanager
def deciding_over_runs(over: OverRuns) -> Iterator[None]:
    """Within this block, a study's ``analyze`` writes as one run of a campaign (``OverRuns``): the studies' analyses
    stay as they are, and one place (``pglab.app.campaign``) says how a campaign is written."""
    token = _OVER_RUNS.set(over)
    try:
        yield
    finally:
        _OVER_RUNS.reset(token)
