"""Your run beside the shipped reference: claim by claim, and what differs between the two machines.

Why: a user's run is worth most next to the run that shipped (the one the docs quote): the same claims, the
same rules, two machines. A report of your run (``yours/reports/<study>.html``) opens its verdicts with this
table, and your index counts both. The reference is what ``dvc pull`` checks out (``data/raw/<study>``,
``data/derived/<study>/comparison.csv``); without it the section says how to get it.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import build_family, comparable, tally
from pglab.runs import record

#: a verdict's CSS class in the reports (pglab.views.report's table colours)
VERDICT_CLASS = {"held": "held", "did not hold": "not", "not resolvable here": "open",
                 "not measurable here": "na"}


@dataclass(frozen=True)
class Side:
    """One run as the reports read it: its comparison table and manifest (the campaign's last run's)."""

    comparison: pd.DataFrame
    manifest: dict[str, Any]


def read(root: Path, study: str) -> Side | None:
    """The analysed run under ``root`` (``data/raw/<study>`` and ``data/derived/<study>``), or None."""
    raw, table = root / "data" / "raw" / study, root / "data" / "derived" / study / "comparison.csv"
    if not (raw / record.MANIFEST).exists() or not table.exists():
        return None
    return Side(pd.read_csv(table), record.read(raw, study))


def num(value: Any, digits: int = 3) -> str:
    """A value in a report's cell: ``digits`` significant digits, ``-`` when missing, text escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "-"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}g}"
    return html.escape(str(value))


def value(c: dict[str, Any]) -> str:
    """A claim's measured value and its interval, ``1.19 [1.17, 1.2]``, or ``-``."""
    low, high = c.get("ci_low"), c.get("ci_high")
    shown = num(c.get("reproduced"))
    return shown + (f" [{num(low)}, {num(high)}]" if shown != "-" and not pd.isna(low) else "")


def verdict_cell(c: dict[str, Any] | None, title: str) -> str:
    if c is None:
        return f"<td title=\"{title}\">not in this run</td>"
    v = str(c.get("verdict", ""))
    emu = " <small>(under an emulation)</small>" if tally.emulated(c) else ""
    return f"<td title=\"{title}\" class=\"{VERDICT_CLASS.get(v, '')}\">{html.escape(v)}{emu}</td>"


