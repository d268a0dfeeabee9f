"""``python -m pglab.app.collect STUDY``: what a DVC collect stage runs, and what ``pglab collect`` calls.

Its imports are what collecting a study needs and nothing more: a collect stage's deps in dvc.yaml are
exactly the files this module and the study's collect module import (tests/test_dvc_deps.py checks it
both ways), so an edit to a parser, the lab, the CLI, analysis or a figure never re-measures.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pglab import exits
from pglab.errors import UserError
from pglab.hosts.inventory import Inventory, load_inventory
from pglab.runs import campaign, marks
from pglab.runs.params import profile_values, validate
from pglab.runs.preflight import builds_named
from pglab.runs.reading import load_manifest, not_publishable, pipeline_dir, points_not_ok_summary
from pglab.runs.store import archive_published, publish
from pglab.studies import STUDIES, module


def load_params(study: str, params_file: str | None, profile: str | None,
                inventory: str | None = None, postgres: str | None = None) -> tuple[str, Any, Inventory]:
    """(profile name, validated parameters, inventory) of ``study``, every problem named before anything runs;
    ``postgres`` overrides the profile's build (``--postgres``)."""
    path = params_file or f"params/{study}.yaml"
    name, values, inv_path = profile_values(path, profile)
    if postgres:
        values["postgres"] = postgres
    p = validate(module(study, "params").Params, values, f"{path} profiles.{name}")
    builds_named(p, f"{path} profiles.{name}")  # a build the catalogue lacks: named here, before anything starts
    return name, p, load_inventory(inventory or inv_path or "params/hosts.yaml")


MAX_PLANNED_H = 24  # a collect planned to measure longer than this needs --yes (a typo in seconds or blocks?)


def planned_seconds(study: str, p: Any) -> float | None:
    """The least time the profile's plan measures (points x each point's seconds x runs; set-up, blocks a first
    look adds and loads without a set duration not counted), or None when the plan needs what only hosts tell."""
    plan = module(study, "collect").plan
    for args in ((p,), (p, list(getattr(p, "systems", []) or []))):
        try:
            points = len(plan(*args))
            break
        except TypeError:
            continue
        except Exception:  # noqa: BLE001 - an estimate only
            return None
    else:
        return None
    per = next((float(getattr(p, k)) for k in ("seconds", "run_seconds", "read_seconds") if getattr(p, k, None)), 0.0)
    return points * per * int(getattr(p, "runs", 1) or 1)


def refuse_long(study: str, p: Any, yes: bool) -> None:
    """A UserError before anything starts when the plan measures past ``MAX_PLANNED_H`` hours, unless ``yes``."""
    s = planned_seconds(study, p)
    if s is not None and s > MAX_PLANNED_H * 3600 and not yes:
        raise UserError(f"{study}: the profile plans at least {s / 3600:,.1f} h of measuring (points x seconds x "
                        f"runs), past {MAX_PLANNED_H} h: check seconds, blocks and runs, or pass --yes to run it")


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("study", choices=STUDIES)
    c.add_argument("--profile", help="profile of the params file (default: its `profile:` key)")
    c.add_argument("--params", help="params file (default params/<study>.yaml)")
    c.add_argument("--inventory", help="host inventory (default: the params file's `inventory:`, "
                                       "params/hosts.yaml; `pglab lab up` writes params/lab.yaml)")
    c.add_argument("--data-root", default="data", help="where runs are archived: <data-root>/runs/<study>/<run-id>")
    c.add_argument("--publish-root", help="where a finished run is copied for analysis, <publish-root>/raw/<study> "
                                          "(default: the data root, as a DVC collect stage does; `pglab collect` "
                                          "from the default data root copies it to yours/data)")
    c.add_argument("--postgres", metavar="BUILD",
                   help="the servers' PostgreSQL: a major 13-18 or a build id of params/postgres_builds.yaml "
                        "(default: the profile's `postgres:`, else each host's bindir: Debian's 15); fetched once")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument("--yes", action="store_true", help=f"run a profile planned to measure past {MAX_PLANNED_H} h")
    c.add_argument("--busy-ok", action="store_true",
                   help="start on a busy machine all the same (others above 10%% of the CPU, or a load above the "
                        "cores); the run is marked, and left out of verdicts unless asked (PGLAB_BUSY_OK=1)")
    c.add_argument("--add-sitting", action="store_true",
                   help="a campaign profile: add its runs to the campaign already published (same profile and "
                        "parameters, at least an hour later or after a reboot) as another sitting, so that its "
                        "verdicts are across sittings (docs/measurement.md)")
    c.add_argument("--accept-failed", action="store_true",
                   help="publish a partial run (some points failed) for analysis all the same")
    c.add_argument("--resume", nargs="?", const="", metavar="RUN",
                   help="continue an interrupted or killed run (a run folder or id; default: the newest "
                        "unfinished run of the study) at its first unfinished point, with the same parameters")


