"""The verdict table of a study's report: one row per claim, its cells escaped and in words.

Why its own module: the verdict row is what every view of a claim shows first (the report, your run beside
the reference); its evidence (the note, the A/A check, the spread over runs, leave-one-out, what would settle
it) is folded beneath a short summary so that the cell a reader meets stays short.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pglab.analysis import over_runs, tally
from pglab.analysis.stats import interval_words
from pglab.analysis.text import count
from pglab.views import report_notebook, takeaway
from pglab.views.beside import num as _num


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def verdict_rows(comparison: pd.DataFrame, facts: str,
                 manifest: Mapping[str, Any] | None = None) -> list[dict[str, str]]:
    """The verdict table's cells, escaped: one row per claim of ``comparison.csv``; a verdict that did not hold
    where an emulation left the machine unlike the article's (``takeaway.hardware_gap``) is marked as such."""
    rows = []
    for c in comparison.to_dict("records"):
        interval = (f" [{_num(c.get('ci_low'))}, {_num(c.get('ci_high'))}]"
                    if not pd.isna(c.get("ci_low")) else "")
        conf = c.get("confidence")
        words = interval_words(str(c.get("ci_method", "")), count(c),
                               confidence=0.95 if conf is None or pd.isna(conf) else float(conf))
        prop = _text(c.get("depends_on"))
        detail = f"here {_text(c.get('here'))}" + (f"; the article: {_text(c.get('article'))}"
                                                   if _text(c.get("article")) else "")
        machine = (f"<b>{html.escape(prop)}</b>: {folded(detail, max(CELL_WORDS - len(prop.split()), 10))}" if prop
                   else html.escape(facts))
        over = "runs" if c.get("ci_method") == over_runs.METHOD else "blocks"
        aa = (f"{_num(c['aa_median'])} [{_num(c.get('aa_low'))}, {_num(c.get('aa_high'))}] over "
              f"{int(c.get('aa_blocks', 0))} {over}" if not pd.isna(c.get("aa_median", math.nan)) else "")
        floor = c.get("noise_floor")
        extra = [f"blocks: {_text(c.get('stopped'))}" if _text(c.get("stopped")) else "",
                 f"A/A (baseline / baseline) {aa}" if aa else "",
                 f"noise floor +-{100 * floor:.0f}% per point" if isinstance(floor, float) and not math.isnan(floor)
                 else "", *spread_words(c)]
        gap = takeaway.hardware_gap(c, manifest or {}) if c["verdict"] == "did not hold" else ""
        rows.append({
            "_class": "hw" if gap else "",
            "claim": html.escape(str(c["claim"])),
            "article": _num(c.get("published")),
            "reproduced": f"{_num(c.get('reproduced'))}{interval}<br><small>{html.escape(words)}"
                          + (f"; {html.escape(_text(c.get('scope')))}" if _text(c.get("scope")) else "") + "</small>",
            "rule": html.escape(_text(c.get("rule", c.get("tested")))),
            "verdict": html.escape(str(c["verdict"])),
            "depends on": machine
            + ("<br><small><b>made under an emulation</b>, counted apart: "
               f"{html.escape(tally.emulated(c))}</small>" if tally.emulated(c) else "")
            + (f"<br><small><b>hardware differs</b>: {html.escape(gap)}; a difference of hardware, not a "
               "refutation</small>" if gap else ""),
            "evidence": folded("; ".join(x for x in (_text(c.get("note")), *extra) if x)),
        })
    return rows


#: a cell a reader meets is at most this many words; the rest is folded beneath it
CELL_WORDS = 25


def folded(text: str, words: int = CELL_WORDS) -> str:
    """Evidence as a cell: ``text`` escaped (its setting-like `code spans` as code); past ``words`` words, its
    first clause (at most that many words) with the whole folded beneath it, one click away."""
    if len(text.split()) <= words:
        return report_notebook.code_spans(html.escape(text))
    head = text.split("; ", 1)[0].split(": ", 1)[0]
    if len(head.split()) > words - 5:
        head = " ".join(head.split()[: words - 5])
    return (f"<details><summary>{report_notebook.code_spans(html.escape(head))}…</summary>"
            f"{report_notebook.code_spans(html.escape(text))}</details>")


def spread_words(c: Mapping[str, Any]) -> list[str]:
    """A verdict over runs: the spread within and between runs, the leave-one-out check, and what would settle it."""
    within, between, icc = (c.get(k, math.nan) for k in ("within_sd", "between_sd", "icc"))
    out = []
    if not pd.isna(within) or not pd.isna(between):
        out.append(f"spread of the log ratio: within a run SD {_num(within, 2)}, between runs SD {_num(between, 2)}"
                   + (f" (intra-class correlation {_num(icc, 2)})" if not pd.isna(icc) else ""))
    if _text(c.get("loo")):
        out.append(f"leave-one-run-out: {_text(c.get('loo'))}")
    if _text(c.get("settle")):
        out.append(f"to settle it: {_text(c.get('settle'))}")
    return out
