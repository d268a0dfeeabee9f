"""Tables for people: how a DataFrame shown in a notebook (and so in its report) reads.

Why: a table is read by a DBA, not by pandas. ``rows_per_s`` with ``2.13e+05``, ``True``/``None`` cells, a
pandas ``index`` column and an empty frame's bare header tell the reader about the code, not the run. Every
table a notebook displays goes through :func:`frame_html` (installed as IPython's HTML formatter for
DataFrames by ``pglab.app.notebook``): headers in words with their unit, thousands separators, a fixed number
of significant digits and never e-notation, ratios with ×, shares as percentages, yes/no, "–" for nothing,
and an empty table as one line. The raw CSVs keep every digit (the report links them).
"""

from __future__ import annotations

import html
import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis.waits import UNIT_ATTR

#: rows of a table shown before the rest is summed up in a line
SHOWN_ROWS = 60
MISSING = "–"
#: words of a column name that are units: they move to the end, in brackets
_UNITS = {"ms": "ms", "s": "s", "us": "µs", "kb": "kB", "mb": "MB", "bytes": "bytes", "pct": "%"}
#: words spelt out (or kept as a DBA writes them)
_WORDS = {"ci": "interval", "aa": "A/A", "qps": "queries/s", "tps": "tps", "p50": "p50", "p95": "p95",
          "p99": "p99", "cpu": "CPU", "tls": "TLS", "os": "OS", "mem": "memory", "sql": "SQL",
          "netns": "network namespace", "ro": "RO", "rw": "RW", "fdw": "FDW", "vs": "vs", "id": "id"}
#: a column whose values are ratios (×) when its name has one of these words
_RATIO_WORDS = {"ratio", "speedup", "factor"}
#: ... or is one of these (a claim's published and reproduced values are ratios to its baseline)
_RATIO_COLUMNS = {"published", "reproduced", "bound_low", "bound_high", "aa_median", "aa_low", "aa_high",
                  "speedup_low", "speedup_high", "ratio_low", "ratio_high", "ci_low", "ci_high"}
_SHARE_WORDS = {"share", "shares"}


def header(column: Any) -> str:
    """``replay_lag_s_max`` -> ``replay lag max (s)``; ``rows_per_s`` -> ``rows/s``; a name with capitals or
    a colon (``IO:WALSync``, a configuration) is a name, kept as written."""
    name = str(column)
    if " " in name:  # a pivot's flattened header: "provider_tps builtin"
        return " ".join(header(part) for part in name.split(" "))
    if name != name.lower() or ":" in name or "_" not in name and name not in _WORDS:
        return name
    words, units = [], []
    parts = name.split("_")
    i = 0
    while i < len(parts):
        w = parts[i]
        if w == "per" and i + 1 < len(parts) and words:  # rows_per_s: rows/s
            words[-1] = f"{words[-1]}/{parts[i + 1]}"
            i += 2
            continue
        if w in _UNITS and words and not (w == "s" and words[-1] == "ops"):
            units.append(_UNITS[w])
        elif w == "s" and words:  # ops_s: ops/s
            words[-1] += "/s"
        else:
            words.append(_WORDS.get(w, w))
        i += 1
    return " ".join(words) + (f" ({', '.join(units)})" if units else "")


def _is_ratio(column: Any) -> bool:
    name = str(column)
    return name in _RATIO_COLUMNS or bool(_RATIO_WORDS & set(name.lower().split("_")))


