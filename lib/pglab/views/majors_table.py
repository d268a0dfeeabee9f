"""A study's claims x PostgreSQL majors: the table read from the runs of each major, and its HTML and figure.

Pure (no host code): the study report draws it from ``data/majors/<study>.csv`` (the shipped matrix, or the one
``pglab majors`` writes into yours/), the same way ``pglab majors`` draws its own page from the runs it made.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from pglab.runs.reading import load_manifest
from pglab.views.beside import VERDICT_CLASS

MAJORS = (13, 14, 15, 16, 17, 18)
COLUMNS = ["claim", "major", "version", "published", "reproduced", "low", "high", "coverage", "verdict", "why", "run"]
UNMEASURED = ("not measurable here", "not available")


def _major(folder: Path) -> int:
    return int(folder.name[2:]) if folder.name[2:].isdigit() else 0


def matrix(study: str, root: Path) -> pd.DataFrame:
    """One row per (claim, major) with an analysed run under ``root/pg<major>/data``: the article's value, this
    run's value and interval, the verdict (with why, when the claim was set aside), the version and the run id."""
    rows = []
    for folder in sorted(root.glob("pg*"), key=_major):
        table = folder / "data/derived" / study / "comparison.csv"
        if not _major(folder) or not table.exists():
            continue
        manifest = load_manifest(folder / "data/raw" / study)
        build = manifest.get("postgres_build") or {}
        for r in pd.read_csv(table).to_dict("records"):
            why = r.get("note") if str(r.get("verdict")).startswith(UNMEASURED) else None
            rows.append({"claim": r["claim"], "major": _major(folder), "version": build.get("version"),
                         "published": r.get("published"), "reproduced": r.get("reproduced"), "low": r.get("ci_low"),
                         "high": r.get("ci_high"), "coverage": r.get("coverage"), "verdict": r.get("verdict"),
                         "why": why if isinstance(why, str) else None, "run": manifest.get("run_id")})
    return pd.DataFrame(rows, columns=COLUMNS)


def read(path: Path) -> pd.DataFrame | None:
    """The matrix a file holds (``data/majors/<study>.csv``), or None when there is none."""
    if not path.exists():
        return None
    m = pd.read_csv(path, dtype={"version": str})
    missing = set(COLUMNS) - set(m.columns)
    if missing:
        raise ValueError(f"{path}: not a claims x majors table (no {', '.join(sorted(missing))})")
    return m[COLUMNS]


def cell(r: pd.Series) -> str:
    """A verdict, then its value and interval (with the interval's real coverage below 95%)."""
    value = "" if pd.isna(r.reproduced) else f"{r.reproduced:.3g}"
    if value and not (pd.isna(r.low) or pd.isna(r.high)):
        value += f" [{r.low:.3g}, {r.high:.3g}]"
        if not pd.isna(r.coverage) and r.coverage < 0.945:  # fewer than 6 blocks: the interval covers less
            value += f" ({r.coverage:.0%})"
    why = "" if pd.isna(r.why) else f"<br><small>{shortened(str(r.why))}</small>"
    return f"<b>{html.escape(str(r.verdict))}</b><br>{value}{why}"


def shortened(text: str, width: int = 200) -> str:
    """``text`` escaped, cut on a word with an ellipsis when longer than ``width``; the whole of it on hover."""
    if len(text) <= width:
        return html.escape(text)
    cut = text[:width].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"<span title=\"{html.escape(text)}\">{html.escape(cut)}…</span>"


def grid(m: pd.DataFrame) -> Iterator[tuple[str, list[tuple[int, pd.Series | None]]]]:
    """Each claim with its row at each major of ``m`` (None where that major has none), claims in table order."""
    majors = sorted(set(m.major))
    for claim in dict.fromkeys(m.claim):
        mine = m[m.claim == claim].drop_duplicates("major").set_index("major")
        yield claim, [(k, mine.loc[k] if k in mine.index else None) for k in majors]


