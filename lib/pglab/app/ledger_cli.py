"""``pglab ledger``: add, list, show, compare, merge, import and draw the runs a ledger holds.

The ledger (``pglab.ledger``) is filled after a run or an analysis: ``pglab collect`` adds each run it made
(its record), ``pglab analyze``, ``pglab spread`` and ``collect --repeat`` add each analysis, and the
pipeline's ``ledger`` stage adds the five published runs. ``pglab ledger add`` adds by hand; what a ledger
holds is never a run's only copy (the run folder is), so it can be rebuilt from the folders at any time.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import over_runs
from pglab.analysis.comparable import find_run
from pglab.app.spread import MIXED, OPPOSITE, STABLE, format_table, spread_table
from pglab.errors import UserError
from pglab.ledger import book, rows, shipped
from pglab.ledger.backend import ENV, Ledger, is_yours, location
from pglab.ledger.locations import Where, parse, printable, shown
from pglab.runs import campaign
from pglab.runs.record import MANIFEST, RUN_FOLDER, ManifestError
from pglab.runs.writing import git_revision
from pglab.studies import STUDIES
from pglab.views.ledger_views import (
    campaign_block,
    campaign_lines,
    campaigns_within,
    decided_over,
    short_campaign,
    tallies,
)

LEDGER_HELP = (f"the ledger: a SQLite file (.gz: kept gzipped) or postgresql://user@host/db (default ${ENV}, else "
               "yours, <data-root>/ledger.sqlite, with the shipped runs of <data-root>/ledger/reference.sqlite.gz "
               "beside yours)")


def say(*parts: object, file: Any = None, flush: bool = False) -> None:
    """``print``, every line of it with its control characters escaped: a ledger's text (a run id, a label, a
    claim) comes from anyone's ledger, and a terminal must show it, never obey it (retitle, clear, move)."""
    text = " ".join(str(p) for p in parts)
    print("\n".join(printable(line) for line in text.split("\n")), file=file or sys.stdout, flush=flush)


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each text cell on one line, its control characters escaped (a table keeps its shape)."""
    return frame.map(lambda v: printable(v) if isinstance(v, str) else v)


def archived(data_root: Path, study: str | None = None) -> list[Path]:
    """Every archived run folder (``<data-root>/runs/<study>/<run-id>``), oldest first."""
    studies = [study] if study else STUDIES
    return [d for s in studies for d in sorted((data_root / "runs" / s).glob("*"))
            if RUN_FOLDER.fullmatch(d.name) and (d / MANIFEST).exists()]


def cmd_add(a: argparse.Namespace, ledger: Ledger) -> int:
    root = Path(a.data_root)
    if a.runs:
        if a.derived and len(a.runs) > 1:
            raise UserError("--derived names the analysis of one run: give one RUN with it")
        runs, done = [find_run(root, x) for x in a.runs], []
        if a.derived:  # of a campaign: its runs, each with its own analysis, then its verdicts over them
            done, kept = book.add_published(ledger, runs[0], a.derived, code_revision=git_revision())
            if kept:
                say(f"{runs[0].name}: a campaign's verdicts over its {len(done)} runs: {kept}")
        else:
            done = [book.add(ledger, r, code_revision=git_revision()) for r in runs]
    else:
        done = shipped.add_pipeline(ledger, root, root.parent / "dvc.lock")
        for run in archived(root):
            try:
                done.append(book.add(ledger, run))
            except ManifestError as exc:
                say(f"pglab: skipped {exc}", file=sys.stderr)
    new = sum(d["new"] for d in done)
    analysed = sum(d["analysis"] == "added" for d in done)
    say(f"{len(done)} run{'s' if len(done) != 1 else ''} seen: {new} new, {analysed} analysis added "
          f"({ledger.shown})")
    return 0


def _left_out(a: argparse.Namespace, ledger: Ledger, study: str | None) -> None:
    """Say how many marked runs a view left out, and how to see them."""
    if not a.with_marked and (n := book.marked_count(ledger, study)):
        say(f"{n} run{'s' if n != 1 else ''} marked for a busy or moving machine left out (--with-marked shows them; "
            "`pglab ledger show RUN` says why)")


def cmd_list(a: argparse.Namespace, ledger: Ledger) -> int:
    runs = book.runs(ledger, a.study, with_marked=a.with_marked)
    if runs.empty:
        say(f"no runs{' of ' + a.study if a.study else ''} in {ledger.shown}")
        _left_out(a, ledger, a.study)
        return 0
    tally = tallies(book.claims(ledger, a.study, with_marked=a.with_marked))
    campaigns = short_campaign(ledger)
    show = pd.DataFrame({"started": runs["started"].str.slice(0, 16).str.replace("T", " "), "study": runs["study"],
                         "run": runs["run_id"], "profile": runs["profile"], "status": runs["status"],
                         "PostgreSQL": runs["pg_version"].fillna("?") + " " + runs["pg_family"].fillna(""),
                         "machine": runs["machine_key"],
                         "verdicts": runs["run_id"].map(tally).fillna("(not analysed)"),
                         "campaign": [campaigns.get(r, "-") for r in runs["run_id"]]})
    say(_cells(show).to_string(index=False))
    if lines := campaign_lines(ledger, a.study):
        say("\n".join(lines))
    machines = runs.drop_duplicates("machine_key")
    for key, label in zip(machines["machine_key"], machines["machine"], strict=True):
        say(f"machine {key}: {label}")
    _left_out(a, ledger, a.study)
    return 0


def cmd_show(a: argparse.Namespace, ledger: Ledger) -> int:
    run_id = _find(ledger, a.run)
    r = book.runs(ledger).set_index("run_id").loc[run_id]
    say(f"{'run':16} {run_id}")
    for k in ("study", "profile", "status", "started", "ended", "wall_s", "measuring_share", "own_cpu_s", "seed",
              "blocks", "points_total", "points_failed", "machine", "machine_key", "pg_version", "pg_family",
              "git_revision", "dvc_hash", "marked"):
        say(f"{k:16} {'' if pd.isna(r[k]) else r[k]}" if k == "marked" else f"{k:16} {r[k]}")
    in_campaign = book.campaign_of(ledger, run_id)
    if in_campaign:
        say("\n".join(campaign_block(book.campaigns(ledger), in_campaign)))
    c = book.claims(ledger, str(r["study"]))
    c = c[c["run_id"] == run_id]
    if c.empty:
        say("(no analysis in the ledger: `pglab analyze` or `pglab ledger add RUN --derived DIR` adds one)")
        return 0
    say("\nthis run alone (its own blocks; the campaign's verdicts above are over all its runs):" if in_campaign
        else "")
    say(_cells(pd.DataFrame({"claim": c["claim"], "published": c["published"], "reproduced": c["reproduced"],
                             "interval": [_interval(lo, hi) for lo, hi in zip(c["ci_low"], c["ci_high"], strict=True)],
                             "blocks": c["blocks"], "verdict": c["verdict"]})).to_string(index=False))
    return 0


def _interval(low: Any, high: Any) -> str:
    return "-" if pd.isna(low) or pd.isna(high) else f"[{low:.3g}, {high:.3g}]"


def _find(ledger: Ledger, run: str) -> str:
    try:
        return book.find(ledger, run)
    except LookupError as exc:
        raise UserError(f"{printable(exc, 300)} ({ledger.shown}); `pglab ledger list` shows what it holds") from None


def cmd_compare(a: argparse.Namespace, ledger: Ledger) -> int:
    """Per claim, every run's value and verdict, in groups of comparable runs (one machine class, one PostgreSQL
    build, one profile, one emulation): runs of different groups are shown apart, never pooled."""
    c = book.claims(ledger, a.study, with_marked=a.with_marked or bool(a.runs))  # runs named are asked for
    for col, want in (("machine_key", a.machine), ("pg_version", a.pg), ("profile", a.profile)):
        if want:
            c = c[c[col].astype(str) == want]
    if a.runs:
        ids = [_find(ledger, r) for r in a.runs]
        c = c[c["run_id"].isin(ids)]
    if c.empty:
        raise UserError(f"no analysed run of {a.study} in {ledger.shown} matches; `pglab ledger list --study "
                        f"{a.study}` shows what it holds")
    c = _cells(c)  # every text a table shows, escaped once
    groups = c.groupby(["machine_key", "pg_version", "pg_family", "profile", "asked"], dropna=False, sort=False)
    stored = book.campaigns(ledger, a.study)  # read once: each group tells the campaigns within it
    for (key, version, family, profile, _), g in groups:
        said = list(dict.fromkeys(g["emulation"]))  # as each run measured it (a calibrated run: its own numbers)
        emulated = said[0] + (f" (as the first run measured it; {len(said)} runs measured their own)" * (len(said) > 1))
        ids = list(dict.fromkeys(g["run_id"]))
        say(f"== {len(ids)} run{'s' if len(ids) != 1 else ''} of {a.study}, profile {profile}, PostgreSQL "
              f"{version} ({family}), machine {key}: {g['machine'].iloc[0]}"
              + (f"; emulated: {emulated}" if emulated else ""))
        frames = {rid: g[g["run_id"] == rid] for rid in ids}
        table = spread_table(frames)
        for i, rid in enumerate(ids, 1):
            say(f"r{i} = {rid}")
        say(format_table(table, ids))
        counts = table["agreement"].value_counts()
        say(", ".join(f"{counts.get(k, 0)} {k}" for k in (STABLE, MIXED, OPPOSITE)) + " (verdicts over the runs)")
        for line in campaigns_within(stored, ids):  # a stored campaign's verdicts, as its report tells them
            say(line)
        pooled = len(frames) >= 2 and "bound_low" in g
        say(decided_over(over_runs.comparison(frames) if pooled else pd.DataFrame(), g))
    if groups.ngroups > 1:
        say(f"{groups.ngroups} groups of runs that differ in machine, PostgreSQL build, profile or emulation: "
              "compared side by side, never pooled")
    if not a.runs:
        _left_out(a, ledger, a.study)
    return 0


def _same(one: Where, other: Where) -> bool:
    """Whether two locations name one ledger (a file by any of its paths)."""
    if one.path is not None and other.path is not None:
        return one.path.resolve() == other.path.resolve()
    return one.url == other.url


def cmd_merge(a: argparse.Namespace) -> int:
    """Every other ledger checked and opened read-only first (never created, upgraded or written), then merged into
    the ledger named: one that is not a ledger, of another schema, or with bad values or ids is refused before
    anything is written."""
    target = parse(location(a.ledger, a.data_root))
    with ExitStack() as stack:
        theirs = []
        for other in a.others:
            if _same(parse(other), target):
                raise UserError(f"ledger {shown(other)}: that is the ledger being merged into")
            theirs.append((other, stack.enter_context(Ledger(other, readonly=True))))
        with Ledger(a.ledger, a.data_root) as ledger:
            for other, ledger_of_theirs in theirs:
                counts = book.merge(ledger, ledger_of_theirs)
                say(f"{shown(other)}: {counts['runs']} new runs, {counts['analyses']} analyses added to "
                    f"{ledger.shown}")
    return 0


def _import(ledger: Ledger, remote: Path, reference: str, reanalyse: bool) -> None:
    counts = shipped.import_remote(ledger, remote, reference, reanalyse=reanalyse, report=lambda x: say(x, flush=True))
    say(f"{counts['runs']} runs in {remote}: {counts['new']} new to the ledger, {counts['analysed']} analysed, "
          f"{counts['unreadable']} not analysable by this pglab")


def _remote(remote: Path, why: str = "") -> None:
    """Refused unless ``remote`` is a DVC remote's folder."""
    if not (remote / "files" / "md5").is_dir():
        raise UserError(f"{printable(remote, 200)}: not a DVC remote (no files/md5/ in it){why}; nothing was written")


