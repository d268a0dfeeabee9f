"""The measurement layer's loop: blocks, the seeded order, progress, a raw folder per point, resume.

A study declares what it compares and hands over one function that measures one point; this module
owns everything around it, the same way for every study (shared design, "Measurement design"):

* A **block** is one repetition of every configuration being compared (levels, systems, targets,
  modes) at one group (a client count, or a kind of workload at a client count), run back to back in
  a seeded random order. The baseline runs twice in every block (``copy`` 1 and 2, the A/A pair):
  the spread of the second baseline over the first is the run's noise floor.
* The order of the groups within a block and of the configurations within a group is drawn from
  ``random.Random(seed)``: the same seed gives the same plan, so a run can be resumed.
* ``run`` skips points whose folder says they finished (``ok``, ``failed``...), moves a point that was
  in flight when the run died to ``interrupted/`` (kept, never counted) and measures it again.
* A point measured while another load took more than its share of the CPU (``busy_flag``,
  ``pglab.workloads.cpu``) is moved to ``beside_a_load/`` and measured once more at once; a second one
  flagged is kept (the analysis leaves it out, the run is marked: ``pglab.runs.machine.closed``).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pglab.errors import RunAborted, first_line
from pglab.machine_rules import OTHERS_MAX as BUSY_FLAG
from pglab.runs.progress import bar as progress_bar
from pglab.runs.reading import read_meta
from pglab.runs.record import ManifestError
from pglab.runs.store import Point, RunStore, write_meta

AA_SUFFIX = "aa"  # id suffix of the second baseline in a block
FINISHED = ("ok", "failed", "inconsistent")  # statuses of a point that is over: resume skips it
INTERRUPTED = "interrupted"  # folder of points that were in flight when a run died
BESIDE_A_LOAD = "beside_a_load"  # folder of points measured while another load took its share (measured again)


@dataclass(frozen=True)
class Group:
    """What the configurations of a block are compared at: ``name`` is part of point ids (``c004``)."""

    name: str
    factors: Mapping[str, Any] = field(default_factory=dict)
    configs: tuple[str, ...] | None = None  # compared at this group when not every one (a read-only target
    # has no place in a write workload); None = all of ``plan_blocks``'s configurations


@dataclass(frozen=True)
class Planned:
    """One point: a configuration, in a block, at a group; ``copy`` 2 is the block's second baseline."""

    block: int
    group: Group
    config: str
    copy: int = 1
    prefix: str = ""

    @property
    def id(self) -> str:
        parts = [self.prefix, f"b{self.block:02d}", self.group.name, self.config]
        if self.copy > 1:
            parts.append(AA_SUFFIX if self.copy == 2 else f"copy{self.copy}")
        return "-".join(p for p in parts if p)

    def factors(self) -> dict[str, Any]:
        """What the point's meta.json records: everything analysis groups and pairs by."""
        return {"block": self.block, "group": self.group.name, "config": self.config, "copy": self.copy,
                **dict(self.group.factors)}


def plan_blocks(configs: Sequence[str], baseline: str, groups: Sequence[Group], blocks: int, seed: int,
                prefix: str = "", aa: bool = True, start: int = 1) -> list[Planned]:
    """Every configuration once per block and group, the baseline twice (``aa``), in a seeded order;
    blocks ``start``..``blocks`` (a block added later is planned alone, with a seed of its own).

    Blocks run one after the other (block 1 at every group, then block 2...): a slow drift of the
    machine then spreads over every configuration alike instead of following one of them.
    """
    for cs in [configs, *(g.configs for g in groups if g.configs is not None)]:
        if baseline not in cs:
            raise ValueError(f"baseline {baseline!r} is not one of the configurations {list(cs)}")
    rng = random.Random(seed)
    out: list[Planned] = []
    for b in range(start, blocks + 1):
        order = list(groups)
        rng.shuffle(order)
        for g in order:
            points = [Planned(b, g, c, 1, prefix) for c in (configs if g.configs is None else g.configs)]
            if aa:
                points.append(Planned(b, g, baseline, 2, prefix))
            rng.shuffle(points)
            out.extend(points)
    return out


def plan_record(points: Sequence[Planned], seed: int, baseline: str, blocks: int,
                kept_across_blocks: Iterable[str] = ()) -> dict[str, Any]:
    """The manifest's ``plan``: what resume checks and what a reader needs to know of the design."""
    return {"seed": seed, "baseline": baseline, "blocks": blocks, "aa": True, "points": [p.id for p in points],
            "kept_across_blocks": list(kept_across_blocks),
            "order": "blocks in turn; within a block, groups and configurations in a seeded random order"}


Measure = Callable[[Planned, Point], str | None]


class Abort(RunAborted):
    """Raised by ``measure``: this point failed, and the run cannot go on (a standby of the topology died).

    ``run`` records the point as failed with the message, then re-raises: the session stops everything."""


# What a failed point's reason says when the machine, not the configuration, is at fault: no later
# point could succeed either
FATAL_REASONS = ("No space left on device",)


def finished(store: RunStore) -> dict[str, str]:
    """Point id -> status of the points already over (a resumed run skips them)."""
    out: dict[str, str] = {}
    for meta in store.dir.glob("*/meta.json"):
        try:
            m = read_meta(meta.parent, store.manifest)
        except ManifestError:  # cut short by the crash that stopped the run: measured again
            continue
        if m.get("block") is not None and m["status"] in FINISHED:  # planned points only, not set-up steps
            out[m.get("point") or meta.parent.name] = m["status"]
    return out


def set_aside_in_flight(store: RunStore, ids: Iterable[str]) -> list[str]:
    """Move the folders of points that started but never finished to ``interrupted/`` (kept, not counted)."""
    moved = []
    done = finished(store)
    for pid in ids:
        if (store.dir / pid).exists() and pid not in done:
            set_aside(store, pid, INTERRUPTED, "in flight when the run stopped; measured again")
            moved.append(pid)
    return moved


