"""``pglab majors STUDY``: one study on PostgreSQL 13 to 18, then each claim across the majors.

Each major is the registry's build of it (``embedded-<major>``: one build family for all six, so the majors are
all that differs; whether Debian's 15 may be set beside them is the build family's A/A, ``pglab builds aa``).
Each run is a study run like any other, collected in its own process into ``<root>/pg<major>/data`` (archived,
never overwritten), analysed by the study's notebook there, and added to your ledger. The page
``yours/reports/majors_<study>.html`` then holds the claims x majors table (each verdict with its value and
interval) and a figure of each claim's value across the majors beside the article's.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from pglab.app import notebook_run
from pglab.app.repro import minutes
from pglab.errors import UserError
from pglab.hosts import builds
from pglab.runs.reading import load_manifest

MAJORS = (13, 14, 15, 16, 17, 18)
ROOT = Path("yours/majors")
REPORTS = Path("yours/reports")


def collect_all(study: str, profile: str | None, majors: list[int], root: Path = ROOT) -> dict[int, str]:
    """Each major measured and analysed in turn; {major: why it failed} for those that did not finish."""
    from pglab.ledger.book import record

    for m in majors:  # every build named before the first is measured (fetched once, offline after)
        builds.fetch(builds.resolve(f"embedded-{m}"))
    failed: dict[int, str] = {}
    started = time.monotonic()
    for i, m in enumerate(majors, 1):
        where = root / f"pg{m}"
        elapsed = minutes(time.monotonic() - started)
        print(f"== PostgreSQL {m} ({i} of {len(majors)}): {study} into {where} (elapsed {elapsed})", flush=True)
        code = subprocess.run([sys.executable, "-m", "pglab.app.collect", study, "--postgres", f"embedded-{m}",
                               "--data-root", str(where / "data"), *(["--profile", profile] if profile else [])],
                              check=False).returncode
        if code == 130 or code < 0:  # interrupted (Ctrl-C, SIGTERM): the user stops the whole sweep, not one major
            raise KeyboardInterrupt
        if code != 0:
            failed[m] = f"pglab collect exited {code}; the run, if any, stays archived in {where}/data/runs/"
            continue
        try:
            notebook_run.execute(study, where)
            record(where / "data/raw" / study, where / "data/derived" / study, data_root="data")
        except Exception as exc:  # noqa: BLE001 - the other majors still run; said at the end
            failed[m] = f"analysis failed: {exc}"
    return failed


def matrix(study: str, root: Path = ROOT) -> pd.DataFrame:
    """One row per (claim, major) that has an analysed run under ``root``: the article's value, this run's value and
    interval, the verdict, the server's version and the run id."""
    rows = []
    for folder in sorted(root.glob("pg*"), key=lambda p: int(p.name[2:]) if p.name[2:].isdigit() else 0):
        table = folder / "data/derived" / study / "comparison.csv"
        if not folder.name[2:].isdigit() or not table.exists():
            continue
        manifest = load_manifest(folder / "data/raw" / study)
        build = manifest.get("postgres_build") or {}
        for r in pd.read_csv(table).to_dict("records"):
            rows.append({"claim": r["claim"], "major": int(folder.name[2:]), "version": build.get("version"),
                         "published": r.get("published"), "reproduced": r.get("reproduced"), "low": r.get("ci_low"),
                         "high": r.get("ci_high"), "coverage": r.get("coverage"), "verdict": r.get("verdict"),
                         "run": manifest.get("run_id")})
    return pd.DataFrame(rows, columns=["claim", "major", "version", "published", "reproduced", "low", "high",
                                       "coverage", "verdict", "run"])


def _cell(r: pd.Series) -> str:
    value = "" if pd.isna(r.reproduced) else f"{r.reproduced:.3g}"
    if value and not (pd.isna(r.low) or pd.isna(r.high)):
        value += f" [{r.low:.3g}, {r.high:.3g}]"
        if not pd.isna(r.coverage) and r.coverage < 0.945:  # fewer than 6 blocks: the interval covers less
            value += f" ({r.coverage:.0%})"
    return f"<b>{html.escape(str(r.verdict))}</b><br>{value}"