def cmd_import(a: argparse.Namespace, ledger: Ledger) -> int:
    _import(ledger, Path(a.remote), a.reference, a.reanalyse)
    ledger.compact()
    return 0


def _fill(ledger: Ledger, a: argparse.Namespace) -> None:
    """What a rebuild puts in a ledger: the DVC remote's runs, the pipeline's with their analyses, every archived
    run (each without an analysis analysed now by this checkout's code)."""
    root = Path(a.data_root)
    if not a.no_remote:
        _import(ledger, Path(a.remote), a.reference, reanalyse=False)
    shipped.add_pipeline(ledger, root, root.parent / "dvc.lock")
    runs = archived(root)
    revision = git_revision()
    for i, run in enumerate(runs, 1):
        try:
            added = book.add(ledger, run)
        except ManifestError as exc:
            say(f"[{i}/{len(runs)}] skipped {exc}", file=sys.stderr)
            continue
        if not ledger.query("SELECT 1 FROM analyses WHERE run_id = ?", (added["run_id"],)):
            manifest = rows.from_folder(run)
            say(f"[{i}/{len(runs)}] {added['study']} {added['run_id']}: "
                  f"{shipped.analyse(ledger, run, manifest, a.reference, revision)}", flush=True)


def cmd_rebuild(a: argparse.Namespace) -> int:
    """A ledger made anew from the run records: a SQLite file is built beside the old one, in its format (a
    ``.gz`` stays gzipped), and replaces it only when complete; a PostgreSQL ledger is rebuilt into an empty
    database (point ``PGLAB_LEDGER`` at it). A remote that is not there is refused, not taken for an empty one
    (the rebuilt ledger would silently lose its runs): ``--no-remote`` says there is none."""
    where = parse(location(a.ledger, a.data_root))
    if not a.no_remote:
        _remote(Path(a.remote), ": a rebuild without its runs would drop them from the ledger (--no-remote "
                                "rebuilds from the pipeline and the archive alone)")
    if where.path is None:
        with Ledger(where.url) as ledger:
            if ledger.query("SELECT COUNT(*) FROM runs")[0][0]:
                raise UserError(f"{ledger.shown} holds runs: rebuild into an empty database, then point "
                                f"${ENV} at it")
            _fill(ledger, a)
        say(f"rebuilt {shown(where.url)}")
        return 0
    path = where.path
    if path.exists():  # whatever is there is replaced: it must be a ledger, not a file named by a typo
        Ledger(str(path), readonly=True, strict=False).close()
    scratch = path.with_name(path.name + ".rebuilding" + (".gz" if where.packed else ""))
    scratch.unlink(missing_ok=True)
    with Ledger(str(scratch)) as ledger:
        _fill(ledger, a)
        ledger.compact()
        n = ledger.query("SELECT COUNT(*) FROM runs")[0][0]
    os.replace(scratch, path)
    say(f"rebuilt {printable(path)}: {n} runs")
    return 0