def published_dir(a: argparse.Namespace) -> Path:
    """``<publish root>/raw/<study>``: the pipeline's ``data/raw/<study>`` for a DVC stage, ``yours/data/raw/<study>``
    for ``pglab collect`` (its default), so that a user's run never replaces the shipped one."""
    return pipeline_dir(getattr(a, "publish_root", None) or a.data_root, a.study)


def collect(a: argparse.Namespace) -> int:
    """Measure into the archive; publish to data/raw/<study> only a run that ended complete (every planned
    point measured), or a partial one with ``--accept-failed``."""
    name, p, inventory = load_params(a.study, a.params, a.profile, a.inventory, getattr(a, "postgres", None))
    refuse_long(a.study, p, getattr(a, "yes", False))
    if getattr(a, "busy_ok", False):
        os.environ["PGLAB_BUSY_OK"] = "1"  # read where the run opens (pglab.runs.machine), in every study alike
    if p.runs > 1:
        return collect_campaign(a, name, p, inventory)[0]
    resume = None
    if a.resume is not None:
        from pglab.runs.resume import find

        resume = find(a.data_root, a.study, a.resume or None)
        print(f"resuming {resume}", file=sys.stderr)
    run = module(a.study, "collect").collect(p, data_root=a.data_root, profile=name, inventory=inventory,
                                             progress=not a.quiet, resume=resume)
    status = load_manifest(run).get("status")
    dest = published_dir(a)
    why = not_publishable(run, status)
    if why and not (status == "partial" and a.accept_failed):
        print(f"pglab: {why}. It stays in the archive and was not published to {dest}"
              + (" (pass --accept-failed to publish it all the same)" if status == "partial" else ""),
              file=sys.stderr)
        return exits.PARTIAL if status == "partial" else exits.PROCESS
    if status == "partial":
        print(f"pglab: publishing partial run {run} as asked (--accept-failed): {points_not_ok_summary(run)}",
              file=sys.stderr)
    publish(run, dest)
    print(f"run archived in {run}; its copy for analysis is {dest}")
    return 0


def measure_campaign(study: str, p: Any, *, data_root: str | Path, profile: str, inventory: Inventory,
                     progress: bool = True, accept_failed: bool = False) -> tuple[list[Path], dict[str, Any], str]:
    """``p.runs`` independent runs one after the other, each on fresh servers with a seed drawn for it: (the runs,
    ``campaign.json``'s record, why the campaign stopped: "" when every run may be published). It stops at the
    first run that may not be published: a verdict over runs must not quietly rest on fewer. Each run is archived
    as it ends, whatever happens to the next."""
    runs: list[Path] = []
    records: list[dict[str, Any]] = []
    for i in range(1, p.runs + 1):
        seed = campaign.draw_seed()
        print(f"pglab: run {i} of {p.runs} of the {study} campaign ({profile}), seed {seed}", file=sys.stderr,
              flush=True)
        try:
            run = module(study, "collect").collect(p.model_copy(update={"seed": seed}), data_root=data_root,
                                                   profile=profile, inventory=inventory, progress=progress)
        except BaseException:
            if runs:
                print(f"pglab: the campaign stopped in run {i} of {p.runs}; the runs that ended stay archived: "
                      + ", ".join(str(r) for r in runs), file=sys.stderr)
            raise
        m = load_manifest(run)
        runs.append(run)
        records.append({"run_id": m["run_id"], "seed": seed, "status": m.get("status")})
        why = not_publishable(run, m.get("status"))
        if why and not (m.get("status") == "partial" and accept_failed):
            return runs, campaign.record_of(records, study, profile, p.runs), f"run {i} of {p.runs}: {why}"
    return runs, campaign.record_of(records, study, profile, p.runs), ""