def number(value: float) -> str:
    """Four significant digits, thousands separated, never e-notation: 213,000 / 1,173 / 25.31 / 0.03524."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return np.format_float_positional(value, precision=4, unique=True, fractional=False, trim="-")


def cell(value: Any, kind: str = "") -> str:
    """One value in words: ``kind`` is ``ratio`` (×), ``share`` (%), ``noise`` (±%) or plain."""
    if value is None or value is pd.NA or value is pd.NaT:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return MISSING
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if kind == "share":
            return f"{100 * v:.1f}%" if v else "0%"
        if kind == "noise":  # how far one ratio moves with no effect
            return f"±{100 * v:.0f}%"
        if kind == "ratio":
            return f"{number(v)}×"
        if float(v).is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return number(v)
    text = str(value)
    return {"True": "yes", "False": "no", "None": MISSING, "nan": MISSING, "": ""}.get(text, text)


def _kind(frame: pd.DataFrame, column: Any) -> str:
    if frame.attrs.get(UNIT_ATTR) == "share" or bool(_SHARE_WORDS & set(str(column).lower().split("_"))):
        return "share"
    if str(column) == "noise_floor":
        return "noise"
    return "ratio" if _is_ratio(column) else ""


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """Row labels as a column (never pandas' row numbers; unnamed labels under a blank header, not "index"),
    one header row (a pivot's two as one: "tps local")."""
    shown = df if isinstance(df.index, pd.RangeIndex) else df.reset_index(names=df.index.names
                                                                           if any(df.index.names) else [""])
    if isinstance(shown.columns, pd.MultiIndex):
        shown = shown.set_axis([" ".join(str(x) for x in c if str(x)) for c in shown.columns], axis=1)
    return shown


def for_people(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as its table shows it: every cell a string in words, under a header in words."""
    shown = _labelled(df)
    out = pd.DataFrame({i: [cell(v, _kind(df, c)) for v in shown.iloc[:, i].tolist()]
                        for i, c in enumerate(shown.columns)})
    out.columns = [header(c) for c in shown.columns]
    return out


def frame_html(df: pd.DataFrame) -> str:
    """A table as a reader wants it (the module's rules), numbers right-aligned; past ``SHOWN_ROWS`` a line
    saying how many more rows the table has, instead of pandas' ``...``; an empty table as one line."""
    if df.empty:
        return "<p class=\"meta\">(none)</p>"
    labelled = _labelled(df.head(SHOWN_ROWS))
    numeric = [pd.api.types.is_numeric_dtype(labelled.iloc[:, i]) and not pd.api.types.is_bool_dtype(
        labelled.iloc[:, i]) for i in range(labelled.shape[1])]
    shown = for_people(df.head(SHOWN_ROWS))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{html.escape(v)}</td>" if num else f"<td>{html.escape(v)}</td>"
                                    for v, num in zip(row, numeric, strict=True)) + "</tr>"
                   for row in shown.itertuples(index=False, name=None))
    more = len(df) - SHOWN_ROWS
    return (f"<table class=\"frame\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            + (f"<p><small>and {more:,} more rows (the whole table is the run's CSV)</small></p>" if more > 0
               else ""))


def claims(comparison: pd.DataFrame) -> pd.DataFrame:
    """A study's claims as a reader compares them: the article's value, the reproduced one with its interval,
    the noise floor, how many runs (or blocks) it rests on, the verdict and what it depends on. Every other
    column of ``comparison.csv`` (the rule's bounds, the A/A values, each run's value) stays in the CSV."""
    def interval(r: pd.Series) -> str:
        low, high = r.get("ci_low"), r.get("ci_high")
        return MISSING if pd.isna(low) or pd.isna(high) else f"[{cell(low, 'ratio')}, {cell(high, 'ratio')}]"

    def over(r: pd.Series) -> str:
        runs = r.get("runs")
        if pd.notna(runs) and runs:
            return f"{int(runs)} run{'s' * (int(runs) != 1)}"
        blocks = r.get("blocks")
        return f"{int(blocks)} block{'s' * (int(blocks) != 1)}" if pd.notna(blocks) else MISSING

    def noise(v: Any) -> str:
        return MISSING if v is None or pd.isna(v) else f"±{100 * float(v):.0f}%"

    rows = [{"claim": r["claim"], "article": cell(r.get("published"), "ratio"),
             "reproduced": cell(r.get("reproduced"), "ratio"), "interval": interval(r),
             "noise floor": noise(r.get("noise_floor")), "over": over(r), "verdict": cell(r.get("verdict")),
             "depends on": cell(r.get("depends_on"))} for _, r in comparison.iterrows()]
    return pd.DataFrame(rows, columns=["claim", "article", "reproduced", "interval", "noise floor", "over",
                                       "verdict", "depends on"])