YOUR_HISTORY = "yours/reports/history.html"  # the shipped reports/history.html is the pipeline's (dvc repro history)


def pipeline_output(path: Path) -> str | None:
    """The DVC stage that writes ``path`` (from dvc.lock, in the current folder), or None."""
    lock = Path("dvc.lock")
    if not lock.is_file():
        return None
    import yaml

    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages") or {}
    want = path.resolve()
    return next((name for name, st in stages.items() for o in st.get("outs") or []
                 if (Path(o.get("path", "")).resolve() == want)), None)


def cmd_history(a: argparse.Namespace, ledger: Ledger) -> int:
    from pglab.views.history import write

    say(f"history of {ledger.shown}: {write(ledger, Path(a.out), a.with_marked)}")
    return 0


def _before(a: argparse.Namespace) -> None:
    """What a command is given, checked before its ledger is opened (and perhaps made or upgraded): a ledger named
    to be read exists, the runs to add are runs, the DVC remote is one."""
    where = parse(location(a.ledger, a.data_root))
    if a.ledger_func in READING and not is_yours(a.ledger) and where.path is not None and not where.path.exists():
        raise UserError(f"ledger {shown(where.url)}: no such file "
                        "(`pglab ledger add --ledger FILE` makes one); nothing was written")
    if a.ledger_func is cmd_add:  # without runs named, the pipeline's: each campaign's record and runs
        raw = [Path(a.data_root) / "raw" / s for s in STUDIES]
        for run in [find_run(Path(a.data_root), r) for r in a.runs] if a.runs else \
                [m for top in raw if (top / MANIFEST).exists() for m in campaign.members(top)]:
            rows.from_folder(run)
    if a.ledger_func is cmd_history and (stage := pipeline_output(Path(a.out))):
        raise UserError(f"--out {a.out}: the DVC pipeline's stage {stage} writes it (`dvc repro {stage}`, from the "
                        f"shipped ledger); your history goes to {YOUR_HISTORY} (the default) or another file")
    if a.ledger_func is cmd_import:
        _remote(Path(a.remote))


