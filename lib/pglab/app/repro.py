"""``pglab repro [STUDY ...]`` (what ``make repro`` runs) and ``pglab report STUDY``: your runs, beside the reference.

Why not ``dvc repro --force``: that measures into the pipeline's own folders, so a user's run replaced the shipped
one in data/raw/, rewrote dvc.lock and the git-tracked data/metrics/, and the docs generator then wrote it into
the README. Here each study is measured (``pglab collect``: archived in data/runs/, copied to yours/data/raw/),
analysed by its notebook into yours/ and reported beside the shipped run in data/ (``pglab.views.beside``), and no
tracked file changes. It says before starting what the whole will cost (from the shipped runs), where it is
while it runs (study i of n, time left), warns when the machine was busy, and ends on the verdicts.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pglab.app import notebook_run
from pglab.app.collect import load_params
from pglab.app.paths import YOURS, YOURS_DATA, repo_root
from pglab.errors import UserError
from pglab.runs.reading import planned_points
from pglab.studies import STUDIES, module
from pglab.views import beside, report
from pglab.views.summary import costs, published

#: a study's analysis and report, on top of its collect (measured here: 6-40 s a notebook)
ANALYSIS_S = 40.0
#: CPU stolen by the hypervisor above this share of the machine during a study: its numbers are suspect
STEAL_WARN = 0.05
#: the share of the CPU in use, while pglab waits, above which a study starts on a busy machine
BUSY_WARN = 0.25


@dataclass(frozen=True)
class Estimate:
    seconds: float | None  # collect and analysis; None: no basis
    kept_bytes: float | None  # the run's raw output, archived and copied (twice its size)
    basis: str


def _planned(study: str, p: object) -> int | None:
    """Points the profile plans (blocks a first look adds not counted), or None when the plan needs hosts."""
    plan = module(study, "collect").plan
    for args in ((p,), (p, list(getattr(p, "systems", []) or []))):
        try:
            return len(plan(*args))  # type: ignore[arg-type]
        except TypeError:
            continue
        except Exception:  # noqa: BLE001 - an estimate only
            return None
    return None


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def estimate(study: str, profile: str, p: object, reference: Path) -> Estimate:
    """What a run of ``profile`` will cost, from the shipped run: its own cost at its profile, scaled by the
    planned points (times each point's seconds, where the study has them) for another profile."""
    raw = reference / "data" / "raw" / study
    runs = published(raw) if (raw / "manifest.json").exists() else []
    if not runs:
        return Estimate(None, None, "no shipped run to estimate from (dvc pull)")
    wall, _, _ = costs(*runs)
    m = runs[-1]
    kept = 2.0 * _size(raw)
    if m.get("profile") == profile:
        return Estimate(wall + ANALYSIS_S, kept, f"the shipped {profile} run's time")
    ref_points, points = len(planned_points(m)) * len(runs), _planned(study, p)
    if not ref_points or not points:
        return Estimate(None, None, f"no plan to scale the shipped {m.get('profile')} run's time by")
    ref_s, s = (m.get("parameters") or {}).get("seconds"), getattr(p, "seconds", None)
    scale = points * int(getattr(p, "runs", 1) or 1) / ref_points * (s / ref_s if ref_s and s else 1.0)
    return Estimate(wall * scale + ANALYSIS_S, kept * scale,
                    f"the shipped {m.get('profile')} run's time x {scale:.1f} (planned points"
                    + (" x seconds a point" if ref_s and s else "") + "; blocks a first look adds not counted)")


def minutes(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def _cpu_times() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def busy_share(seconds: float = 1.0) -> float:
    """The share of the machine's CPU in use over ``seconds`` (idle and iowait left out), sampled while pglab itself
    waits: at a study's start anything busy is someone else. Not the load average, which still counts the previous
    study's analysis (and ``make setup``) a minute later."""
    a = _cpu_times()
    time.sleep(seconds)
    d = [y - x for x, y in zip(a, _cpu_times(), strict=False)]
    return 1.0 - (d[3] + d[4]) / sum(d) if len(d) > 4 and sum(d) else 0.0


def busy_warning(before: list[int], after: list[int], busy_at_start: float) -> str:
    """A warning when the hypervisor stole CPU (``steal``, the 8th field of /proc/stat's cpu line) or something
    else kept the machine busy as the run started; "" otherwise."""
    delta = [b - a for a, b in zip(before, after, strict=False)]
    steal = delta[7] / sum(delta) if len(delta) > 7 and sum(delta) else 0.0
    out = []
    if steal > STEAL_WARN:
        out.append(f"the hypervisor took {steal:.0%} of the CPU during the run (steal): its numbers are suspect; "
                   "re-run it on a quieter host")
    if busy_at_start > BUSY_WARN:
        out.append(f"{busy_at_start:.0%} of the CPU was in use by something else as the run started: its numbers "
                   "may be too")
    return "; ".join(out)


def collect(study: str, profile: str | None) -> int:
    """A study's collect in its own process (servers and memory gone when it ends), publishing to yours/; then each
    run it archived into your ledger, as ``pglab collect`` does (a failed run is a run too)."""
    from pglab.app.ledger_cli import archived
    from pglab.ledger.book import record

    before = set(archived(Path("data"), study))
    cmd = [sys.executable, "-m", "pglab.app.collect", study, "--publish-root", str(YOURS_DATA),
           *(["--profile", profile] if profile else [])]
    try:
        return subprocess.run(cmd, check=False).returncode
    finally:
        for run in sorted(set(archived(Path("data"), study)) - before):
            record(run, data_root="data")


def closing(studies: list[str], failed: dict[str, str], reference: Path, warnings: dict[str, str]) -> str:
    """The verdicts of your runs beside the reference's, in the reports' order and words, and where to look."""
    lines = ["", "Your runs (yours/reports/index.html), beside the shipped reference:"]
    for study in studies:
        if study in failed:
            lines.append(f"  {study}: not analysed ({failed[study]})")
            continue
        own, ref = beside.read(YOURS, study), beside.read(reference, study)
        if own is None:
            continue
        rows = beside.claims_rows(ref.comparison, own.comparison) if ref else []
        agree = sum(r["agree"] for r in rows)
        lines.append(f"  {study}: {_count(own)}" + (f"; the reference: {_count(ref)}; {agree} of {len(rows)} "
                                                    "verdicts the same" if ref else ""))
        lines.append(f"    report: yours/reports/{study}.html")
        if study in warnings:
            lines.append(f"    warning: {warnings[study]}")
    return "\n".join(lines)


def _count(side: beside.Side) -> str:
    verdicts = side.comparison["verdict"].astype(str)
    return ", ".join(f"{int((verdicts == v).sum())} {v}" for v in beside.VERDICT_CLASS if (verdicts == v).any())


def cmd_repro(a: argparse.Namespace) -> int:
    root = repo_root()
    os.chdir(root)
    studies = list(dict.fromkeys(a.studies or STUDIES))
    for s in studies:
        if s not in STUDIES:
            near = difflib.get_close_matches(s, STUDIES, 1)
            raise UserError(f"{s!r} is not a study" + (f": did you mean {near[0]}?" if near else "")
                            + f" (the studies: {', '.join(STUDIES)})")
    checked = {s: load_params(s, None, a.profile)[:2] for s in studies}  # every parameter refused before anything
    plans = {s: estimate(s, name, p, root) for s, (name, p) in checked.items()}
    total = sum(e.seconds or 0.0 for e in plans.values())
    kept = sum(e.kept_bytes or 0.0 for e in plans.values())
    what = f"{len(studies)} {'study' if len(studies) == 1 else 'studies'}"
    print(f"pglab repro: {what} on this machine into yours/ (the shipped runs in data/ stay as they "
          f"are): about {minutes(total)} and {kept / 1e6:,.0f} MB kept, estimated from the shipped runs", flush=True)
    for s, e in plans.items():
        print(f"  {s:<20} {checked[s][0]:<8} about {minutes(e.seconds):>7}  ({e.basis})", flush=True)
    if a.estimate:
        return 0
    failed: dict[str, str] = {}
    warnings: dict[str, str] = {}
    started = time.monotonic()
    for i, study in enumerate(studies, 1):
        left = sum(plans[s].seconds or 0.0 for s in studies[i - 1:])
        print(f"\n== study {i} of {len(studies)}: {study} ({checked[study][0]}), about {minutes(plans[study].seconds)}"
              f"; about {minutes(left)} left in all (elapsed {minutes(time.monotonic() - started)})", flush=True)
        busy, before = busy_share(), _cpu_times()
        print(f"   setting up {study}: hosts checked, servers initialised and started (10-30 s), then its points",
              flush=True)
        code = collect(study, a.profile)
        if code:
            failed[study] = f"pglab collect exited {code}; the run, if any, stays archived in data/runs/{study}/"
            print(f"pglab: {study}: {failed[study]}", file=sys.stderr, flush=True)
            continue
        warning = warnings[study] = busy_warning(before, _cpu_times(), busy)
        if warning:
            print(f"pglab: warning: {study}: {warning}", file=sys.stderr, flush=True)
        print(f"   analysing {study} (its notebook, then the report beside the reference)", flush=True)
        try:
            notebook_run.execute(study, YOURS, root)
            from pglab.ledger.book import record

            record(YOURS_DATA / "raw" / study, YOURS_DATA / "derived" / study, data_root="data")  # with its analysis
        except Exception as exc:  # noqa: BLE001 - the other studies still run; said at the end
            failed[study] = f"analysis failed: {exc}"
            print(f"pglab: {study}: {failed[study]}", file=sys.stderr, flush=True)
    _pages(root)
    print(closing(studies, failed, root, {s: w for s, w in warnings.items() if w}))
    print(f"\n{len(studies) - len(failed)} of {len(studies)} studies measured and reported in "
          f"{minutes(time.monotonic() - started)}.")
    return 1 if failed else 0


def cmd_report(a: argparse.Namespace) -> int:
    """Your run of a study (yours/data/raw/<study>) analysed by its notebook and reported beside the reference."""
    root = repo_root()
    os.chdir(root)
    if not (YOURS_DATA / "raw" / a.study / "manifest.json").exists():
        raise UserError(f"no run of yours of {a.study} in {YOURS_DATA / 'raw' / a.study}: `pglab collect {a.study}` "
                        "makes one")
    out = notebook_run.execute(a.study, YOURS, root)
    from pglab.ledger.book import record

    record(YOURS_DATA / "raw" / a.study, YOURS_DATA / "derived" / a.study, data_root="data")  # as `make repro` does
    _pages(root)
    print(f"{out} (and yours/reports/index.html, history.html; the run and its analysis are in your ledger)")
    return 0


def _pages(root: Path) -> None:
    """Your index, and the history page it links (from your ledger)."""
    (YOURS / "reports" / "index.html").write_text(report.index_html(YOURS, root), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pglab.views.history", "--out", str(YOURS / "reports" / "history.html")],
                   check=False)
