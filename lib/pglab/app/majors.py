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
import html
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from pglab.app import notebook_run
from pglab.app.repro import minutes
from pglab.errors import UserError
from pglab.hosts import builds
from pglab.views import majors_table

MAJORS = majors_table.MAJORS
ROOT = Path("yours/majors")
REPORTS = Path("yours/reports")
TABLES = Path("yours/data/majors")  # the table your next report of the study shows (`pglab report`)
SHIPPED = Path("data/majors")  # the shipped reference: the runs (DVC) and each table (git)


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
    return majors_table.matrix(study, root)


def page(study: str, m: pd.DataFrame, failed: dict[int, str] | None = None) -> str:
    """A self-contained page: the claims x majors table, then the figure."""
    if m.empty:
        raise UserError(f"no analysed run of {study} under {ROOT}: run `pglab majors {study}` first")
    notes = "".join(f"<li>PostgreSQL {k}: {html.escape(v)}</li>" for k, v in sorted((failed or {}).items()))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{study} across PostgreSQL majors</title>
<style>body{{font:14px/1.4 sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;text-align:left}}img{{max-width:100%}}</style>
</head><body><h1>{study}: each claim on PostgreSQL {', '.join(map(str, sorted(set(m.major))))}</h1>
{majors_table.section_html(study, m)}
{f'<p>Not measured:</p><ul>{notes}</ul>' if notes else ''}</body></html>
"""


def ship(study: str, m: pd.DataFrame, root: Path = ROOT, dest: Path = SHIPPED) -> list[Path]:
    """Each major's run copied into ``data/majors/<study>/pg<major>`` (the shipped reference: `dvc add` them) and
    the table into ``data/majors/<study>.csv``; a major already shipped is refused, never overwritten."""
    folders = [(root / f"pg{major}/data/raw" / study, dest / study / f"pg{major}") for major in sorted(set(m.major))]
    taken = [str(to) for _, to in folders if to.exists() or Path(f"{to}.dvc").exists()]
    if taken:
        raise UserError(f"majors --ship: {', '.join(taken)} already shipped (a shipped run is never overwritten; "
                        "remove it with `dvc remove` first if it is to be replaced)")
    for src, to in folders:
        shutil.copytree(src, to, symlinks=True)
    m.to_csv(dest / f"{study}.csv", index=False)
    return [to for _, to in folders]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("study", help="the study each major runs (cloud_providers: its provisioned targets; a dsn "
                                     "target is whatever server it names)")
    ap.add_argument("--profile", help="the profile each major runs (default: the params file's `profile:`)")
    ap.add_argument("--majors", type=int, nargs="+", default=list(MAJORS), help="default: 13 14 15 16 17 18")
    ap.add_argument("--report-only", action="store_true", help="only redraw the page from the runs already there")
    ap.add_argument("--ship", action="store_true",
                    help="(maintainers) copy the runs into data/majors/<study>/ and the table into "
                         "data/majors/<study>.csv, the shipped reference each study report shows; then `dvc add` "
                         "the runs and `dvc push`")


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
    TABLES.mkdir(parents=True, exist_ok=True)  # your next report of the study (`pglab report`) shows it
    m.to_csv(TABLES / f"{a.study}.csv", index=False)
    if a.ship:
        for to in ship(a.study, m):
            print(f"shipped {to}: `dvc add {to}`")
    print(f"{out}: {a.study} on PostgreSQL {', '.join(map(str, sorted(set(m.major))))}"
          + ("" if a.report_only else f" in {minutes(time.monotonic() - started)}")
          + (f"; not measured: {', '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    from pglab import exits

    ap = argparse.ArgumentParser(prog="pglab majors", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return exits.run(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