def table_html(m: pd.DataFrame) -> str:
    """A row per claim, a column per major (headed by its exact version), each cell in its verdict's colour."""
    head = "".join(f"<th>{c} ({html.escape(str(m[m.major == c].version.iloc[0]))})</th>" for c in sorted(set(m.major)))
    rows = []
    for claim, at in grid(m):
        cells = ["<td>not run</td>" if r is None else
                 f"<td title=\"PostgreSQL {k} ({html.escape(str(r.version))})\" "
                 f"class=\"{VERDICT_CLASS.get(str(r.verdict), '')}\">{cell(r)}</td>" for k, r in at]
        rows.append(f"<tr><th>{html.escape(claim)}</th>{''.join(cells)}</tr>")
    return (f"<table class=\"majors\"><thead><tr><th>claim</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def figure_png(m: pd.DataFrame) -> bytes | None:
    """One panel per claim: its value and interval at each major, the article's value as a dashed line; None when
    no claim has a value (every one set aside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claims = [c for c in dict.fromkeys(m.claim) if m[m.claim == c].reproduced.notna().any()]
    if not claims:
        return None
    cols = 2 if len(claims) > 2 else 1
    rows = -(-len(claims) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 2.4 * rows), squeeze=False)
    for ax, claim in zip(axes.flat, claims, strict=False):
        d = m[m.claim == claim].dropna(subset=["reproduced"])
        err = [(d.reproduced - d.low).clip(lower=0).fillna(0), (d.high - d.reproduced).clip(lower=0).fillna(0)]
        ax.errorbar(d.major, d.reproduced, yerr=err, fmt="o", capsize=4, label="this machine (95% interval)")
        published = d.published.dropna()
        if len(published):
            ax.axhline(float(published.iloc[0]), ls="--", color="grey", label="the article")
        ax.set_title(claim, fontsize=9, loc="left")
        ax.set_xticks(list(MAJORS), [str(x) for x in MAJORS])
        ax.set_xlim(MAJORS[0] - 0.5, MAJORS[-1] + 0.5)
        ax.set_xlabel("PostgreSQL major", fontsize=8)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(claims):]:
        ax.set_visible(False)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=150, metadata={"Software": None})
    plt.close(fig)
    return out.getvalue()


def figure_html(m: pd.DataFrame) -> str:
    png = figure_png(m)
    if png is None:
        return "<p>No claim has a value on these runs (each was set aside: see the table).</p>"
    return (f"<figure><img alt=\"each claim's value by PostgreSQL major, with the article's\" "
            f"src=\"data:image/png;base64,{base64.b64encode(png).decode()}\"><figcaption>Each claim's value and 95% "
            "interval on each major; the dashed line is the article's value.</figcaption></figure>")


SHORT = {"held": "held", "did not hold": "did not hold", "not resolvable here": "open",
         "not measurable here": "n/a"}


def markdown(m: pd.DataFrame, source: str) -> list[str]:
    """The docs page's table (``pglab.views.docs_verdicts``): a row per claim, a column per major, each cell the
    verdict in short and the value with its interval."""
    majors = sorted(set(m.major))
    versions = m.groupby("major").version.first()
    lines = ["### Across PostgreSQL majors", "",
             f"Each major's campaign of the study, on the registry's build of it (`{source}`, made by `pglab "
             "majors --ship`; the figure is in the report). Each cell: the verdict (open: not resolvable here; n/a: "
             "not measurable here), the value and its 95% interval.", "",
             "| claim | " + " | ".join(f"{k} ({versions[k]})" for k in majors) + " |",
             "| --- |" + " --- |" * len(majors)]
    for claim, at in grid(m):
        cells = []
        for _, r in at:
            if r is None:
                cells.append("not run")
                continue
            value = "" if pd.isna(r.reproduced) else f" {r.reproduced:.3g}"
            if value and not (pd.isna(r.low) or pd.isna(r.high)):
                value += f" [{r.low:.3g}, {r.high:.3g}]"
            cells.append(f"{SHORT.get(str(r.verdict), str(r.verdict))}{value}")
        lines.append(f"| {claim} | " + " | ".join(cells) + " |")
    return lines


EXPLAINED = ("Each column is the study run on the registry's build of that major (one build family, so the major "
             "is what differs); each cell is the claim's verdict, then its value and 95% interval: over the major's "
             "runs (a t interval) when it ran a campaign, else over its run's blocks (from fewer than 6 blocks, "
             "with the interval's real coverage in brackets). Debian's own 15 is another build family: whether it "
             "may be set beside these is what <code>pglab builds aa</code> measures. Runs from different boots of a "
             "virtual machine may have met different hardware (this one's boots differed 3x in per-query time): "
             "each run's manifest names its <code>machine</code> (machine id / boot).")


def section_html(study: str, m: pd.DataFrame) -> str:
    """The study report's section: the claims x majors table, then the figure, then the runs it rests on."""
    runs = ", ".join(f"{k}: {v}" for k, v in m.drop_duplicates("major").set_index("major").run.items())
    majors = ", ".join(map(str, sorted(set(m.major))))
    return (f"<h2 id=\"majors\">Across PostgreSQL majors ({majors})</h2><p>{EXPLAINED}</p>"
            f"<div class=\"table\">{table_html(m)}</div>{figure_html(m)}"
            f"<p class=\"meta\">The runs of {html.escape(study)}, by major: {html.escape(runs)}.</p>")
