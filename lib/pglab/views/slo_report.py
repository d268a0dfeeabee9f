"""A campaign of ``pglab slo`` analysed: its tables, figures and one page (``report.html``), all derived from the
raw run folders, so they can be written again at any time (``pglab slo --analyse DIR``)."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import figures
from pglab.analysis.slo_figures import fig_latency_curve, fig_rates
from pglab.analysis.slo_runs import campaign_record, scope, sentences, write_tables
from pglab.errors import UserError

PAGE = "report.html"
STYLE = ("body{font-family:sans-serif;max-width:60rem;margin:1rem auto;padding:0 .8rem;line-height:1.4}"
         "table{border-collapse:collapse;font-size:.9rem;display:block;overflow-x:auto}"
         "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}td:first-child,th:first-child"
         "{text-align:left}img{max-width:100%}")


def analyse(campaign: str | Path) -> dict[str, Any]:
    """Tables, figures and the page of ``campaign``; what was found (for the CLI's last lines)."""
    d = Path(campaign)
    if not (d / "campaign.json").is_file():
        raise UserError(f"{d}: not a pglab slo campaign (no campaign.json)")
    rec = campaign_record(d)
    tables = write_tables(d, rec.get("baseline"), rec.get("configs") or ())
    runs, trials, summary = tables["slo_runs.csv"], tables["slo_trials.csv"], tables["slo_summary.csv"]
    if runs.empty:
        raise UserError(f"{d}: no run of this campaign finished a search (see runs/*/manifest.json)")
    figures.style()
    made = fig_rates(summary, runs, float(rec["target_ms"]), d) + fig_latency_curve(trials, float(rec["target_ms"]),
                                                                                    d, rec.get("configs") or ())
    words = sentences(summary, rec.get("baseline"), float(rec["target_ms"]))
    (d / PAGE).write_text(page(rec, summary, runs, words, scope(d)))
    return {"folder": d, "sentences": words, "figures": made, "summary": summary, "runs": runs, "trials": trials,
            "target_ms": float(rec["target_ms"])}


def page(rec: dict[str, Any], summary: pd.DataFrame, runs: pd.DataFrame, words: list[str], where: str) -> str:
    target = float(rec["target_ms"])
    left = runs[runs.marked != ""]
    head = (f"<h1>{html.escape(rec['study'])}: the rate each configuration sustains at p99 &le; {target:g} ms</h1>"
            f"<p>{int(rec['runs'])} run(s) of the <code>{html.escape(rec['profile'])}</code> profile on this machine, "
            f"{html.escape(rec['workload'])} with {rec['preset']['clients']} connections at a Poisson rate, latency "
            "from each transaction's scheduled start (pgbench <code>-R</code>). A rate is sustained when its "
            "trials' p99 bound stays under the target, under 0.1% of transactions are late or skipped, the rate "
            "is achieved and no queue builds (docs/measurement.md, \"The rate at a latency target\"). Each run "
            "has fresh servers; the value is the geometric mean over runs with its 95% interval.</p>")
    found = "".join(f"<li>{html.escape(w)}</li>" for w in words)
    note = (f"<p>{len(left)} search(es) of marked runs (the machine was busy or moved) are left out of the "
            "intervals and shown hollow.</p>" if len(left) else "")
    return ("<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
            f"<title>pglab slo {html.escape(rec['study'])}</title><style>{STYLE}</style></head><body>{head}"
            f"<h2>What was found</h2><ul>{found}</ul>{note}<p>{html.escape(where)}</p>"
            "<img src='slo_rates.png' alt='SLO rate per configuration'>"
            "<img src='latency_curve.png' alt='latency against the offered rate'>"
            f"<h2>Per configuration</h2>{_summary_table(summary, rec.get('baseline'))}"
            f"<h2>Per run</h2>{_runs_table(runs)}"
            "<p>Raw: <code>runs/&lt;run-id&gt;/</code> (every trial's pgbench output and per-transaction log). "
            "Tables: <a href='slo_summary.csv'>slo_summary.csv</a>, <a href='slo_runs.csv'>slo_runs.csv</a>, "
            "<a href='slo_trials.csv'>slo_trials.csv</a>.</p></body></html>\n")


def _summary_table(s: pd.DataFrame, baseline: str | None) -> str:
    head = ("<tr><th>configuration</th><th>runs</th><th>rate at the target (tps)</th><th>95% interval</th>"
            f"<th>closed-loop peak (tps)</th><th>ratio to {html.escape(str(baseline))}</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r.config)}</td><td>{r.runs}</td><td>{_n(r.slo_rate)}</td>"
        f"<td>{_interval(r.ci_low, r.ci_high)}</td><td>{_n(r.peak_tps)}</td>"
        f"<td>{_x(r.ratio_to_baseline)} {_interval(r.ratio_low, r.ratio_high, x=True)}</td></tr>"
        for r in s.itertuples())
    return f"<table>{head}{body}</table>"


def _runs_table(runs: pd.DataFrame) -> str:
    head = ("<tr><th>run</th><th>configuration</th><th>rate at the target (tps)</th><th>closed-loop peak (tps)</th>"
            "<th>trials</th><th>confirmed</th><th>marked</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r.run_id)}</td><td>{html.escape(r.config)}</td><td>{_n(r.slo_rate)}</td>"
        f"<td>{_n(r.peak_tps)}</td><td>{r.trials}</td><td>{'yes' if r.confirmed else 'no'}</td>"
        f"<td>{html.escape(r.marked) or 'no'}</td></tr>" for r in runs.itertuples())
    return f"<table>{head}{body}</table>"


def _n(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):,.0f}"


def _x(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.2f}×"


def _interval(low: Any, high: Any, x: bool = False) -> str:
    if low is None or high is None or math.isnan(float(low)) or math.isnan(float(high)):
        return ""
    f = "{:.2f}" if x else "{:,.0f}"
    return f"[{f.format(float(low))}, {f.format(float(high))}]"
