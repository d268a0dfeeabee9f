"""A study report's section "How close the emulation came": the article's own numbers beside the emulation's.

Why: a verdict made under an emulation is worth what the emulation is worth. The section says what the
calibration matched (and the slow motion, when this machine is slower than the article's), then every point the
article published beside the emulated median, its 95% interval and how far off it is, and the predictions' median
error. Pure: the same table and calibration give the same bytes; every text from the run is escaped.
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from pglab.analysis import fidelity
from pglab.analysis.stats import interval_words, method_for

ROLE_WORDS = {"calibration": "calibration point", "prediction": "prediction", "not measured": "not measured"}


def num(x: Any) -> str:
    """3 significant digits with thousands separators ("6,250", "12.3", "0.0123"); "-" when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)) or pd.isna(x):
        return "-"
    x = float(f"{float(x):.3g}")
    if x == 0:
        return "0"
    return f"{x:,.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def _k(k: float) -> str:
    return f"{k:.3g}"


def paragraph(calibration: dict[str, Any] | None, pooled: bool = False) -> str:
    """What the calibration did, in words: the points it matched, the CPU share found, the slow motion."""
    k = fidelity.k_of(calibration)
    if not calibration:
        head = ("This run recorded no calibration: the emulation ran as set, and each point below is its prediction "
                "of the article's number.")
    elif not calibration.get("ok", False):
        head = (f"The {html.escape(fidelity.said(calibration))}. Each point below is what the emulation gave all "
                "the same.")
    else:
        share = ("; the CPU share is the part of the CPU the emulated machine was allowed"
                 if calibration.get("share") is not None else "")
        what = fidelity.matched(calibration)
        head = (f"{html.escape(what[:1].upper() + what[1:])} (a calibration aims within {fidelity.CALIBRATED:.0%} "
                f"of the article's number{share}). Every other point is a prediction: the emulation was not tuned "
                "to it.")
    if k != 1 and pooled:
        slow = (f" This machine was slower than the article's, so that run was done in slow motion: every emulated "
                f"time multiplied by k = {_k(k)}, which keeps the article's ratios and divides its rates by k; below, "
                "each run's numbers are multiplied back by its own k, in the article's units.")
    elif k != 1:
        slow = (f" This machine is slower than the article's, so the run was done in slow motion: every emulated time "
                f"was multiplied by k = {_k(k)}, which keeps the article's ratios and divides its rates by k; the "
                "article's numbers are shown divided by k.")
    else:
        slow = " No slow motion (k = 1): the article's numbers are compared as published."
    return f"<p>{head}{slow}</p>"


def _row(r: dict[str, Any], k: float) -> str:
    n = int(r["n"])
    unit = html.escape(str(r["unit"]))
    cells = [("Point", html.escape(str(r["point"])), ""),
             ("Role", html.escape(ROLE_WORDS.get(str(r["role"]), str(r["role"]))), ""),
             ("The article's", f"{num(r['article'])} {unit}", "num")]
    if k != 1:
        cells.append((f"Divided by k = {_k(k)}", f"{num(r['article_here'])} {unit}", "num"))
    emulated = "-" if not n else (
        f"{num(r['emulated'])} [{num(r['ci_low'])}, {num(r['ci_high'])}]"
        f"<br><small>{html.escape(interval_words(method_for(n), n, 'values'))}</small>")
    error = r["error"]
    cells += [("Emulated (95% interval)", emulated, "num"),
              ("Off by", "-" if pd.isna(error) else fidelity.percent(float(error)), "num")]
    warn = str(r["within"]) == "False" and r["role"] in ("prediction", "calibration")
    if warn:  # bold as well: the report's style has no rule for warn
        cells[-1] = (cells[-1][0], f"<b>{cells[-1][1]}</b>", "num")
    tds = "".join(f"<td title=\"{html.escape(h)}\"" + (f" class=\"{c}\"" if c else "") + f">{v}</td>"
                  for h, v, c in cells)
    return ("<tr class=\"warn\">" if warn else "<tr>") + tds + "</tr>"


def section_html(t: pd.DataFrame, calibration: dict[str, Any] | None, runs: int = 1) -> str:
    """The section, or "" when the run has no point of the article to set beside its own (``fidelity.table``);
    ``runs`` > 1: the table is over a campaign's runs (``fidelity.pooled``), in the article's units."""
    if t is None or t.empty:
        return ""
    over = ""
    if runs > 1:  # each run calibrated on its own; its numbers times its own k: the article's units, one value a run
        over = (f"<p class=\"meta\">Over the campaign's {runs} runs: each run was calibrated on its own, and each "
                "run's median is one value below, multiplied by that run's own k (in the article's units). The "
                "last run's calibration:</p>")
    k = 1.0 if runs > 1 else fidelity.k_of(calibration)  # the table's k: over runs, the article's units
    heads = ["Point", "Role", "The article's", *([f"Divided by k = {_k(k)}"] if k != 1 else []),
             "Emulated (95% interval)", "Off by"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = "".join(_row(r, k) for r in t.to_dict("records"))
    mae = fidelity.median_abs_error(t)
    tol = f"{fidelity.TOLERANCE:.0%}"
    error = (f"Median absolute error of the predictions: {mae:.0%} (tolerance {tol})" if mae is not None
             else "No prediction was measured")
    # class beside: the report's card layout at phone width (a cell under its column's name, its title)
    return ("<h2 id=\"fidelity\">How close the emulation came</h2>" + over + paragraph(calibration, runs > 1)
            + f"<div class=\"table\"><table class=\"fidelity beside\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
            f"<p class=\"meta\">{error}; a claim is judged under the emulation only where the predictions at its "
            f"own points are within {tol}. An error in bold is beyond its tolerance ({tol} for a prediction, "
            f"{fidelity.CALIBRATED:.0%} for a calibration point).</p>")
