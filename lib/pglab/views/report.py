"""One self-contained HTML report per study, and an index of them: what a DBA opens first.

Why: the executed notebook opens on code and papermill's injected cell, with the verdicts far below. A
report says the study's question, then the verdict table (claim, article, reproduced median and its
interval in words, noise floor, verdict, evidence), where it ran, the figures with their captions,
the details, and the parameters last, folded. Every image is embedded and nothing is loaded from any
host, so the file opens offline; nothing in it depends on when it was made, so an analysis of the same
run writes the same bytes (it is a DVC output). Its text from params, inventories, servers and tools stays text:
the whole body passes ``report_notebook.clean_html`` (nothing that loads, navigates, submits or runs), and the
policy forbids loading, form posts and ``<base>``.

``python -m pglab.views.report STUDY`` (the analyze stage, after papermill) normalises
``reports/STUDY.ipynb`` and writes ``reports/STUDY.html``; ``--index`` writes ``reports/index.html``.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import placement, tally
from pglab.runs import record
from pglab.studies import STUDIES, declaration
from pglab.views import beside, fidelity_html, majors_table, report_notebook, takeaway
from pglab.views.report_notebook import Notebook
from pglab.views.verdict_table import verdict_rows
from pglab.views.where_ran import allowed_html, emulation_html, machine_html

#: the verdict table's columns: the rule and the machine property each verdict rests on sit beside it
VERDICT_COLUMNS = ("claim", "article", "reproduced", "rule", "verdict", "depends on", "evidence")


class _Questions(Mapping[str, str]):
    """Each study's question in one sentence, from its declaration (``pglab/studies/<study>/declaration.py``): the
    first line of its report and its row of the index. Read on demand, one study at a time: a study's report reads
    its own declaration only, so its DVC analyze stage depends on no other study's (and no collect stage imports a
    declaration: rewording a question re-measures nothing)."""

    def __getitem__(self, study: str) -> str:
        if study not in STUDIES:
            raise KeyError(study)
        return declaration(study).question

    def __iter__(self) -> Iterator[str]:
        return iter(STUDIES)

    def __len__(self) -> int:
        return len(STUDIES)


QUESTIONS: Mapping[str, str] = _Questions()

_VERDICT_CLASS = beside.VERDICT_CLASS
#: at phone width (700 px and less) the verdict, index and side-by-side tables become a card per row, each cell under
#: its column's name (its title): a table seven columns wide cannot be read on a phone, nor scrolled sideways
_STYLE = """
body{font:15px/1.45 system-ui,"IPAGothic","Noto Sans CJK JP",sans-serif;margin:0 auto;max-width:1180px;
padding:0 24px 48px;color:#222}
h1{font-size:1.6em;margin:28px 0 4px}h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
.question{font-size:1.15em;margin:6px 0 18px}.meta{color:#555}
table{border-collapse:collapse;margin:8px 0;font-size:.92em}th,td{border:1px solid #ccc;padding:4px 8px;
vertical-align:top;text-align:left}th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}
.held{background:#dff3df}.not{background:#f8dcdc}.open{background:#fff5d6}.na{background:#eeeeee}
.warn{background:#fff5d6}
.hw{background:repeating-linear-gradient(135deg,#fbe9cf 0 8px,#f6dfbd 8px 16px)}
.takeaway{background:#f6f8fa;border-left:4px solid #8aa;padding:8px 12px;margin:0 0 12px}
code{font-size:.92em;background:#f2f2f2;padding:0 2px;border-radius:3px}
figure{margin:18px 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#444;margin-top:4px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:.85em}details{margin:24px 0}
summary{cursor:pointer;font-weight:600}.table{overflow-x:auto}
.dataframe thead th{text-align:right}.dataframe tbody th{vertical-align:top}
@media (max-width:700px){body{padding:0 12px 32px}
table.verdicts thead,table.index thead,table.beside thead,table.majors thead{display:none}
table.verdicts tr,table.index tr,table.beside tr,table.majors tr{display:block;border:1px solid #ccc;margin:0 0 12px}
table.verdicts td,table.index td,table.beside td,table.majors td,table.majors tbody th{display:block;border:0;
border-bottom:1px solid #eee;text-align:left}
table.verdicts td::before,table.index td::before,table.beside td::before,table.majors td::before{content:attr(title);
display:block;
font-size:.8em;font-weight:600;color:#555}}
"""


#: what the four verdicts mean, under the index's table (the study reports say the same above their figures)
LEGEND_EMULATED = (" A verdict marked <i>under an emulation</i> was made with that property of the article's machine "
                   "imitated and measured (docs/emulation.md), and is counted apart; <span class=\"hw\">did not hold, "
                   "hardware differs</span>: the interval lies outside, but the emulation left part of what the claim "
                   "depends on unlike the article's (the row says which), so it is no refutation.")


def legend(emulated: bool = True) -> str:
    """The verdicts' words; the emulation's two only where a verdict on the page uses them (a key to outcomes that
    never appear confused a reader of the index)."""
    return ("<p class=\"meta\"><span class=\"held\">held</span>: the 95% interval lies where the claim's rule "
            "wants it. <span class=\"not\">did not hold</span>: it lies wholly outside. <span class=\"open\">not "
            "resolvable here</span>: neither yet (the report says what would settle it). <span class=\"na\">not "
            "measurable here</span>: the run lacked what the claim needs, or the machine it ran on differs from the "
            "article's in what the claim depends on, or an emulation of the article's machine did not come close "
            "enough at the claim's own points (what the interval alone would say is in the report, never counted): a "
            "difference of hardware is grey, never red." + (LEGEND_EMULATED if emulated else "") + "</p>")


def glossary_href(root: Path) -> str:
    """Where docs/glossary.md is from ``root``/reports/ (the checkout's, or yours/ inside it); '' if nowhere."""
    for up, base in (("../", root), ("../../", root.parent)):
        if (base / "docs" / "glossary.md").exists():
            return f"{up}docs/glossary.md"
    return ""


def terms(href: str) -> str:
    """The line under every legend: where the words a report uses are explained."""
    where = f"<a href=\"{html.escape(href)}\">the glossary</a>" if href else "docs/glossary.md"
    return (f"<p class=\"meta\">Terms (block, run, campaign, sitting, A/A, noise floor, interval over runs, "
            f"leave-one-out, here verdict, emulation): {where}.</p>")


def question(study: str) -> str:
    return QUESTIONS.get(study, "")


def article(study: str) -> str:
    """The article a study reproduces, in English ('002: PostgreSQL streaming replication, part 3: ...')."""
    return declaration(study).article if study in STUDIES else ""


def machine_facts(manifest: dict[str, Any], fsync_ops_s: float | None) -> str:
    """The properties of the hardware a verdict rests on, in words: cores, machines, the disk's flush rate."""
    hosts = manifest.get("hosts", {})
    cores = sorted({int(f["cores"]) for f in hosts.values() if f.get("cores")})
    machines = placement.machines(manifest)
    words = [f"{'one machine' if len(machines) == 1 else f'{len(machines)} machines'}"
             + (f" of {'/'.join(map(str, cores))} cores" if cores else "")
             + (" shared by every node and client" if len(machines) == 1 else "")]
    if fsync_ops_s:
        words.append(f"disk: {fsync_ops_s:,.0f} fdatasync/s")
    return "; ".join(words)


def runs_sentence(comparison: pd.DataFrame, manifest: dict[str, Any]) -> str:
    """What the verdicts rest on: several runs (and the figures are the last one's), or one run, said plainly."""
    n = int(comparison["runs"].max()) if "runs" in comparison and comparison["runs"].notna().any() else 1
    across = sorted(x for x in comparison.get("scope", pd.Series(dtype=str)).dropna() if str(x).startswith("across"))
    if n > 1 and across:
        return (f"The verdicts rest on {n} independent runs in {across[-1][7:]}: the interval is a 95% t interval "
                "over the sittings' means (two levels, sitting and run), a verdict needs 3 runs a sitting, and each "
                "run's own verdict is in the evidence. The figures and tables below are the last run's "
                f"({html.escape(str(manifest.get('run_id', '?')))}).")
    if n > 1:
        return (f"The verdicts rest on {n} independent runs of one sitting (each on fresh servers, with a seed of "
                "its own): the interval is a 95% t interval over the runs' medians, a verdict needs 3 runs and must "
                "stay the same with any one run left out, and each run's own verdict is in the evidence. The figures "
                "and tables "
                f"below are the campaign's last run ({html.escape(str(manifest.get('run_id', '?')))}); each run's "
                "own tables are in data/derived/&lt;study&gt;/runs/.")
    return ("One run: each interval is over the blocks of that run only, and another run on the same machine may "
            "differ as much as its blocks do. A campaign (runs: 5 in the profile) decides over runs.")


def _runs(comparison: pd.DataFrame) -> int:
    """How many runs the verdicts are over (1 for a single run)."""
    return int(pd.to_numeric(comparison.get("runs"), errors="coerce").max()) if "runs" in comparison else 1


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _table(rows: list[dict[str, str]], columns: tuple[str, ...], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        tr_cls = r.get("_class") or _VERDICT_CLASS.get(html.unescape(r.get("verdict", "")), "")
        # the column's name as the cell's title: at phone width each row is a card, every cell under its name
        cells = "".join(f"<td title=\"{html.escape(c)}\"{' class=num' if c == 'article' else ''}>{r.get(c, '')}</td>"
                        for c in columns)
        body.append(f"<tr class=\"{tr_cls}\">{cells}</tr>")
    return f"<table class=\"{cls}\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def run_facts(manifest: dict[str, Any]) -> dict[str, str]:
    """What the index and a report's header say of a run (all from its manifest)."""
    hosts = manifest.get("hosts", {})
    first = next(iter(hosts.values()), {})
    postgres = str(manifest.get("tools", {}).get("postgres", "")).replace("postgres (PostgreSQL) ", "")
    return {"run": str(manifest.get("run_id", "?")), "profile": str(manifest.get("profile", "?")),
            "status": str(manifest.get("status", "?")), "date": str(manifest.get("start", ""))[:10],
            "postgres": postgres or "?",
            "machine": f"{first.get('cpu_model', '?')}, {first.get('cores', '?')} cores, "
                       f"{int(first.get('mem_total_kb', 0)) // 2**20} GiB, {first.get('os', '?')}",
            "git": str(manifest.get("git_revision", "?"))[:12]}


def _fsync(derived: Path) -> float | None:
    path = derived / "fsync.csv"
    if not path.exists():
        return None
    f = pd.read_csv(path)
    rows = f[f.method == "fdatasync"]
    return float(rows.ops_s.iloc[0]) if len(rows) else None


def study_html(study: str, nb: Notebook, comparison: pd.DataFrame, manifest: dict[str, Any],
               fsync_ops_s: float | None, beside_html: str = "", summary: pd.DataFrame | None = None,
               majors: pd.DataFrame | None = None, fidelity: pd.DataFrame | None = None,
               csvs: tuple[str, ...] = (), glossary: str = "") -> str:
    """The report of one study (pure: the same inputs give the same bytes); ``beside_html``: your run's claims
    beside the shipped reference's (``pglab.views.beside``), after the verdicts; ``summary``: its summary.csv, what
    the takeaway says was measured when no claim got a number; ``majors``: its claims x PostgreSQL majors table."""
    asked = question(study) or nb.title
    facts, run = machine_facts(manifest, fsync_ops_s), run_facts(manifest)
    number, _, title = article(study).partition(": ")
    out = [f"<h1>{html.escape(study)}: {html.escape(nb.title.split(': ', 1)[-1])}</h1>",
           f"<p class=\"question\"><b>The question:</b> {html.escape(asked)}</p>",
           f"<p class=\"meta\"><b>The article ({html.escape(number)}):</b> {html.escape(title)}</p>" if title else "",
           takeaway.paragraph(comparison, manifest, summary),
           "<h2 id=\"verdicts\">Verdicts</h2>",
           "<div class=\"table\">" + _table(verdict_rows(comparison, facts, manifest), VERDICT_COLUMNS, "verdicts")
           + "</div>",
           "<p class=\"meta\">Each claim is a ratio measured in blocks that run every configuration back to back, "
           "divided within its block by the baseline. The verdict is the rule beside it applied to the 95% interval "
           "(no verdict while baseline / baseline excludes 1); the study's docs page states every rule and margin. "
           f"{runs_sentence(comparison, manifest)}</p>", legend() + terms(glossary), beside_html,
           "" if majors is None or majors.empty else majors_table.section_html(study, majors),
           "" if fidelity is None else fidelity_html.section_html(
               fidelity, (manifest.get("emulation") or {}).get("calibration"), _runs(comparison)),
           "<h2 id=\"where\">Where it ran</h2>",
           f"<p>{html.escape(placement.summary(manifest))}</p>", emulation_html(manifest),
           allowed_html(study, manifest), machine_html(manifest),
           "<p class=\"meta\">" + " | ".join(f"{k}: {html.escape(v)}" for k, v in run.items()) + "</p>"]
    figures = [f for s in nb.sections for f in s.figures]
    out.append("<h2 id=\"figures\">Figures</h2>")
    empty = takeaway.nothing_reproduced(comparison)  # the comparison chart has nothing to draw: folded, said why
    out += [report_notebook.figure_html(i, fig, empty and fig.name == "published_vs_reproduced")
            for i, fig in enumerate(figures, 1)]
    out.append("<h2 id=\"details\">Details</h2>")
    if csvs:  # the tables below are rounded for reading: every digit and column is in the analysis' CSVs
        out.append("<p class=\"meta\">Every table in full, as CSV: " + ", ".join(
            f"<a href=\"../data/derived/{html.escape(study)}/{html.escape(c)}\">{html.escape(c)}</a>" for c in csvs)
            + ".</p>")
    out.append(f"<details open><summary>How the study works</summary>{nb.intro}</details>")
    for s in nb.sections:
        if not s.parts and s.figures:
            continue
        shown = [f"Figure {figures.index(f) + 1}" for f in s.figures]
        see = f"<p class=\"meta\">See {', '.join(shown)}.</p>" if shown else ""
        out.append(f"<h3>{report_notebook.inline(s.heading)}</h3>{see}{''.join(s.parts)}")
    out.append(f"<details><summary>Parameters (papermill)</summary><pre>{html.escape(nb.parameters)}</pre></details>")
    return _page(f"pglab report: {study}", "".join(out))


#: nothing loads but embedded images and the page's own style, and nothing leaves the page by itself: no form
#: posts (form-action), no <base> re-points its links. A <meta http-equiv=refresh> is not covered by any
#: directive Chromium supports (navigate-to never shipped), so ``_page`` also keeps no element but
#: ``report_notebook.SAFE_TAGS`` in the body: no meta, form, base, script, iframe, object or link is written.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; form-action 'none'; base-uri 'none'"


def _page(title: str, body: str) -> str:
    """The page: its own head, and a body cleaned of everything that loads, navigates, submits or runs
    (``report_notebook.clean_html``: the one gate every part of a report passes, whoever escaped it before)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body>{report_notebook.clean_html(body)}</body></html>\n")


def write_study(study: str, root: Path, reference: Path | None = None) -> Path:
    """``reports/<study>.ipynb`` normalised, ``reports/<study>.html`` written (both under ``root``); with
    ``reference`` (the checkout whose data/ holds the shipped run), the run beside it claim by claim."""
    executed = root / "reports" / f"{study}.ipynb"
    report_notebook.normalize(executed)
    derived = root / "data" / "derived" / study
    manifest = record.read(root / "data" / "raw" / study, study)
    comparison = pd.read_csv(derived / "comparison.csv")
    side = "" if reference is None else beside.section_html(study, beside.read(reference, study),
                                                             beside.Side(comparison, manifest))
    summary = pd.read_csv(derived / "summary.csv") if (derived / "summary.csv").exists() else None
    majors = majors_table.read(root / "data" / "majors" / f"{study}.csv")  # shipped, or `pglab majors`'s in yours/
    fid = pd.read_csv(derived / "fidelity.csv") if (derived / "fidelity.csv").exists() else None
    page = study_html(study, report_notebook.read(executed), comparison, manifest, _fsync(derived), side, summary,
                      majors, fid, tuple(sorted(p.name for p in derived.glob("*.csv"))), glossary_href(root))
    out = root / "reports" / f"{study}.html"
    out.write_text(page, encoding="utf-8")
    return out


def index_html(root: Path, reference: Path | None = None) -> str:
    """The studies analysed under ``root``: their verdicts counted, run ids, machine, PostgreSQL version, date,
    links; with ``reference`` (the checkout holding the shipped runs), the reference's verdicts beside each."""
    rows, sides = [], {}
    for study in STUDIES:
        side = beside.read(root, study)
        if side is None:
            continue
        sides[study] = side
        run = run_facts(side.manifest)
        majors = majors_table.read(root / "data" / "majors" / f"{study}.csv")  # its claims x majors section
        rows.append({"study": f"<a href=\"{study}.html\">{html.escape(study)}</a>" + (
            f"<br><a href=\"{study}.html#majors\">on PostgreSQL {majors.major.min()}-{majors.major.max()}</a> (a table "
            "of its own)"
            if majors is not None and len(majors) else ""),
                     "question": html.escape(question(study)), "verdicts": beside.tally_cell(side),
                     **({"reference": beside.tally_cell(beside.read(reference, study))} if reference else {}),
                     **{k: html.escape(run[k]) for k in ("run", "profile", "date", "postgres", "machine")}})
    cols = ("study", "question", "verdicts", *(("reference",) if reference else ()), "run", "profile", "date",
            "postgres", "machine")
    both = [tally.split(side.comparison) for side in sides.values()]
    total = pd.concat([b[0] for b in both]) if both else pd.Series(dtype=str)
    under = pd.concat([b[1] for b in both]) if both else pd.Series(dtype=str)
    counted = ", ".join(f"<span class=\"{_VERDICT_CLASS[v]}\">{int((total == v).sum())} {html.escape(v)}</span>"
                        for v in _VERDICT_CLASS)
    if len(under):
        counted += ("; and, made with the article's machine imitated (an emulated disk flush or a core per node, "
                    "measured; counted apart): " + ", ".join(
                        f"<span class=\"{_VERDICT_CLASS[v]}\">{int((under == v).sum())} {html.escape(v)}</span>"
                        for v in _VERDICT_CLASS if (under == v).any()))
    gaps = sum(1 for side in sides.values() for c in side.comparison.to_dict("records")
               if c["verdict"] == "did not hold" and takeaway.hardware_gap(c, side.manifest))
    if gaps:
        counted += (f"; <span class=\"hw\">{gaps} of those that did not hold: hardware differs</span> (the emulation "
                    "left part of what the claim depends on unlike the article's machine: no refutation)")
    title, lead = (("pglab: your runs beside the shipped reference",
                    "Your runs of the studies (in yours/), each claim's verdict beside the shipped reference run's "
                    "(the <b>reference</b> column; the verdicts column is yours). Open a study for its claims side "
                    "by side and what differs between the two machines.") if reference else
                   ("pglab: five PostgreSQL deployment studies, reproduced",
                    "Each study re-runs a published benchmark and says, claim by claim, whether the article's "
                    "number held on the machine it ran on (the machine column). Open a study for its verdict "
                    "table, figures and details."))
    body = (f"<h1>{title}</h1><p class=\"question\">{lead}</p>"
            + takeaway.glance({s: (side.comparison, side.manifest) for s, side in sides.items()})
            + f"<p><b>All {len(total) + len(under)} claims{' of your runs' if reference else ''}:</b> {counted}.</p>"
            + f"<div class=\"table\">{_table(rows, cols, 'index')}</div>"
            + legend(bool(len(under) or gaps)) + terms(glossary_href(root))
            + "<p class=\"meta\">Every run so far, claim by claim: <a href=\"history.html\">history.html</a> "
            "(<code>python -m pglab.views.history</code> writes it from the ledger).</p>")
    return _page("pglab reports", body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pglab.views.report", description=__doc__.split("\n\n")[0])
    p.add_argument("study", nargs="?", choices=STUDIES, help="write reports/STUDY.html from reports/STUDY.ipynb")
    p.add_argument("--index", action="store_true", help="write reports/index.html over every study")
    p.add_argument("--root", type=Path, default=Path("."), help="the checkout (default: here)")
    p.add_argument("--reference", type=Path, help="a checkout holding the shipped runs: each claim of the run "
                   "under --root beside the reference's (what `pglab report` writes into yours/)")
    a = p.parse_args(argv)
    if bool(a.study) == a.index:
        p.error("give one study, or --index")
    if a.index:
        (a.root / "reports").mkdir(exist_ok=True)
        (a.root / "reports" / "index.html").write_text(index_html(a.root, a.reference), encoding="utf-8")
    else:
        write_study(a.study, a.root, a.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
