"""A campaign of rate-at-a-latency-target searches read back and judged over runs (``pglab slo``).

Why over runs: one search's rate describes one run of one server on one afternoon. As for every claim pglab
judges (docs/measurement.md, "Verdicts over runs"), each run gives its own value, here each configuration's
SLO rate, and the campaign's value is the geometric mean over the runs with a 95% Student's t interval of the
log rates. A ratio between configurations (``remote_write`` against ``on``) is paired within each run, then
judged over runs the same way, so what a run's machine shares between its configurations cancels.

What is read (``pglab.app.slo_campaign`` wrote it, raw first): each run's ``search-<config>.json`` (the search's
result, the closed-loop peak and the trials in the order run) and each trial's point folder (``verdict.json``,
judged again here from the raw files when asked). A marked run (``pglab.runs.marks``) is kept in the tables and
left out of the intervals, as in every study.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis.over_runs import log_t_interval
from pglab.runs import marks
from pglab.runs.reading import load_manifest

SEARCH = "search-{config}.json"
RUN_COLUMNS = ["run_id", "config", "slo_rate", "peak_tps", "slo_share_of_peak", "confirmed", "bracket_low",
               "bracket_high", "trials", "why", "marked"]
SUMMARY_COLUMNS = ["config", "runs", "slo_rate", "ci_low", "ci_high", "half_width_pct", "peak_tps",
                   "ratio_to_baseline", "ratio_low", "ratio_high", "left_out", "all_marked"]


def run_dirs(campaign: str | Path) -> list[Path]:
    """The campaign's run folders (``runs/<run-id>``), oldest first."""
    return sorted(p.parent for p in Path(campaign).glob("runs/*/manifest.json"))


def searches(run_dir: Path) -> list[dict[str, Any]]:
    """Every configuration's search in one run, in the order they ran."""
    found = [json.loads(p.read_text()) for p in run_dir.glob(SEARCH.format(config="*"))]
    return sorted(found, key=lambda s: s.get("order", 0))


def runs_table(campaign: str | Path) -> pd.DataFrame:
    """One row per run and configuration: its SLO rate (NaN: not even the lowest rate tried was fine), its
    closed-loop peak, and why the run is marked ('' when it is not)."""
    rows = []
    for d in run_dirs(campaign):
        m = load_manifest(d)
        status = m.get("status")  # an interrupted or failed run's finished searches are shown, never pooled
        why = "; ".join([*marks.marks(m), *([f"the run ended {status}"] if status != "complete" else [])])
        for s in searches(d):
            rate = s.get("rate")
            peak = s.get("peak_tps")
            low, high = (s.get("bracket") or [None, None])[:2]
            rows.append({"run_id": d.name, "config": s["config"], "slo_rate": np.nan if rate is None else rate,
                         "peak_tps": peak, "slo_share_of_peak": (rate / peak) if rate and peak else np.nan,
                         "confirmed": bool(s.get("confirmed")), "bracket_low": low, "bracket_high": high,
                         "trials": len(s.get("trials") or []), "why": s.get("why", ""), "marked": why})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def trials_table(campaign: str | Path) -> pd.DataFrame:
    """Every trial of every search: the offered rate, its length, good or not, and the latencies it measured
    (p50, p99, the p99's upper bound) from its point's ``verdict.json``: the latency curve's points."""
    rows = []
    for d in run_dirs(campaign):
        for s in searches(d):
            for n, t in enumerate(s.get("trials") or [], 1):
                v = _verdict(d / t["point"]) if t.get("point") else {}
                rows.append({"run_id": d.name, "config": s["config"], "trial": n, "phase": t.get("phase"),
                             "rate": t["rate"], "duration_s": t["duration_s"], "good": bool(t["good"]),
                             "achieved_rate": v.get("achieved_rate"), "p50_ms": (v.get("extra") or {}).get("p50_ms"),
                             "p99_ms": _ms(v.get("p99_ms")), "p99_upper_ms": _ms(v.get("p99_upper_ms")),
                             "bad_share": v.get("bad_share"), "reasons": "; ".join(v.get("reasons") or [])})
    return pd.DataFrame(rows)


