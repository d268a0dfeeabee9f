"""The run record's formats, and how an older one is read as today's: ``pglab.runs.record`` migrates on read.

Why versions: a run is evidence for as long as it is kept, and the code that reads it moves on. Every reader
takes the record through ``record.read`` (the manifest) and ``record.read_meta`` (a point's ``meta.json``),
which bring an older format up to today's in memory; the files stay exactly as they were written. So what
changed between formats is said once, here, instead of as a default at each reader.

A manifest says its format in ``format_version``, and so does each point's meta (a run resumed by newer code
holds points of both formats). Absent means 1: every run collected before the key existed.

Format 2 (what ``RunStore`` writes today):

* ``format_version: 2`` in the manifest and in every point's meta.
* The baseline in one place: ``plan.baseline``, the configuration every block ran twice (a logical_replication
  run without ``streaming`` ran its first system twice, so the plan, not ``parameters.baseline``, is the truth).
* A pgbench point measured over a time window records the warm-up its analysis cuts (``warmup_s``).

Migrations from 1 to 2 (each fills what format 1 lacks from what the same record holds; ``migrated`` in the
migrated record says from which format, and lists each fill as a note):

* manifest: ``plan.baseline`` from ``parameters.baseline`` when the plan lacks it (every study but
  cloud_providers planned with its parameter; the shipped runs all have both).
* meta of a measured logical_replication point (one with a ``block``) without ``warmup_s``: its collect never
  recorded it, so the analysis cut the 1 s default whatever the profile said. It gets the run's
  ``parameters.warmup_s`` (what the collect waited out before sampling), else the 1 s default.
* meta without ``point``: its folder's name (a point's id is its folder's name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FORMAT_VERSION = 2  # what RunStore writes today
WARMUP_S = 1.0  # seconds: every study's default warm-up, and what a point or run that records none is read with
MIGRATED = "migrated"  # the key a migrated record gains: {"from": <format>, "notes": [...]}


def version(data: Mapping[str, Any]) -> Any:
    """The format a parsed record says it has (1 when it says none)."""
    return data.get("format_version", 1)


def written(data: Mapping[str, Any]) -> Any:
    """The format a record was written in: what it says, or (migrated on read) the format it came from."""
    migrated = data.get(MIGRATED)
    return migrated.get("from") if isinstance(migrated, Mapping) else version(data)


def _noted(out: dict[str, Any], old: Any, notes: list[str]) -> dict[str, Any]:
    out["format_version"] = FORMAT_VERSION
    out[MIGRATED] = {"from": old, "notes": notes}
    return out


def manifest(data: Mapping[str, Any]) -> dict[str, Any]:
    """A checked manifest in today's format (a copy when anything changes; today's as it is)."""
    old = version(data)
    if old == FORMAT_VERSION:
        return dict(data)
    out, notes = dict(data), []
    plan, given = out.get("plan"), out.get("parameters")
    base = given.get("baseline") if isinstance(given, Mapping) else None
    if (plan is None or isinstance(plan, Mapping)) and (plan or {}).get("baseline") is None and base is not None:
        out["plan"] = {**(plan or {}), "baseline": base}
        notes.append(f"plan.baseline: not in the plan of format {old}; parameters.baseline ({base})")
    return _noted(out, old, notes)


def meta(data: Mapping[str, Any], folder: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """A checked point meta in today's format; ``folder`` is its folder's name, ``run`` its run's (migrated)
    manifest."""
    old = version(data)
    if old == FORMAT_VERSION:
        return dict(data)
    out, notes = dict(data), []
    if out.get("point") is None:
        out["point"] = folder
        notes.append("point: not recorded; its folder's name")
    if run.get("study") == "logical_replication" and out.get("block") is not None and out.get("warmup_s") is None:
        given = run.get("parameters") or {}
        recorded = given.get("warmup_s") if isinstance(given, Mapping) else None
        usable = isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and recorded >= 0
        out["warmup_s"] = float(recorded) if usable else WARMUP_S
        source = "the run's parameters.warmup_s" if usable else "the default"
        notes.append(f"warmup_s: not recorded by logical_replication's collect in format {old}; {source} "
                     f"({out['warmup_s']:g} s)")
    return _noted(out, old, notes)