def cmd_ledger(a: argparse.Namespace) -> int:
    """The command on the ledger named, or on yours; reading yours, the shipped runs are taken in first. What it is
    given is checked first (``_before``): a run that is refused leaves the ledger unopened."""
    _before(a)
    with Ledger(a.ledger, a.data_root) as ledger:
        if a.ledger_func in READING and is_yours(a.ledger):
            book.with_reference(ledger, a.data_root)
        return int(a.ledger_func(a, ledger))


READING = (cmd_list, cmd_show, cmd_compare, cmd_history)
WITH_MARKED = ("also the runs marked for a busy or moving machine (left out by default: docs/running.md); runs "
               "named are always shown")


def add_parser(sub: Any, data_root_help: str, reference_help: str) -> None:
    g = sub.add_parser("ledger", help="every run of every study in one store (SQLite, or PostgreSQL for a team): "
                                      "add, list, show, compare, merge, import-dvc, rebuild, history")
    lsub = g.add_subparsers(dest="ledger_command", required=True)

    def command(name: str, func: Any, help: str) -> argparse.ArgumentParser:
        p = lsub.add_parser(name, help=help)
        p.add_argument("--ledger", help=LEDGER_HELP)
        p.add_argument("--data-root", default="data", help=data_root_help)
        p.set_defaults(func=cmd_ledger, ledger_func=func)
        return p

    p = command("add", cmd_add, "add runs (folders or ids); with none, the pipeline's five runs with their "
                                "analyses and every archived run under <data-root>/runs/")
    p.add_argument("runs", nargs="*", metavar="RUN", help="a run folder, or a run id under data/runs/<study>/")
    p.add_argument("--derived", help="the analysis of the one RUN given (a folder with points.csv, comparison.csv); "
                   "of a campaign, its verdicts over runs are added too")
    p = command("list", cmd_list, "one line per run: when, study, status, PostgreSQL, machine, verdicts")
    p.add_argument("--study", choices=[*STUDIES, *(f"slo-{s}" for s in STUDIES)], help="only this study's runs")
    p.add_argument("--with-marked", action="store_true", help=WITH_MARKED)
    p = command("show", cmd_show, "one run: its record and its claims")
    p.add_argument("run", metavar="RUN", help="a run id, or its last part (b7c23a)")
    p = command("compare", cmd_compare, "per claim, every run's value and verdict, in groups of comparable runs")
    p.add_argument("study", choices=STUDIES, help="the study whose runs are compared")
    p.add_argument("runs", nargs="*", metavar="RUN", help="only these runs (default: every analysed run)")
    p.add_argument("--machine", help="only runs on this machine key (see `pglab ledger list`)")
    p.add_argument("--pg", help="only runs on this PostgreSQL version (15.18)")
    p.add_argument("--profile", help="only runs of this profile")
    p.add_argument("--with-marked", action="store_true", help=WITH_MARKED)
    p = command("merge", cmd_merge, "add every run and analysis of other ledgers (a colleague's file, a team's "
                                    "URL), each checked and only read")
    p.set_defaults(func=cmd_merge)
    p.add_argument("others", nargs="+", metavar="OTHER", help="another ledger: a SQLite file or postgresql:// URL")
    p = command("import-dvc", cmd_import, "every run a DVC remote ever held, each re-analysed by this checkout")
    p.add_argument("--remote", default="data/dvc-remote", help="the DVC remote's folder (default data/dvc-remote)")
    p.add_argument("--reference", default="data/reference", help=reference_help)
    p.add_argument("--reanalyse", action="store_true", help="also runs the ledger holds an analysis of")
    p = command("rebuild", cmd_ledger, "a ledger made anew from the run records: the DVC remote's runs, the "
                                       "pipeline's, every archived run (analysed now where it has no analysis)")
    p.set_defaults(func=cmd_rebuild)
    p.add_argument("--remote", default="data/dvc-remote", help="the DVC remote's folder (default data/dvc-remote); "
                                                               "refused if it is not there")
    p.add_argument("--no-remote", action="store_true", help="no DVC remote: the pipeline's and archived runs alone")
    p.add_argument("--reference", default="data/reference", help=reference_help)
    p = command("history", cmd_history, "yours/reports/history.html: per claim every run's value and interval over "
                                        "time")
    p.add_argument("--out", default=YOUR_HISTORY, help=f"the page to write (default {YOUR_HISTORY}; never a file "
                                                       "the DVC pipeline writes, such as reports/history.html)")
    p.add_argument("--with-marked", action="store_true", help=WITH_MARKED)