def claims_rows(reference: pd.DataFrame, yours: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per claim of either run, in the reference's order: the article's value, each run's value and
    verdict (the claim's dict, or None when that run lacks it), and whether the verdicts agree."""
    ref = {str(c["claim"]): c for c in reference.to_dict("records")}
    own = {str(c["claim"]): c for c in yours.to_dict("records")}
    rows = []
    for claim in dict.fromkeys([*ref, *own]):
        r, y = ref.get(claim), own.get(claim)
        published = next((c.get("published") for c in (r, y) if c is not None and not pd.isna(c.get("published"))),
                         None)
        rows.append({"claim": claim, "published": published, "reference": r, "yours": y,
                     "agree": r is not None and y is not None and r.get("verdict") == y.get("verdict")})
    return rows


def machine_differences(reference: dict[str, Any], yours: dict[str, Any]) -> list[comparable.Difference]:
    """What differs between the runs in what a verdict can rest on: host facts, tools, placement, parameters (the
    fields ``pglab compare`` refuses on; notes such as the date or the code revision left out)."""
    return comparable.refused(comparable.differences(reference, yours))


def _probe(manifest: dict[str, Any]) -> dict[str, Any]:
    """The start's probe of the run's first host (``pglab.runs.machine``); {} for a run older than the probes."""
    before = (manifest.get("machine") or {}).get("before") or {}
    return next(iter(before.values()), {}) if isinstance(before, dict) else {}


def _statement(manifest: dict[str, Any]) -> float | None:
    """The primary's (else the first node's) statement time before the first point (``statement_probe``)."""
    before = ((manifest.get("machine") or {}).get("statement_us") or {}).get("before") or {}
    return before.get("primary") or next((v for v in before.values() if v), None)


#: what the verdicts rest on, as the start's probe measured it: (label, the probe's key, how it is shown)
RESTS_ON = (("the disk's flush rate (fdatasync/s)", "flush_ops_s", lambda v: f"{v:,.0f}"),
            ("CPU probe (ms for a fixed loop: lower is faster)", "cpu_loop_ms", lambda v: f"{v:g}"),
            ("cores", "cores", lambda v: f"{v}"),
            ("boot", "boot_id", lambda v: str(v)[:8]),
            ("load at the start", "load1", lambda v: f"{v:.1f}"),
            ("other processes' CPU at the start", "others", lambda v: f"{v:.0%}"))


def rests_on_html(reference: dict[str, Any], yours: dict[str, Any]) -> str:
    """The machine as each run found it, in what the verdicts rest on, before the long list of what differs: a
    flush rate 9x apart or another boot explains a different verdict before any parameter does."""
    a, b = _probe(reference), _probe(yours)
    out = []
    for label, key, show in RESTS_ON:
        va, vb = a.get(key), b.get(key)
        if va is None and vb is None:
            continue
        cells = [html.escape(show(v)) if v is not None else "-" for v in (va, vb)]
        mark = " class=\"warn\"" if cells[0] != cells[1] and key in ("boot_id", "cores") else ""
        out.append(f"<tr{mark}><td>{html.escape(label)}</td><td class=num>{cells[0]}</td>"
                   f"<td class=num>{cells[1]}</td></tr>")
    statements = [_statement(m) for m in (reference, yours)]
    if any(statements):
        cells = [f"{v:,.0f}" if v else "-" for v in statements]
        out.append("<tr><td>a statement on the primary (us for SELECT 1 before the first point: lower is faster)</td>"
                   f"<td class=num>{cells[0]}</td><td class=num>{cells[1]}</td></tr>")
    builds = [" ".join(str(x) for x in ((m.get("postgres_build") or {}).get(k) for k in ("version", "family")) if x)
              or str((m.get("tools") or {}).get("postgres") or "-") for m in (reference, yours)]
    out.append(f"<tr><td>PostgreSQL build</td><td>{html.escape(builds[0])}</td><td>{html.escape(builds[1])}</td></tr>")
    marks = [html.escape("; ".join((m.get("machine") or {}).get("marked") or []) or "none") for m in (reference, yours)]
    out.append(f"<tr><td>marked (busy or moved)</td><td class=wrap>{marks[0]}</td><td class=wrap>{marks[1]}</td></tr>")
    return ("<p><b>The machine as each run found it</b> (the probe before its first point; docs/running.md):</p>"
            "<div class=\"table\"><table><thead><tr><th>what the verdicts rest on</th><th>reference</th>"
            f"<th>yours</th></tr></thead><tbody>{''.join(out)}</tbody></table></div>")


def section_html(study: str, reference: Side | None, yours: Side) -> str:
    """The "beside the reference" section of your report (empty reference: how to get it)."""
    head = "<h2 id=\"beside\">Your run beside the shipped reference</h2>"
    if reference is None:
        return (head + "<p>The shipped reference run is not checked out here: <code>dvc pull</code> brings it "
                f"(data/raw/{html.escape(study)}, data/derived/{html.escape(study)}), then "
                f"<code>pglab report {html.escape(study)}</code> writes this page again.</p>")
    rows = claims_rows(reference.comparison, yours.comparison)
    body = []
    for r in rows:
        ref, own = r["reference"], r["yours"]
        body.append(f"<tr><td title=\"claim\">{html.escape(r['claim'])}</td>"
                    f"<td title=\"article\" class=num>{num(r['published'])}</td>"
                    f"<td title=\"reference\" class=num>{value(ref) if ref else '-'}</td>"
                    f"{verdict_cell(ref, 'reference verdict')}"
                    f"<td title=\"yours\" class=num>{value(own) if own else '-'}</td>"
                    f"{verdict_cell(own, 'your verdict')}"
                    f"<td title=\"verdicts\">{'same' if r['agree'] else '<b>differs</b>'}</td></tr>")
    agree = sum(r["agree"] for r in rows)
    diffs = machine_differences(reference.manifest, yours.manifest)
    what = rests_on_html(reference.manifest, yours.manifest) + (
        "<p>Nothing else a verdict rests on differs between the two runs (host facts by class, tools, "
        "placement, parameters): a different verdict is the spread between runs.</p>" if not diffs else
        "<p><b>What else differs between the two runs</b> (what a verdict can rest on):</p><div class=\"table\">"
        "<table><thead><tr><th>field</th><th>reference</th><th>yours</th></tr></thead><tbody>"
        + "".join(f"<tr><td>{html.escape(d.field)}</td><td class=wrap>{html.escape(comparable._show(d.value_a))}"
                  f"</td><td class=wrap>{html.escape(comparable._show(d.value_b))}</td></tr>" for d in diffs[:40])
        + "</tbody></table></div>" + (f"<p class=\"meta\">and {len(diffs) - 40} more (`pglab compare`).</p>"
                                      if len(diffs) > 40 else ""))
    if any(d.field == "postgres_build" for d in diffs):
        aa = build_family.latest()
        what += ("<p><b>Your run's servers are another PostgreSQL build than the reference's</b>, so no verdict of "
                 "one is evidence for the other's. " + (f"The build family's A/A on this machine: "
                 f"{html.escape(build_family.words(aa))}.</p>" if aa else "Whether the build family matters on "
                 "this machine is what <code>pglab builds aa</code> measures (docs/majors.md).</p>"))
    ref_run, own_run = (html.escape(f"{m.get('run_id', '?')}, {str(m.get('start', ''))[:10]}")
                        for m in (reference.manifest, yours.manifest))
    return (head + f"<p>{agree} of {len(rows)} claims have the same verdict in your run ({own_run}) as in the "
            f"shipped reference ({ref_run}; its report is reports/{html.escape(study)}.html after "
            "<code>dvc pull</code>).</p>"
            "<div class=\"table\"><table class=\"beside\"><thead><tr><th>claim</th><th>article</th>"
            "<th>reference: value [95% interval]</th><th>reference verdict</th><th>yours: value [95% interval]</th>"
            "<th>your verdict</th><th>verdicts</th></tr></thead><tbody>" + "".join(body)
            + "</tbody></table></div>" + what)


def tally_cell(side: Side | None) -> str:
    """A run's verdicts counted, in the four verdicts' order (those under an emulation apart), or ``-``."""
    if side is None:
        return "-"
    own, under = tally.split(side.comparison)
    cells = [f"<span class=\"{VERDICT_CLASS[v]}\">{int((own == v).sum())} {html.escape(v)}</span>"
             for v in VERDICT_CLASS if (own == v).any()]
    if len(under):
        cells.append("<small>under an emulation:</small> " + ", ".join(
            f"<span class=\"{VERDICT_CLASS[v]}\">{int((under == v).sum())} {html.escape(v)}</span>"
            for v in VERDICT_CLASS if (under == v).any()))
    return "<br>".join(cells)
