"""Resuming a run: same plan, same code, same folder; refused with the difference named otherwise.

A run that was interrupted (Ctrl-C), killed (SIGKILL, a lost machine) or failed part-way keeps every
finished point. ``pglab collect STUDY --resume [RUN]`` reopens its folder: what the killed process left
running is cleaned up first (as ``pglab cleanup`` would), the deployment is built anew, and the sweep
continues at the first unfinished point (``pglab.runs.sweep.run``). The manifest lists every resume; the
analysis reads the folder as one run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pglab.errors import UserError
from pglab.hosts.inventory import Inventory
from pglab.runs.leftovers import UNFINISHED, CleanupReport, _clean_run, _inventory_for, _run_in_progress
from pglab.runs.reading import archive_dir, load_manifest, runs
from pglab.runs.record import MANIFEST
from pglab.runs.store import RunStore
from pglab.runs.writing import git_revision

DONE = ("complete", "partial")  # every planned point was tried: nothing to resume


class ResumeError(UserError):
    """The run cannot be resumed as asked; nothing was started."""


def latest_unfinished(data_root: str | Path, study: str) -> Path:
    """The newest archived run of ``study`` that did not complete."""
    found = [r for r in runs(archive_dir(data_root, study)) if load_manifest(r).get("status") not in DONE]
    if not found:
        raise ResumeError(f"no unfinished {study} run under {archive_dir(data_root, study)} to resume")
    return found[-1]


def find(data_root: str | Path, study: str, run: str | None) -> Path:
    """A run folder from a path, a run id under the archive, or (None) the newest unfinished run."""
    if run is None:
        return latest_unfinished(data_root, study)
    for candidate in (Path(run), archive_dir(data_root, study) / run):
        if (candidate / MANIFEST).exists():
            return candidate
    raise ResumeError(f"{run}: not a run folder, nor a run id under {archive_dir(data_root, study)}")


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """``key: old -> new`` for every value that differs, recursively."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += differences(old.get(k, "<absent>"), new.get(k, "<absent>"), f"{path}.{k}" if path else str(k))
        return out
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def resumable(run_dir: Path, parameters: dict[str, Any], plan: dict[str, Any],
              inventory: Inventory | None = None) -> RunStore:
    """Check that ``run_dir`` can be resumed with these parameters and plan, clean up what it left, reopen it."""
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    status = manifest.get("status")
    if status in DONE:
        raise ResumeError(f"{run_dir}: the run ended {status} (every planned point was tried); there is nothing "
                          "to resume: start a new run")
    if status == "running" and _run_in_progress(manifest):
        raise ResumeError(f"{run_dir}: the run is still in progress (pid {manifest.get('pid')})")
    problems = [f"parameter {d}" for d in differences(manifest.get("parameters", {}), json.loads(
        json.dumps(parameters, default=str)))]
    old_plan = manifest.get("plan", {})
    if old_plan.get("points") != plan["points"] or old_plan.get("seed") != plan["seed"]:
        problems.append(f"plan: seed {old_plan.get('seed')!r} -> {plan['seed']!r}, "
                        f"{len(old_plan.get('points', []))} -> {len(plan['points'])} points"
                        + ("" if old_plan.get("points") == plan["points"] else " (order or ids differ)"))
    rev = git_revision()
    if manifest.get("git_revision") != rev:
        problems.append(f"git revision: {manifest.get('git_revision')} -> {rev}")
    problems += _machine_problems(manifest, inventory or Inventory())
    if problems:
        raise ResumeError(f"{run_dir} cannot be resumed with what was asked (resume with the run's own "
                          "parameters, profile and code, or start a new run):\n  - " + "\n  - ".join(problems))
    if status in UNFINISHED:  # killed: stop what it left, exactly as `pglab cleanup` would
        report = CleanupReport()
        _clean_run(run_dir / MANIFEST, manifest, _inventory_for(manifest, inventory or Inventory(), report),
                   False, report)
        if report.failed:
            raise ResumeError(f"{run_dir}: what the run left could not be stopped: {'; '.join(report.failed)}")
    return RunStore.reopen(run_dir)


# What a resumed run must find unchanged on every host, or its blocks would mix two machines.
SAME_MACHINE = ("cpu_model", "cores", "mem_total_kb", "kernel", "os", "machine_id")


def _machine_problems(manifest: dict[str, Any], inventory: Inventory) -> list[str]:
    """Host facts recorded by the run that differ now (another machine, another kernel...)."""
    from pglab.runs.preflight import host_problems

    recorded = manifest.get("hosts", {})
    names = [n for n in recorded if n in inventory.hosts]
    problems, hosts = host_problems(inventory, names, programs=())
    try:
        for name, host in hosts.items():
            now = host.facts()
            for key in SAME_MACHINE:
                if key in recorded[name] and recorded[name].get(key) != now.get(key):
                    problems.append(f"host {name} {key}: {recorded[name].get(key)!r} -> {now.get(key)!r}")
    finally:
        for h in hosts.values():
            h.close()
    return problems


def open_run(data_root: str | Path, study: str, profile: str, parameters: dict[str, Any], plan: dict[str, Any],
             inventory: Inventory, resume: Path | None = None) -> RunStore:
    """The run's folder: a new one under ``data_root``, or ``resume`` once it is checked to be the same
    study, parameters and plan on the same machines; the plan is recorded in its manifest either way. A resumed
    run keeps its first look's record (``plan.adaptive``, ``pglab.workloads.adaptive``): the look is not taken
    again over a folder that holds the blocks it added."""
    store = (resumable(resume, parameters, plan, inventory) if resume else
             RunStore(archive_dir(data_root, study), study, profile, parameters))
    earlier = store.manifest.get("plan", {}).get("adaptive") if resume else None
    store.manifest["plan"] = {**plan, "adaptive": earlier} if earlier else plan
    return store

