"""A campaign of SLO searches into the ledger: each run as a run of study ``slo-<study>``, each configuration's
rate at the target as one of its ``claims`` rows, each trial as one of its ``points``.

Why: an SLO rate is a measure like any other, and what a reader compares over days is in the ledger. Once there,
``pglab ledger list`` and ``show`` print it and ``pglab ledger history`` draws each configuration's rate run by
run, by machine and build, as it draws every claim. The rows have no published number and no verdict (no article
named a rate at a latency target): the value is the run's rate, its note the closed-loop peak and how the
search ended. The analysis of each run is written first, raw first, under ``<campaign>/derived/<run-id>/``
(``comparison.csv``, ``points.csv``: what the ledger reads of every study's analysis).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from pglab.ledger import book
from pglab.ledger.backend import Ledger, location
from pglab.runs.writing import git_revision

DERIVED = "derived"
MEASURED = "measured (no published claim)"  # the verdict column: a measure, which no article's number judges


def claim_name(config: str, target_ms: float) -> str:
    """The row's name: one per configuration and target, so campaigns at one target line up in the history."""
    return f"{config}: the highest rate at p99 <= {target_ms:g} ms (transactions/s)"


def _note(r: pd.Series) -> str:
    peak = r.get("peak_tps")
    said = [f"closed-loop peak {peak:,.0f} tps" if isinstance(peak, (int, float)) and not math.isnan(peak) else "",
            "confirmed" if r.get("confirmed") else "not confirmed", str(r.get("why") or ""),
            f"marked: {r['marked']}" if r.get("marked") else ""]
    return "; ".join(x for x in said if x)


def tables(runs: pd.DataFrame, trials: pd.DataFrame, run_id: str, target_ms: float) -> tuple[pd.DataFrame,
                                                                                                 pd.DataFrame]:
    """(comparison, points) of one run, in the columns the ledger reads (``pglab.ledger.rows``)."""
    mine = runs[runs.run_id == run_id]
    comparison = pd.DataFrame([{"claim": claim_name(str(r.config), target_ms), "published": math.nan,
                                "reproduced": r.slo_rate, "verdict": MEASURED, "note": _note(r)}
                               for _, r in mine.iterrows()])
    t = trials[trials.run_id == run_id] if len(trials) else trials
    points = pd.DataFrame([{"point": f"{r.config}-t{int(r.trial):02d}", "kind": "slo-trial", "config": r.config,
                            "tps": r.achieved_rate, "failed": int(not r.good), "rate": r.rate,
                            "duration_s": r.duration_s, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms,
                            "p99_upper_ms": r.p99_upper_ms, "phase": r.phase} for _, r in t.iterrows()])
    return comparison, points


def record(campaign: str | Path, runs: pd.DataFrame, trials: pd.DataFrame, target_ms: float, *,
           data_root: str | Path = "data", url: str | None = None) -> list[str]:
    """Every run of ``campaign`` with its analysis into the ledger (yours unless ``url``); the run ids added. A
    ledger that cannot take them is said on stderr and changes nothing else (``pglab ledger add`` adds a run later,
    as after a study's run)."""
    d = Path(campaign)
    written = []
    for run_id in dict.fromkeys(runs.run_id):
        derived = d / DERIVED / str(run_id)
        derived.mkdir(parents=True, exist_ok=True)
        comparison, points = tables(runs, trials, str(run_id), target_ms)
        comparison.to_csv(derived / "comparison.csv", index=False)
        points.to_csv(derived / "points.csv", index=False)
        written.append((d / "runs" / str(run_id), derived))
    added: list[str] = []
    try:
        with Ledger(url, data_root) as ledger:
            for run_dir, derived in written:
                added.append(str(book.add(ledger, run_dir, derived, code_revision=git_revision())["run_id"]))
    except Exception as exc:  # noqa: BLE001 - the campaign's folder is the truth; the ledger is an index of it
        print(f"pglab: the campaign {d} was not added to the ledger {location(url, data_root)} ({exc}); "
              f"`pglab ledger add {d / 'runs' / '<run-id>'} --derived {d / DERIVED / '<run-id>'}` adds a run later",
              file=sys.stderr)
    return added

