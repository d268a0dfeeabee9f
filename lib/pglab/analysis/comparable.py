"""Comparable or refused: one analysis never mixes runs that ran on different hardware, placements or tools.

``differences`` reads two run manifests and names every field that differs, with a severity:

``refuse`` -- the field changes what is measured, so two runs that differ in it are not comparable:

* ``study``;
* host facts that change performance, per inventory host: ``cpu_model``, ``cores``, ``mem_total_kb``,
  ``kernel``, ``os`` and ``disk_tmp`` (the device and size of the disk the data directories live on),
  each compared by its class, so noise is a note (``same_class``): memory within 1%, the kernel by its
  release (``6.18.44``, not the build suffix ``-fc-v669``), the disk without its free space;
* ``placement.<node or client>``: where every node and client ran *relative to the others* -- which of
  them shared a host, which shared a machine (``placement.machine``: machine id and boot id, or the
  hostname for runs recorded before machine ids), and how a client reached its server (unix socket, TCP
  on loopback, TCP across a network). Host names and machine ids themselves are not compared here: two
  runs on two identical machines, each with everything on one machine, are placed the same;
* ``tools.<tool>``: every version the run recorded (postgres, pgbench, pg_basebackup, sysbench, the
  replication packages: pglogical, slony, londiste, pgq...);
* ``parameters.<name>`` (nested values as ``parameters.server_settings.max_wal_size``): every study
  parameter except the cosmetic ones in ``COSMETIC_PARAMETERS``;
* ``failed_points``: the planned points each run did not measure (``pglab.runs.reading.points_not_ok``):
  two runs that lack different points do not average the same blocks.

``note`` -- reported, never refused: the run's profile name, git revision, start time, inventory file,
status and point counts, boot ids, hostnames, machine ids, network namespaces, addresses, the user,
the python package versions (``packages.*``), a system skipped in one run (``systems.<name>.status``),
how often the run was resumed, and any manifest field this module does not know.

Not compared at all: the run's own bookkeeping (``run_id``, ``pid``, ``processes``, ``control``,
``workspaces``, ``local_passfiles``, ``leftovers``, ``evidence``, ``end``, timings), ``nodes`` and
``topology`` (compared as placement), and ``plan`` (derived from the parameters and the seed).

A field present in one manifest and absent from the other is a difference (shown as ``(missing)``),
with the severity of the field. Runs of two different studies are refused on ``study``, tools and hosts
alone: their parameters and nodes have nothing in common, so they are not listed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import placement
from pglab.errors import NotComparableError, UserError
from pglab.runs import host_class
from pglab.runs.reading import load_manifest
from pglab.runs.record import MANIFEST, PLAIN_ID, shown

REFUSE = "refuse"
NOTE = "note"
MISSING = "(missing)"
OVERRIDE = "--allow-mixed"

# Parameters that do not change what is measured:
# - seed: only the order of the points (blocks are randomised to average it out);
# - client_timeout_s, catchup_timeout_s, copy_timeout_s: deadlines that only decide when a point fails;
# - standby_name: the standby's application_name, a label;
# - host, primary_host, standby_host, client_host, provider_host, subscriber_host: inventory names;
#   where things ran is compared as placement, on machine identity, not on names.
COSMETIC_PARAMETERS = frozenset({
    "seed", "client_timeout_s", "catchup_timeout_s", "copy_timeout_s", "standby_name",
    "host", "primary_host", "standby_host", "client_host", "provider_host", "subscriber_host"})
# Host facts that change performance; the other facts are notes.
HOST_REFUSE = ("cpu_model", "cores", "mem_total_kb", "kernel", "os", "disk_tmp")
# Memory that differs by at most this share is the same machine's (MemTotal moves by KiB between boots)
MEM_TOLERANCE = 0.01
# The order of the host facts table (facts not listed follow, sorted).
HOST_ORDER = ("hostname", "kind", *HOST_REFUSE, "data_address", "netns", "machine_id", "boot_id", "user")
# Host facts that repeat another: the dict key, and machine_id/boot_id.
HOST_DERIVED = frozenset({"name", "machine"})
# Top-level manifest fields reported as notes (flattened when they are dicts).
NOTE_FIELDS = ("profile", "git_revision", "start", "inventory", "status", "outcome", "points")
# Top-level fields never compared: one run's bookkeeping, or compared elsewhere.
IGNORED = frozenset({
    "study", "parameters", "tools", "packages", "hosts", "boot_ids", "nodes", "topology", "systems", "resumes",
    "run_id", "pid", "processes", "control", "workspaces", "local_passfiles", "leftovers", "evidence", "end",
    "time_s", "measurement_share", "measured_s", "collect_s", "wall_s", "sweep_s", "remeasured", "cleanup",
    "signals_during_cleanup",
    "plan", "failed_points", *NOTE_FIELDS})
# What `pglab analyze` reads by default (relative to the working directory, the checkout).
DEFAULT_REFERENCE = "data/reference"
# comparison.csv columns shown for each run, when the analysis wrote them.
EFFECT_COLUMNS = ("reproduced", "ci_low", "ci_high", "noise_floor", "verdict")


@dataclass(frozen=True)
class Difference:
    """One field that differs between run a and run b."""

    field: str  # e.g. "hosts.local.cpu_model", "tools.pgbench", "placement.primary", "packages.psycopg"
    value_a: Any
    value_b: Any
    severity: str  # REFUSE or NOTE

    def __str__(self) -> str:
        return f"{self.field}: {_show(self.value_a)} vs {_show(self.value_b)}"


def _show(value: Any) -> str:
    return value if value == MISSING else json.dumps(value, default=str)


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """``{"a.b": 1}`` for ``{"a": {"b": 1}}`` under ``prefix``; lists and scalars are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def _section(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    """A top-level dict of the manifest, flattened (``{}`` when absent or empty)."""
    value = manifest.get(key)
    return _flat(value, key) if isinstance(value, dict) and value else {}


def _compare(a: dict[str, Any], b: dict[str, Any], severity: Any) -> list[Difference]:
    """Differences between two flat dicts; ``severity(field)`` says how much each matters."""
    out = []
    for k in list(dict.fromkeys([*a, *b])):
        va, vb = a.get(k, MISSING), b.get(k, MISSING)
        if va != vb:
            out.append(Difference(k, va, vb, severity(k) if callable(severity) else severity))
    return out


def host_facts(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Host -> its facts (boot id from ``boot_ids`` for runs that kept it only there)."""
    out = {}
    for name, facts in (manifest.get("hosts") or {}).items():
        f = {k: v for k, v in facts.items() if k not in HOST_DERIVED}
        boot = (manifest.get("boot_ids") or {}).get(name)
        if boot and "boot_id" not in f:
            f["boot_id"] = boot
        out[name] = f
    return out


def same_class(fact: str, a: Any, b: Any) -> bool:
    """Two values of a host fact that differ only by noise: memory within ``MEM_TOLERANCE`` (the kernel's
    MemTotal moves by a few KiB between boots of one machine), a kernel of the same release, a disk of the
    same device and size (its free space changes between any two runs)."""
    if fact == "mem_total_kb" and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 < b:
        return abs(a - b) <= MEM_TOLERANCE * max(a, b)
    if fact == "kernel":
        return host_class.kernel_release(a) == host_class.kernel_release(b)
    if fact == "disk_tmp":
        return host_class.disk(a) == host_class.disk(b)
    return False


def _host_differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    ha, hb = host_facts(a), host_facts(b)
    out = []
    for host in dict.fromkeys([*ha, *hb]):
        if host not in ha or host not in hb:
            out.append(Difference(f"hosts.{host}", "present" if host in ha else MISSING,
                                  "present" if host in hb else MISSING, REFUSE))
            continue
        fa, fb = ha[host], hb[host]
        for fact in dict.fromkeys([*fa, *fb]):
            va, vb = fa.get(fact, MISSING), fb.get(fact, MISSING)
            if va == vb:
                continue
            severity = REFUSE if fact in HOST_REFUSE and not same_class(fact, va, vb) else NOTE
            out.append(Difference(f"hosts.{host}.{fact}", va, vb, severity))
    return out


def _via(address: Any) -> str:
    if address is None:
        return "via ?"
    text = str(address)
    if text == "socket" or text.startswith("/"):
        return "via unix socket"
    if text.startswith("127.") or text in ("::1", "localhost"):
        return "via TCP loopback"
    return "via TCP network"


def where(manifest: dict[str, Any]) -> dict[str, str]:
    """Node or client -> where it ran relative to the others: ``host 1 on machine 1[, via ...]``.

    Hosts and machines are numbered in order of first use (nodes and clients sorted by name), so two
    runs with the same arrangement on different hosts or machines get the same labels.
    """
    hosts: dict[str, str] = {}
    machines: dict[str, str] = {}
    out = {}
    for row in sorted(placement.nodes_table(manifest), key=lambda r: str(r["what"])):
        h = hosts.setdefault(str(row["host"]), f"host {len(hosts) + 1}")
        m = machines.setdefault(str(row["machine"]), f"machine {len(machines) + 1}")
        out[str(row["what"])] = f"{h} on {m}" + (f", {_via(row['address'])}" if row["role"] == "client" else "")
    return out


def _parameter_severity(field: str) -> str:
    name = field.split(".")[1]
    return NOTE if name in COSMETIC_PARAMETERS else REFUSE


def differences(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> list[Difference]:
    """Every field in which two run manifests differ, refuse-level ones first (see the module docstring)."""
    a, b = manifest_a, manifest_b
    out = _compare({"study": a.get("study", MISSING)}, {"study": b.get("study", MISSING)}, REFUSE)
    same_study = not out  # two studies' parameters and nodes have nothing in common: the study says it all
    if same_study:  # a parameter an older run did not have is the same as one left at None (its default: off)
        pa, pb = _section(a, "parameters"), _section(b, "parameters")
        out += _compare({k: v for k, v in pa.items() if v is not None or k in pb},
                        {k: v for k, v in pb.items() if v is not None or k in pa}, _parameter_severity)
    out += _compare({"postgres_build": _build(a)}, {"postgres_build": _build(b)}, REFUSE)  # never pooled
    out += _compare(_section(a, "tools"), _section(b, "tools"), REFUSE)
    out += _host_differences(a, b)
    if same_study:
        out += _compare({f"placement.{k}": v for k, v in where(a).items()},
                        {f"placement.{k}": v for k, v in where(b).items()}, REFUSE)
        out += _compare({"failed_points": failed_points(a)}, {"failed_points": failed_points(b)}, REFUSE)
    # notes
    for key in NOTE_FIELDS:
        if key in a or key in b:
            out += _compare(_flat(a.get(key, MISSING), key), _flat(b.get(key, MISSING), key), NOTE)
    out += _compare(_section(a, "packages"), _section(b, "packages"), NOTE)
    out += _compare({f"systems.{k}.status": v.get("status") for k, v in (a.get("systems") or {}).items()},
                    {f"systems.{k}.status": v.get("status") for k, v in (b.get("systems") or {}).items()}, NOTE)
    if a.get("resumes") or b.get("resumes"):
        out += _compare({"resumes": len(a.get("resumes") or [])}, {"resumes": len(b.get("resumes") or [])}, NOTE)
    for key in dict.fromkeys([*a, *b]):
        if key not in IGNORED:
            out += _compare(_flat(a.get(key, MISSING), key), _flat(b.get(key, MISSING), key), NOTE)
    return sorted(out, key=lambda d: d.severity != REFUSE)  # stable: refuse first, each in manifest order


def _build(manifest: dict[str, Any]) -> str:
    """The servers' build (pglab.hosts.builds), or the hosts' own bindir for a run that named none."""
    return str((manifest.get("postgres_build") or {}).get("id") or "the hosts' own (params/hosts.yaml bindir)")


def failed_points(manifest: dict[str, Any]) -> Any:
    """The planned points a run did not measure, sorted: runs that lack different points average
    different things. A run recorded before the list existed has none when its counts say so."""
    if "failed_points" in manifest:
        return sorted(manifest["failed_points"])
    return [] if not (manifest.get("points") or {}).get("failed") else MISSING


def refused(diffs: Iterable[Difference]) -> list[Difference]:
    return [d for d in diffs if d.severity == REFUSE]


def check_comparable(manifest_a: dict[str, Any], manifest_b: dict[str, Any],
                     allow_mixed: bool = False) -> list[Difference]:
    """The differences of two runs; raises NotComparableError naming every refuse-level one unless ``allow_mixed``.

    With ``allow_mixed=True`` the caller gets every difference back and must say what it mixed
    (``mixing_message``).
    """
    diffs = differences(manifest_a, manifest_b)
    bad = refused(diffs)
    if bad and not allow_mixed:
        raise NotComparableError(bad, f"{OVERRIDE} (pglab compare) or allow_mixed=True (Python)")
    return diffs


def mixing_message(diffs: Iterable[Difference]) -> str:
    """``mixing runs that differ in: ...`` for the refuse-level differences, or "" when there are none."""
    bad = refused(diffs)
    return f"mixing runs that differ in: {', '.join(d.field for d in bad)}" if bad else ""


def report(diffs: list[Difference]) -> str:
    """Text for a terminal: one line per difference, refuse-level first."""
    bad = refused(diffs)
    if not diffs:
        return "no differences: the runs are comparable"
    head = (f"{len(diffs)} differences, {len(bad)} refuse-level" if bad
            else f"{len(diffs)} differences, none refuse-level: the runs are comparable")
    return "\n".join([head, *(f"  {'REFUSE' if d.severity == REFUSE else 'note  '} {d}" for d in diffs)])


def differences_table(diffs: list[Difference]) -> pd.DataFrame:
    return pd.DataFrame([{"field": d.field, "a": _cell(d.value_a), "b": _cell(d.value_b), "severity": d.severity}
                         for d in diffs], columns=["field", "a", "b", "severity"])


# -- finding runs ------------------------------------------------------------------------------------


def find_run(data_root: str | Path, run: str | Path) -> Path:
    """A run folder from its path, or from a run id under ``<data_root>/runs/<study>/`` (or the pipeline's copy)."""
    p, root = Path(run), Path(data_root)
    if "\0" not in str(run) and (p / MANIFEST).exists():
        return p
    if not PLAIN_ID.fullmatch(str(run)) or ".." in str(run):  # a path, not an id: looked up nowhere else
        raise UserError(f"{shown(run)}: not a run folder (no {MANIFEST}), nor a run id")
    for study_dir in sorted((root / "runs").glob("*")):
        if (study_dir / str(run) / MANIFEST).exists():
            return study_dir / str(run)
    for pipeline in sorted((root / "raw").glob(f"*/{MANIFEST}")):
        if load_manifest(pipeline.parent).get("run_id") == str(run):
            return pipeline.parent
    raise UserError(f"{shown(run)}: not a run folder (no {MANIFEST}), nor a run id under {root / 'runs'}/<study>/")


def _cell(value: Any) -> Any:
    return json.dumps(value, default=str) if isinstance(value, (list, dict)) else value