def set_aside(store: RunStore, pid: str, where: str, why: str) -> None:
    """Move point ``pid``'s folder to ``where/<pid>.<n>`` (kept, never counted: one level down, no reader's glob
    reaches it), its status ``where`` and ``why`` in its meta."""
    d, dest_root = store.dir / pid, store.dir / where
    dest_root.mkdir(exist_ok=True)
    n = 1
    while (dest_root / f"{pid}.{n}").exists():
        n += 1
    try:
        m = read_meta(d, store.manifest)
    except ManifestError:  # none, or cut short by the crash: the folder is set aside as it is
        m = None
    if m is not None:
        m.update(status=where, set_aside=why)
        write_meta(d, m)
    shutil.move(str(d), str(dest_root / f"{pid}.{n}"))


def run(store: RunStore, points: Sequence[Planned], measure: Measure, *, desc: str, progress: bool = True,
        errors: tuple[type[BaseException], ...] = (Exception,),
        health: Callable[[], str | None] | None = None) -> dict[str, int]:
    """Measure every point not finished yet, in plan order; returns the counts by status.

    ``measure(planned, point)`` returns None for ``ok`` or a short reason for ``failed``; an exception
    in ``errors`` fails that point with its message and the sweep goes on (a vanished host raises SSH
    and socket errors, not only ProcessError). Ctrl-C and SIGTERM are BaseExceptions and end the run.

    After a failed point, ``health()`` says whether the run can go on (None) or why not (a node that
    died, a host that stopped answering): then, or when the reason is a full disk, the run ends at once
    (``Abort``) instead of failing every later point the same way.
    """
    done = finished(store)
    in_flight = set_aside_in_flight(store, [p.id for p in points])
    if in_flight:
        store.manifest.setdefault("remeasured", []).extend(in_flight)
    # over every point of the folder, this sweep's and earlier ones' (a first look's added blocks, or the
    # planned points when a resumed run's added points exist): ok never exceeds total
    counts = {"total": len({p.id for p in points} | set(done)), "ok": 0, "failed": 0}
    for status in done.values():
        counts[status] = counts.get(status, 0) + 1
    store.manifest["points"] = counts
    store.save()
    todo = [p for p in points if p.id not in done]
    started, cpu0 = time.monotonic(), os.times()
    if len(todo) < len(points):
        desc = f"{desc} (resumed, {len(points) - len(todo)} of {len(points)} done)"
    with progress_bar(len(todo), desc, unit="point", disable=not progress) as bar:
        for planned in todo:
            bar.set_postfix_str(planned.id)
            try:
                point = _measure(store, planned, measure, errors)
                if point.meta["status"] == "ok" and point.meta.get("busy_flag"):  # another load took its share
                    set_aside(store, planned.id, BESIDE_A_LOAD, "measured while other processes took more than "
                              f"{BUSY_FLAG:.0%} of the CPU; measured again")
                    store.manifest.setdefault("remeasured_beside_a_load", []).append(planned.id)
                    point = _measure(store, planned, measure, errors)  # once: a second is kept, flagged
            except Abort:
                counts["failed"] += 1
                store.save()
                raise
            status = point.meta["status"]
            counts[status] = counts.get(status, 0) + 1
            store.save()
            bar.done(planned.id, status)
            if status != "ok":
                _stop_if_broken(planned.id, str(point.meta.get("error") or status), health)
    wall = time.monotonic() - started
    store.manifest.setdefault("sweep_s", []).append(round(wall, 1))
    store.manifest.setdefault("pglab_cpu", []).append(own_cpu(cpu0, wall))
    store.save()
    return counts


def _measure(store: RunStore, planned: Planned, measure: Measure,
             errors: tuple[type[BaseException], ...]) -> Point:
    """One attempt at ``planned``, its folder finished whatever happened (``Abort`` re-raised once recorded)."""
    point = store.point(planned.id, **planned.factors())
    t0 = time.monotonic()
    try:
        reason = measure(planned, point)
    except Abort as exc:
        point.meta["measure_s"] = round(time.monotonic() - t0, 3)
        point.finish("failed", str(exc)[:2000])
        raise
    except errors as exc:
        reason = f"{type(exc).__name__}: {exc}"[:2000]
    point.meta["measure_s"] = round(time.monotonic() - t0, 3)
    if point.meta.get("status") == "running":  # measure may have finished it itself
        point.finish("ok" if reason is None else "failed", reason)
    else:  # ...then what was recorded after that (CPU, waits) still goes to disk
        point.save()
    return point


def _stop_if_broken(point_id: str, reason: str, health: Callable[[], str | None] | None) -> None:
    fatal = next((f for f in FATAL_REASONS if f in reason), None)
    problem = f"a disk is full ({fatal!r} in the point's error)" if fatal else (health() if health else None)
    if problem:
        raise Abort(f"point {point_id} failed and the run cannot go on: {problem}\n"
                    f"  the point's error: {first_line(reason, 300) or '?'}")


def own_cpu(before: os.times_result, wall_s: float) -> dict[str, float]:
    """pglab's own CPU time during the sweep (this process and its threads: the samplers, SSH), not
    the workload's: as a share of the machine's CPU time (cores x wall). The goal is at most 0.5%."""
    now = os.times()
    used = (now.user - before.user) + (now.system - before.system)
    cores = os.cpu_count() or 1
    return {"process_cpu_s": round(used, 2), "wall_s": round(wall_s, 1), "cores": cores,
            "share": round(used / (cores * wall_s), 5) if wall_s > 0 else 0.0}
