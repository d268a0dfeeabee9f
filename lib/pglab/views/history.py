"""``reports/history.html``: every run the ledger holds, claim by claim, as one offline page.

Why: a study's report shows one run; whether a verdict is a property of the claim or of one evening's machine
shows only across runs. This page draws, per claim, every run's reproduced value and interval in the order the
runs started, against the article's number, coloured by machine and marked by PostgreSQL version, with the
runs in a table below and the verdicts counted; then what each study's runs cost; runs marked for a busy or
moving machine left out unless asked. The study reports' frame (``report._page``) with a viewport tag, figures
as embedded PNG, nothing that depends on when it was made (the same ledger writes the same bytes), every text
from the ledger escaped. ``python -m pglab.views.history [--ledger URL] [--out FILE] [--with-marked]``
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from pglab import exits
from pglab.analysis import figures
from pglab.errors import UserError
from pglab.ledger import book
from pglab.ledger.backend import Ledger, is_yours, location
from pglab.ledger.locations import parse, shown
from pglab.studies import STUDIES
from pglab.views import report
from pglab.views.history_figures import builds, claim_figure, cost_figure, pg_label, started_at, style_of

VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
#: the study reports' style, plus what a phone needs: narrower margins, tables that scroll sideways
_STYLE = ("@media (max-width:640px){body{padding:0 10px 32px;font-size:14px}h1{font-size:1.3em}"
          ".table td{white-space:nowrap}.table td.wrap{white-space:normal;min-width:11em}}"
          ".tally span{padding:1px 6px;margin-right:4px;border-radius:3px;white-space:nowrap}"
          "td.num,th.num{text-align:right;white-space:nowrap}code{font-size:.9em}")
KINDS = ("held", "did not hold", "open", "not measurable")
_KIND_CLASS = {"held": "held", "did not hold": "not", "open": "open", "not measurable": "na"}


def kind(verdict: Any) -> str:
    """One of ``KINDS`` for a verdict text: whatever is neither held, did not hold nor not measurable is open
    (not resolvable here, open at the first look, no verdict)."""
    v = str(verdict) if isinstance(verdict, str) else ""
    if v in ("held", "did not hold"):
        return v
    return "not measurable" if v.startswith("not measurable") else "open"


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or pd.isna(value):
        return "-"
    return f"{float(value):.3g}"


def _e(value: Any) -> str:
    return html.escape("" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value))


def _date(started: Any) -> str:
    t = started_at(started)
    return "?" if pd.isna(t) else t.strftime("%Y-%m-%d %H:%M")


def _short(run_id: Any) -> str:
    return str(run_id).rsplit("-", 1)[-1]


def _hash(dvc_hash: Any) -> str:
    return str(dvc_hash).removesuffix(".dir")[:8] if isinstance(dvc_hash, str) and dvc_hash else "-"


def studies_of(runs: pd.DataFrame) -> list[str]:
    """The ledger's studies: pglab's five in their usual order, then any other name it holds, sorted."""
    held = {str(s) for s in runs.study.dropna()} if len(runs) else set()
    return [s for s in STUDIES if s in held] + sorted(held - set(STUDIES))


def _tally(rows: pd.DataFrame) -> dict[str, int]:
    counts = {k: 0 for k in KINDS}
    for v in rows.verdict:
        counts[kind(v)] += 1
    return counts


def _tally_html(counts: dict[str, int]) -> str:
    return "<span class=\"tally\">" + "".join(
        f"<span class=\"{_KIND_CLASS[k]}\">{n} {k}</span>" for k, n in counts.items() if n) + "</span>"


def _claim_table(rows: pd.DataFrame, order: pd.DataFrame, names: dict[str, str]) -> str:
    number = {r: i for i, r in enumerate(order.run_id, 1)}
    head = "".join(f"<th>{c}</th>" for c in ("#", "run date (UTC)", "run", "machine", "PostgreSQL",
                                              "value [interval]", "verdict", "DVC hash"))
    body = []
    for r in rows.to_dict("records"):
        interval = f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]" if not pd.isna(r["ci_low"]) else ""
        body.append(f"<tr class=\"{_KIND_CLASS[kind(r['verdict'])]}\"><td class=num>{number[r['run_id']]}</td>"
                    f"<td>{_date(r['started'])}</td><td><code>{_e(_short(r['run_id']))}</code></td>"
                    f"<td>{names[str(r['machine_key'])]}</td><td>{_e(builds(pd.DataFrame([r]))[0])}</td>"
                    f"<td class=num>{_num(r['reproduced'])}{interval}</td><td>{_e(r['verdict'])}</td>"
                    f"<td><code>{_e(_hash(r['dvc_hash']))}</code></td></tr>")
    return f"<div class=\"table\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _runs_table(order: pd.DataFrame, names: dict[str, str]) -> str:
    cols = ("#", "run date (UTC)", "run", "profile", "status", "machine", "PostgreSQL", "wall (min)", "measuring",
            "own CPU (s)", "claims", "DVC hash")
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for i, r in enumerate(order.to_dict("records"), 1):
        share = "-" if pd.isna(r["measuring_share"]) else f"{100 * r['measuring_share']:.0f}%"
        wall = "-" if pd.isna(r["wall_s"]) else f"{r['wall_s'] / 60:.1f}"
        claims = str(int(r["n_claims"])) if r.get("analysed") and not pd.isna(r["n_claims"]) else "not analysed"
        body.append(f"<tr><td class=num>{i}</td><td>{_date(r['started'])}</td><td><code>{_e(_short(r['run_id']))}"
                    f"</code></td><td>{_e(r['profile'])}</td><td>{_e(r['status'])}</td>"
                    f"<td>{names[str(r['machine_key'])]}</td><td>{_e(builds(pd.DataFrame([r]))[0])}</td>"
                    f"<td class=num>{wall}</td><td class=num>{share}</td><td class=num>{_num(r['own_cpu_s'])}</td>"
                    f"<td>{claims}</td><td><code>{_e(_hash(r['dvc_hash']))}</code></td></tr>")
    return f"<div class=\"table\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def latest_verdict(rows: pd.DataFrame, campaigns: pd.DataFrame) -> tuple[str, str]:
    """(verdict, what it is over) of a claim: the latest campaign's verdict over its runs where the ledger holds a
    campaign with the claim (what that campaign's report, the index and the docs say), else the latest run's own
    (over its blocks only, and said so)."""
    last = rows.iloc[-1]
    mine = campaigns[campaigns.claim.astype(str) == str(last["claim"])] if len(campaigns) else campaigns
    if len(mine):
        k = mine.iloc[-1]
        runs = "" if pd.isna(k["n_runs"]) else f"over {int(k['n_runs'])} runs, "
        return str(k["verdict"]), f"{runs}campaign {_short(k['campaign_id'])}"
    return str(last["verdict"]), f"run {_short(last['run_id'])} alone"


def study_section(study: str, claims: pd.DataFrame, order: pd.DataFrame,
                  look: tuple[dict[str, Any], dict[str, str], dict[str, str]], anchor: str,
                  campaigns: pd.DataFrame | None = None) -> str:
    """One study: its claims' tally, a figure and table per claim with a value, a line per claim without, costs;
    a claim's latest verdict is its campaign's over the runs where the latest run is one of a campaign."""
    names = look[2]
    camp = campaigns[campaigns.study == study] if campaigns is not None and len(campaigns) else pd.DataFrame()
    mine = claims[claims.study == study]
    claim_names = sorted({str(c) for c in mine.claim})
    first, last = _date(order.started.iloc[0])[:10], _date(order.started.iloc[-1])[:10]
    out = [f"<h2 id=\"{anchor}\">{_e(study)}</h2>"]
    if report.question(study):
        out.append(f"<p class=\"question\">{_e(report.question(study))}</p>")
    analysed = int(order.analysed.fillna(0).astype(bool).sum())
    out.append(f"<p class=\"meta\">{len(order)} run{'s' * (len(order) != 1)} from {first} to {last}, {analysed} "
               f"with an analysis; {len(claim_names)} claim{'s' * (len(claim_names) != 1)}.</p>")
    for key, k in (camp.groupby("campaign_id", sort=False) if len(camp) else ()):
        first, n = k.iloc[0], len(json.loads(k.iloc[0]["run_ids"] or "[]"))
        scope = f", {_e(first['campaign_scope'])}" if isinstance(first["campaign_scope"], str) else ""
        out.append(f"<p class=\"meta\">Campaign <code>{_e(_short(key))}</code> ({_e(first['profile'])}, {n} runs "
                   f"from {_date(first['started'])}{scope}): its verdicts over the runs, as its report tells them: "
                   f"{_tally_html(_tally(k))}</p>")
    if not claim_names:
        out.append("<p>No run of this study has an analysis in the ledger yet.</p>")
    rows_of = {c: mine[mine.claim.astype(str) == c] for c in claim_names}
    drawn = [c for c in claim_names if rows_of[c].reproduced.notna().any()]
    blank = [c for c in claim_names if c not in drawn]
    if claim_names:
        # the latest verdict beside the claim: on a phone the table scrolls sideways, and this is what is read first
        head = "".join(f"<th>{h}</th>" for h in ("claim", "latest verdict", "runs", *KINDS))
        body = []
        for i, c in enumerate(claim_names):
            rows, counts = rows_of[c], _tally(rows_of[c])
            link = f"<a href=\"#{anchor}-c{i}\">{_e(c)}</a>" if c in drawn else _e(c)
            latest, over = latest_verdict(rows, camp)
            body.append(f"<tr><td class=wrap>{link}</td><td class=\"wrap {_KIND_CLASS[kind(latest)]}\">{_e(latest)}"
                        f"<br><small>{_e(over)}</small></td><td class=num>{len(rows)}</td>"
                        + "".join(f"<td class=\"num {_KIND_CLASS[k] if counts[k] else ''}\">{counts[k]}</td>"
                                  for k in KINDS) + "</tr>")
        out.append("<div class=\"table\"><table><thead><tr>" + head + "</tr></thead><tbody>" + "".join(body)
                   + "</tbody></table></div>")
    for c in drawn:
        i, rows = claim_names.index(c), rows_of[c]
        out.append(f"<h3 id=\"{anchor}-c{i}\">{_e(c)}</h3><p>{_tally_html(_tally(rows))}</p>")
        out.append(f"<figure><img alt=\"{_e(study)}: {_e(c)}, every run's reproduced value and interval\" "
                   f"src=\"data:image/png;base64,{claim_figure(rows, order, look, c)}\"><figcaption>Each mark is one "
                   "run's reproduced value with its interval (the bar); the dashed line is the article's number. "
                   "Colour: machine; mark: PostgreSQL build.</figcaption></figure>")
        out.append(_claim_table(rows, order, names))
    if blank:
        out.append("<h3>Claims no run could put a number on</h3><ul>")
        out += [f"<li><b>{_e(c)}</b>: {_tally_html(_tally(rows_of[c]))}</li>" for c in blank]
        out.append("</ul>")
    out.append(f"<h3>What the runs cost</h3><figure><img alt=\"{_e(study)}: wall time, measuring share and own CPU "
               f"by run\" src=\"data:image/png;base64,{cost_figure(order, look)}\"><figcaption>Wall time of each run, "
               "the share of it spent measuring, and the CPU seconds pglab itself used; a run without a mark did not "
               "record that number.</figcaption></figure>")
    out.append(f"<details><summary>Every run of {_e(study)}</summary>{_runs_table(order, names)}</details>")
    return "".join(out)


def opening(runs: pd.DataFrame, studies: list[str], names: dict[str, str]) -> str:
    """What the page is: how many runs of which studies, on which machines and PostgreSQL builds, when."""
    if not len(runs):
        return ("<p class=\"question\">The ledger holds no runs yet: <code>pglab ledger add</code> adds the "
                "pipeline's runs, <code>pglab collect</code> each run it makes.</p>")
    versions = sorted({pg_label(v, f) for v, f in zip(runs.pg_version, runs.pg_family, strict=True)})
    when = [t for t in (started_at(s) for s in runs.started) if not pd.isna(t)]
    span = f"from {min(when):%Y-%m-%d} to {max(when):%Y-%m-%d}" if when else "at unknown dates"
    n_m = len(names)
    out = [f"<p class=\"question\">Every run in the ledger: {len(runs)} run{'s' * (len(runs) != 1)} of "
           f"{len(studies)} stud{'ies' if len(studies) != 1 else 'y'} on {n_m} machine{'s' * (n_m != 1)}, "
           f"{_e(', '.join(versions))}, {span}. Per claim, each run's reproduced value against the article's number "
           "shows whether a verdict holds from run to run, machine to machine and build to build.</p>",
           "<p class=\"meta\">Studies: " + " | ".join(f"<a href=\"#s{i}\">{_e(s)}</a>" for i, s in
                                                       enumerate(studies, 1)) + ". Each study's latest report: "
           "<a href=\"index.html\">index.html</a>.</p>"]
    head = "".join(f"<th>{h}</th>" for h in ("machine", "what it is", "runs", "PostgreSQL"))
    body = []
    for key, name in names.items():
        mine = runs[runs.machine_key.astype(str) == key]
        label = mine.machine.dropna()
        pgs = sorted({pg_label(v, f) for v, f in zip(mine.pg_version, mine.pg_family, strict=True)})
        body.append(f"<tr><td>{name}</td><td class=wrap>{_e(label.iloc[0] if len(label) else 'unknown machine')}</td>"
                    f"<td class=num>{len(mine)}</td><td>{_e(', '.join(pgs))}</td></tr>")
    return "".join(out) + f"<div class=\"table\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>" \
        "</table></div>"


def history_html(claims: pd.DataFrame, runs: pd.DataFrame, left_out: int = 0,
                 campaigns: pd.DataFrame | None = None) -> str:
    """The page (pure: the same frames give the same bytes); ``left_out``: the marked runs not drawn;
    ``campaigns``: the ledger's campaigns' verdicts over runs (``book.campaigns``)."""
    figures.style()
    runs = runs.sort_values(["started", "run_id"], kind="stable", na_position="first").reset_index(drop=True)
    claims = claims.sort_values(["started", "run_id", "claim"], kind="stable", na_position="first")
    studies, look = studies_of(runs), style_of(runs)
    body = ["<h1>pglab: every run so far</h1>", opening(runs, studies, look[2])]
    body += [f"<p>{left_out} run(s) marked for a busy or moving machine (docs/running.md) left out; <code>pglab "
             "ledger history --with-marked</code> draws them.</p>"] if left_out else []
    for i, study in enumerate(studies, 1):
        order = runs[runs.study == study].reset_index(drop=True)
        body.append(study_section(study, claims, order, look, f"s{i}", campaigns))
    page = report._page("pglab history: every run in the ledger", "".join(body))
    framed = page.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + VIEWPORT, 1)
    framed = framed.replace("</style>", _STYLE + "</style>", 1)
    if VIEWPORT not in framed or _STYLE not in framed:
        raise RuntimeError("report._page changed its head: pglab.views.history cannot add its viewport tag")
    return framed


def write(ledger: Ledger, out: Path, with_marked: bool = False) -> Path:
    """The page of ``ledger``'s runs and claims, written to ``out``; the marked runs left out unless ``with_marked``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    claims, runs = book.claims(ledger, with_marked=with_marked), book.runs(ledger, with_marked=with_marked)
    out.write_text(history_html(claims, runs, 0 if with_marked else book.marked_count(ledger), book.campaigns(ledger)),
                   encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pglab.views.history", description=__doc__.split("\n\n")[0])
    p.add_argument("--ledger", help="a SQLite file or postgresql://user@host/db (default $PGLAB_LEDGER, else yours, "
                                    "data/ledger.sqlite, with the shipped runs; the pipeline's stage draws "
                                    "data/ledger/reference.sqlite.gz alone)")
    p.add_argument("--out", type=Path, default=Path("reports/history.html"), help="the page to write")
    p.add_argument("--with-marked", action="store_true", help="draw the runs marked for a busy or moving machine too")
    a = p.parse_args(argv)

    def run(a: argparse.Namespace) -> int:
        url = location(a.ledger)
        where = parse(url)
        if not is_yours(a.ledger) and where.path is not None and not where.path.exists():
            raise UserError(f"ledger {shown(url)}: no such file (pglab ledger add fills one)")
        with Ledger(url) as ledger:
            if is_yours(a.ledger):
                book.with_reference(ledger)
            print(write(ledger, a.out, a.with_marked))
        return 0

    return exits.run(run, a)


if __name__ == "__main__":
    sys.exit(main())
