"""What every study's ``collect()`` opens with, written once: a study states what differs, not the steps.

The steps, in this order: the parameters validated whole (``pglab.runs.params``), the study's preflight
(everything that can be known before a server starts), the plan, the run folder (new, or ``resume``
once it is checked to be the same study, parameters, plan and machines: ``pglab.runs.resume``), the
session that stops whatever the measurement starts, and every host of the run opened before the first
node (pg_hba then admits exactly their data addresses). Each attempt's wall time goes to the
manifest's ``wall_s`` (one entry per resume; ``collect_s`` with the clean-up), and the run's
``measurement_share``, the part of it a workload was measured, is written when the session has closed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pglab.hosts.inventory import Inventory
from pglab.nodes.emulation import Emulation
from pglab.nodes.emulation import problems as emulation_problems_on
from pglab.runs import machine, preflight
from pglab.runs.params import validate
from pglab.runs.reading import point_metas
from pglab.runs.resume import open_run
from pglab.runs.session import Session, session
from pglab.runs.store import RunStore
from pglab.runs.sweep import Planned, plan_record

P = TypeVar("P")  # a study's parameter model: seed, blocks, hosts, tls (if any), model_dump
Found = TypeVar("Found")  # what a study's check found (systems to skip, TimescaleDB's version), or None


@dataclass(frozen=True)
class Plan:
    """What the run measures, as the manifest records it and a resume checks it (``sweep.plan_record``)."""

    points: Sequence[Planned]
    baseline: str
    kept_across_blocks: Sequence[str] = field(default_factory=tuple)


@dataclass
class Opened(Generic[P]):
    """An open run: its parameters, folder, session and points, and what the check found."""

    p: P
    store: RunStore
    s: Session
    points: list[Planned]
    found: Any
    started: float  # time.monotonic() when the run folder was open


@contextlib.contextmanager
def study_run(study: str, model: type[P], params: dict[str, Any] | P, check: Callable[[P, Inventory], Found],
              plan: Callable[[P, Found], Plan], *, data_root: str | Path, profile: str,
              inventory: Inventory | None, resume: Path | None) -> Iterator[Opened[P]]:
    """Open the run of ``study``: ``check(p, inventory)`` raises PreflightError before anything starts,
    ``plan(p, found)`` gets what it returned."""
    p: Any = params if isinstance(params, model) else validate(model, params, f"{study} parameters")  # type: ignore[arg-type]
    inventory = inventory or Inventory()
    found = check(p, inventory)
    emulated = p.emulation() if hasattr(p, "emulation") else None
    if emulated:  # a host without the library or taskset: refused before anything starts
        preflight.require(emulation_problems(emulated, inventory, p.hosts))
    named = preflight.builds_named(p, f"{study} parameters")
    build = named.get("postgres")
    for b in dict.fromkeys(named.values()):  # fetched (once per machine) or refused before anything starts
        preflight.require(preflight.build_problems(b, inventory, p.hosts))
    preflight.require(preflight.setting_name_problems(p, inventory, named))  # names the build does not know
    planned = plan(p, found)
    record = plan_record(planned.points, p.seed, planned.baseline, p.blocks, planned.kept_across_blocks)
    before = machine.probe(inventory, p.hosts, wait=True)  # a busy machine refused before a run folder exists
    reasons = machine.gate(before)
    store = open_run(data_root, study, profile, p.model_dump(), record, inventory, resume)
    machine.opened(store, before, reasons)
    started = time.monotonic()
    if build:
        store.manifest["postgres_build"] = preflight.build_record(build)
    if set(named) - {"postgres"}:  # a node of another build than the rest (a subscriber across majors)
        store.manifest["postgres_builds"] = {f: preflight.build_record(b) for f, b in named.items()}
    store.save()
    with session(inventory, store, tls=getattr(p, "tls", False), emulation=emulated, build=build) as s:
        s.deploy.open(p.hosts)  # every host first: pg_hba admits exactly their data addresses
        yield Opened(p, store, s, list(planned.points), found, started)
        store.manifest.setdefault("wall_s", []).append(round(time.monotonic() - started, 1))
    store.manifest.setdefault("collect_s", []).append(round(time.monotonic() - started, 1))  # with the clean-up
    store.manifest.update(measurement_share(store))
    machine.closed(store, inventory, p.hosts)
    store.save()


def emulation_problems(emulated: Emulation, inventory: Inventory, hosts: Sequence[str]) -> list[str]:
    """What stops ``emulated`` on the run's hosts (each opened for the check, then closed)."""
    opened = [inventory.connect(h) for h in dict.fromkeys(hosts)]
    try:
        return emulation_problems_on(emulated, opened)
    finally:
        for h in opened:
            h.close()


def measurement_share(store: RunStore) -> dict[str, Any]:
    """The share of the collect's wall time (every attempt, set-up and clean-up included) during which a
    measured workload ran (``Point.workload_started``/``ended``), over the points that finished ``ok``.
    The goal is 0.85 at the quick profile: the rest is set-up, resets and checks no figure shows."""
    measured = 0.0
    for _, m in point_metas(store.dir, store.manifest):
        if m["status"] == "ok":
            measured += float(m.get("measured_s") or 0.0)
    wall = float(sum(store.manifest.get("collect_s", [])))
    share = round(measured / wall, 3) if wall > 0 else None
    return {"measured_s": round(measured, 1), "measurement_share": share}