def joinable(dest: Path, study: str, profile: str, p: Any, inventory: Inventory) -> list[str]:
    """The run ids of the campaign published in ``dest`` that ``--add-sitting`` adds another sitting to; a
    UserError before anything starts when there is none, it is of another profile or parameters (the seed aside),
    or its last run ended less than an hour ago on this boot (the new runs would be of the same sitting)."""
    old = campaign.read(dest) if (dest / campaign.CAMPAIGN).exists() else None
    if old is None or old.get("study") != study or old.get("profile") != profile:
        raise UserError(f"--add-sitting: {dest} holds no {study} campaign of profile {profile} to add a sitting to; "
                        "collect one first (without --add-sitting)")
    last = load_manifest(dest)
    mine, theirs = ({k: v for k, v in d.items() if k != "seed"} for d in (p.model_dump(mode="json"),
                                                                          last.get("parameters") or {}))
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ:
        raise UserError(f"--add-sitting: the published campaign's parameters differ in {', '.join(differ)}: a "
                        "verdict across sittings pools runs of one configuration; collect a campaign of its own")
    ended = marks.when(last.get("end"))
    host, before = next(iter(((last.get("machine") or {}).get("before") or {}).items()), ("", {}))
    if ended and before.get("boot_id") and host in inventory.hosts and _boot_id(inventory, host) == before["boot_id"]:
        wait = marks.SITTING_GAP_S - (datetime.now(timezone.utc) - ended).total_seconds()
        if wait > 0:
            raise UserError(f"--add-sitting: the published campaign's last run ended {last.get('end')}, less than an "
                            f"hour ago on this boot: the new runs would be of the same sitting; wait {wait / 60:.0f} "
                            "min (or after a reboot)")
    return [str(r["run_id"]) for r in old["runs"]]


def _boot_id(inventory: Inventory, host: str) -> str:
    """The boot the run's host is on now (over SSH for a remote one), as the machine probe reads it."""
    with inventory.connect(host) as h:
        return h.read_text("/proc/sys/kernel/random/boot_id").strip()


def collect_campaign(a: argparse.Namespace, name: str, p: Any, inventory: Inventory) -> tuple[int, list[Path]]:
    """The CLI's campaign: measured (``measure_campaign``), then published whole or not at all; (exit code, the
    runs it archived)."""
    if a.resume is not None:
        raise UserError(f"--resume continues one run, and profile {name} is a campaign of {p.runs} runs: resume the "
                        "run with `--resume RUN` and a profile of runs: 1, or start the campaign again")
    dest = published_dir(a)
    earlier = joinable(dest, a.study, name, p, inventory) if getattr(a, "add_sitting", False) else []
    runs, record, why = measure_campaign(a.study, p, data_root=a.data_root, profile=name, inventory=inventory,
                                         progress=not a.quiet, accept_failed=a.accept_failed)
    if why:
        partial = record["runs"][-1]["status"] == "partial"
        print(f"pglab: {why}. The campaign stops; its runs stay archived and none was published to {dest}"
              + (" (pass --accept-failed to publish partial runs)" if partial else ""), file=sys.stderr)
        return exits.PARTIAL if partial else exits.PROCESS, runs
    if earlier:  # another sitting: the published runs (their originals archived first) before this campaign's
        archive_published(dest, runs[-1].parent)
        old = campaign.read(dest) or {}
        record = {**record, "asked": int(old.get("asked") or 0) + p.runs, "runs": [*old["runs"], *record["runs"]]}
    publish(runs[-1], dest, [*(runs[-1].parent / i for i in earlier), *runs[:-1]], record)
    print(f"{p.runs} runs archived in {runs[-1].parent}; the campaign's copy for analysis is {dest}"
          + (f", after the {len(earlier)} runs of its earlier sitting(s)" if earlier else ""))
    return 0, runs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.app.collect", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return exits.run(collect, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