def summary(runs: pd.DataFrame, baseline: str | None, order: Sequence[str] = ()) -> pd.DataFrame:
    """Per configuration: the SLO rate over the unmarked runs (geometric mean, 95% t interval), the mean
    closed-loop peak, and the ratio to ``baseline`` paired within each run, with its interval."""
    kept = runs[runs.marked == ""] if len(runs) else runs
    all_marked = bool(len(runs)) and kept.empty
    if all_marked:  # every run marked: the values are shown, flagged, never a finding
        kept = runs
    if baseline is not None and len(kept):
        base = kept[kept.config == baseline].set_index("run_id").slo_rate
    else:
        base = pd.Series(dtype=float)
    configs = list(dict.fromkeys([*[c for c in order if c in set(runs.config)], *runs.config]))
    rows = []
    for c in configs:
        g = kept[kept.config == c]
        mean, low, high = log_t_interval(g.slo_rate.to_numpy(dtype=float))
        ratio = (g.set_index("run_id").slo_rate / base).dropna() if len(base) else pd.Series(dtype=float)
        r, rl, rh = log_t_interval(ratio.to_numpy(dtype=float)) if len(ratio) else (math.nan,) * 3
        rows.append({"config": c, "runs": int(g.slo_rate.notna().sum()), "slo_rate": _r(mean), "ci_low": _r(low),
                     "ci_high": _r(high),
                     "half_width_pct": _r(100 * (high - low) / 2 / mean) if mean and not math.isnan(low) else np.nan,
                     "peak_tps": _r(float(g.peak_tps.astype(float).mean())) if len(g) else np.nan,
                     "ratio_to_baseline": _r(r, 4), "ratio_low": _r(rl, 4), "ratio_high": _r(rh, 4),
                     "left_out": 0 if all_marked else int((runs[(runs.config == c)].marked != "").sum()),
                     "all_marked": all_marked})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def sentences(table: pd.DataFrame, baseline: str | None, target_ms: float) -> list[str]:
    """The finding in plain words, one sentence per configuration against the baseline."""
    out = []
    for r in table.itertuples():
        if math.isnan(r.slo_rate):
            out.append(f"at p99 <= {target_ms:g} ms, {r.config}: no search found a sustained rate (each run's "
                       "search ended without one: see slo_runs.csv, column why).")
            continue
        rate = f"{r.slo_rate:,.0f}/s" + (f" [{r.ci_low:,.0f}, {r.ci_high:,.0f}]" if not math.isnan(r.ci_low) else
                                          " (one run: no interval)")
        text = ("every run is marked (the machine was busy or moved): not a finding; " if r.all_marked else "")
        text += f"at p99 <= {target_ms:g} ms, {r.config} sustains {rate} over {r.runs} run(s)"
        if not math.isnan(r.peak_tps):
            text += f", {r.slo_rate / r.peak_tps:.0%} of its closed-loop peak ({r.peak_tps:,.0f} tps)"
        if baseline and r.config != baseline and not math.isnan(r.ratio_to_baseline):
            spread = "" if math.isnan(r.ratio_low) else f" [{r.ratio_low:.2f}, {r.ratio_high:.2f}]"
            text += f"; {r.ratio_to_baseline:.2f}x{spread} the rate of {baseline}"
        out.append(text + ".")
    return out


def write_tables(campaign: str | Path, baseline: str | None, order: Sequence[str] = ()) -> dict[str, pd.DataFrame]:
    """``slo_runs.csv``, ``slo_trials.csv`` and ``slo_summary.csv`` in the campaign folder (derived: rewritten
    from the raw run folders each time)."""
    d = Path(campaign)
    runs = runs_table(d)
    out = {"slo_runs.csv": runs, "slo_trials.csv": trials_table(d), "slo_summary.csv": summary(runs, baseline, order)}
    for name, df in out.items():
        df.to_csv(d / name, index=False)
    return out


def scope(campaign: str | Path) -> str:
    """What the intervals describe, in words: the sittings the runs were made in (``pglab.runs.marks.sittings``)."""
    manifests = {d.name: load_manifest(d) for d in run_dirs(campaign)}
    labels = sorted(set(marks.sittings(manifests).values()))
    if len(labels) == 1:
        return (f"Every run is of one sitting ({labels[0]}): the intervals describe this machine that afternoon; "
                "when afternoons differ as much as runs do, such an interval covers the machine's value about "
                "68% of the time, not 95% (docs/measurement.md, \"Sittings\").")
    return f"The runs are of {len(labels)} sittings ({'; '.join(labels)}); each interval is over all their runs."


def campaign_record(campaign: str | Path) -> Mapping[str, Any]:
    """What the campaign was asked (``campaign.json``)."""
    return json.loads((Path(campaign) / "campaign.json").read_text())


def _verdict(point: Path) -> dict[str, Any]:
    f = point / "verdict.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _ms(x: Any) -> float:
    return math.inf if x == "inf" else (np.nan if x is None else float(x))


def _r(x: float, digits: int = 1) -> float:
    return x if math.isnan(x) else round(float(x), digits)