def figure_png(m: pd.DataFrame) -> bytes | None:
    """One panel per claim: its value and interval at each major, the article's value as a dashed line; None when
    no claim has a value (every one set aside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claims = [c for c in dict.fromkeys(m.claim) if m[m.claim == c].reproduced.notna().any()]
    if not claims:
        return None
    fig, axes = plt.subplots(len(claims), 1, figsize=(7, 2.2 * max(1, len(claims))), squeeze=False)
    for ax, claim in zip(axes[:, 0], claims, strict=True):
        d = m[m.claim == claim].dropna(subset=["reproduced"])
        err = [(d.reproduced - d.low).clip(lower=0).fillna(0), (d.high - d.reproduced).clip(lower=0).fillna(0)]
        ax.errorbar(d.major, d.reproduced, yerr=err, fmt="o", capsize=4, label="this machine (interval)")
        published = d.published.dropna()
        if len(published):
            ax.axhline(float(published.iloc[0]), ls="--", color="grey", label="the article")
        ax.set_title(claim, fontsize=9, loc="left")
        ax.set_xticks(list(MAJORS), [str(x) for x in MAJORS])
        ax.set_xlim(MAJORS[0] - 0.5, MAJORS[-1] + 0.5)
        ax.legend(fontsize=7, loc="best")
    axes[-1, 0].set_xlabel("PostgreSQL major (the registry's build of each)")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=150, metadata={"Software": None})
    plt.close(fig)
    return out.getvalue()


def page(study: str, m: pd.DataFrame, failed: dict[int, str] | None = None) -> str:
    """A self-contained page: the claims x majors table, then the figure."""
    if m.empty:
        raise UserError(f"no analysed run of {study} under {ROOT}: run `pglab majors {study}` first")
    table = m.assign(cell=m.apply(_cell, axis=1)).pivot(index="claim", columns="major", values="cell")
    table = table.reindex(list(dict.fromkeys(m.claim)))
    head = "".join(f"<th>{c} ({html.escape(str(m[m.major == c].version.iloc[0]))})</th>" for c in table.columns)
    rows = "".join(f"<tr><th>{html.escape(claim)}</th>" + "".join(f"<td>{v if isinstance(v, str) else '-'}</td>"
                                                              for v in row) + "</tr>"
                   for claim, row in table.iterrows())
    png = figure_png(m)
    drawn = (f'<img alt="each claim\'s value by major" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
             if png else "<p>No claim has a value on these runs (each was set aside: see the table).</p>")
    notes = "".join(f"<li>PostgreSQL {k}: {html.escape(v)}</li>" for k, v in sorted((failed or {}).items()))
    runs = ", ".join(f"{k}: {v}" for k, v in m.drop_duplicates("major").set_index("major").run.items())
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{study} across PostgreSQL majors</title>
<style>body{{font:14px/1.4 sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;text-align:left}}img{{max-width:100%}}</style>
</head><body><h1>{study}: each claim on PostgreSQL {', '.join(map(str, table.columns))}</h1>
<p>Each column is one run of the study on the registry's build of that major (one build family, so the major is
what differs); each cell is the claim's verdict, then its value and interval (95% from 6 blocks on; from fewer, its
real coverage in brackets). Debian's own 15 is another
build family: whether it may be set beside these is what <code>pglab builds aa</code> measures.</p>
<table><tr><th>claim</th>{head}</tr>{rows}</table>
{f'<p>Not measured:</p><ul>{notes}</ul>' if notes else ''}
<h2>Each claim's value across the majors</h2>{drawn}
<p>Runs: {html.escape(runs)}.</p></body></html>
"""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("study", help="the study each major runs (any but cloud_providers, whose targets are given)")
    ap.add_argument("--profile", help="the profile each major runs (default: the params file's `profile:`)")
    ap.add_argument("--majors", type=int, nargs="+", default=list(MAJORS), help="default: 13 14 15 16 17 18")
    ap.add_argument("--report-only", action="store_true", help="only redraw the page from the runs already there")


def run(a: argparse.Namespace) -> int:
    """Exit 0, or 1 when a major did not finish (the page shows the others)."""
    from pglab.studies import STUDIES, module

    if a.study not in STUDIES or any(m not in MAJORS for m in a.majors):
        raise UserError(f"majors: a study of {', '.join(STUDIES)} and majors among {', '.join(map(str, MAJORS))}")
    if "postgres" not in module(a.study, "params").Params.model_fields:
        raise UserError(f"majors: {a.study} takes no `postgres:` (its servers are the targets it is given)")
    started = time.monotonic()
    failed = {} if a.report_only else collect_all(a.study, a.profile, a.majors)
    REPORTS.mkdir(parents=True, exist_ok=True)
    out = REPORTS / f"majors_{a.study}.html"
    m = matrix(a.study)
    out.write_text(page(a.study, m, failed), encoding="utf-8")
    print(f"{out}: {a.study} on PostgreSQL {', '.join(map(str, sorted(set(m.major))))}"
          + ("" if a.report_only else f" in {minutes(time.monotonic() - started)}")
          + (f"; not measured: {', '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    from pglab.app import exits

    ap = argparse.ArgumentParser(prog="pglab majors", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return exits.run(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
