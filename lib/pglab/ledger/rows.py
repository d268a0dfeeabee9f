"""A run record and its analysis as ledger rows: what a run is, the machine it ran on, its points and claims.

The comparability key is the machine class ``pglab compare`` accepts as one: per host its cores, CPU model,
memory (the nominal size: MemTotal rounded up to a whole GiB, since the kernel reserves a few hundred MB below
it and MemTotal moves by a few KiB between boots), kernel release (without a VM's build suffix), OS and disk
(device and size, not free space); the hosts' names are no part of it (``local`` in one run is ``db1`` in
another), and several hosts' facts are taken in a fixed order of their own. Two runs with the same key and
PostgreSQL build are comparable; the machine id and hostname are no part of it (two VMs of one type are one
class).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.runs import host_class
from pglab.runs.formats import written
from pglab.runs.marks import marks as machine_marks
from pglab.runs.record import read

#: points.csv columns that get a column of their own; every other non-empty one goes to ``extra``
POINT_COLUMNS = {"point": "point", "kind": "kind", "block": "block", "group": "grp", "config": "config",
                 "copy": "copy", "clients": "clients", "tps": "tps", "latency_avg_ms": "latency_avg_ms",
                 "window_s": "window_s", "stalls": "stalls", "failed": "failed"}
CLAIM_COLUMNS = ("claim", "published", "reproduced", "ci_low", "ci_high", "coverage", "blocks", "verdict", "rule",
                 "aa_median", "aa_low", "aa_high", "aa_blocks", "noise_floor", "stopped", "note", "bound_low",
                 "bound_high", "here_verdict", "emulated")


def _clean(value: Any) -> Any:
    """A cell as SQL takes it: NaN and pandas' missing values as NULL, numpy scalars as Python ones."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def machine(manifest: dict[str, Any]) -> dict[str, Any]:
    """The machines row of a run: its comparability key, a label a person reads, and the class facts."""
    hosts = manifest.get("hosts") or {}
    classes = []
    for h in hosts.values():
        h = h or {}
        mem = h.get("mem_total_kb")
        classes.append({"cores": h.get("cores"), "cpu_model": h.get("cpu_model"),
                        "mem_gib": math.ceil(mem / 1048576) if isinstance(mem, (int, float)) and mem > 0 else None,
                        "kernel": host_class.kernel_release(h.get("kernel")), "os": h.get("os"),
                        "disk": host_class.disk(h.get("disk_tmp"))})
    facts = sorted(classes, key=_canonical)
    key = hashlib.sha256(_canonical(facts).encode()).hexdigest()[:12]
    first = facts[0] if facts else {}
    n = len(facts)
    label = (f"{n} hosts: " if n > 1 else "") + ", ".join(str(x) for x in (
        f"{first.get('cores')} cores" if first.get("cores") else None, first.get("cpu_model"),
        f"{first.get('mem_gib')} GiB" if first.get("mem_gib") else None, first.get("kernel")) if x)
    return {"machine_key": key, "label": label or "unknown machine", "hosts": n, "cores": first.get("cores"),
            "cpu_model": first.get("cpu_model"), "mem_gib": first.get("mem_gib"), "kernel": first.get("kernel"),
            "os": first.get("os"), "disk": first.get("disk"), "facts": _canonical(facts)}


def postgres_build(manifest: dict[str, Any]) -> tuple[str | None, str | None]:
    """(version, build family) of the run's server: ``15.18``, ``Debian`` from ``postgres (PostgreSQL) 15.18
    (Debian 15.18-0+deb12u1)``; the family is ``other`` when the version string names none. A run on a build of
    params/postgres_builds.yaml (``--postgres``) recorded both (``postgres_build``): ``18.4``, ``embedded``."""
    recorded = manifest.get("postgres_build") or {}
    if recorded.get("version") and recorded.get("family"):
        return str(recorded["version"]), str(recorded["family"])
    text = str((manifest.get("tools") or {}).get("postgres") or "")
    m = re.search(r"\(PostgreSQL\) (\d+(?:\.\d+)?)\S*(?: \((\w+))?", text)
    if not m:
        return None, None
    return m.group(1), m.group(2) or "other"


def _sum(values: Any) -> float | None:
    if isinstance(values, (int, float)):
        return float(values)
    nums = [v for v in values or [] if isinstance(v, (int, float))]
    return float(sum(nums)) if nums else None


def run(manifest: dict[str, Any], dvc_hash: str | None = None) -> dict[str, Any]:
    """The runs row of a checked manifest."""
    params = manifest.get("parameters") or {}
    plan = manifest.get("plan") or {}
    adaptive = plan.get("adaptive") or {}
    points = manifest.get("points") or {}
    cpu = manifest.get("pglab_cpu") or []
    version, family = postgres_build(manifest)
    host = next(iter((manifest.get("hosts") or {}).values()), {}) or {}
    return {"run_id": manifest["run_id"], "study": manifest["study"], "profile": manifest.get("profile"),
            "status": manifest.get("status"), "started": manifest.get("start"), "ended": manifest.get("end"),
            "wall_s": _sum(manifest.get("wall_s")), "measured_s": _clean(manifest.get("measured_s")),
            "measuring_share": _clean(manifest.get("measurement_share")),
            "own_cpu_s": _sum([c.get("process_cpu_s") for c in cpu if isinstance(c, dict)]),
            "seed": params.get("seed", plan.get("seed")),
            "blocks": adaptive.get("blocks_finished") or plan.get("blocks") or params.get("blocks"),
            "points_total": points.get("total"), "points_failed": points.get("failed"),
            "git_revision": manifest.get("git_revision"), "dvc_hash": dvc_hash,
            "machine_key": machine(manifest)["machine_key"], "hostname": host.get("hostname"),
            "pg_version": version, "pg_family": family,
            "record_format": written(manifest), "parameters": _canonical(params),  # as written, before a migration
            "emulation": str((manifest.get("emulation") or {}).get("said") or ""),  # '' on the machine as it is
            "marked": "; ".join(machine_marks(manifest))}  # '' when it sat still (or predates the probes)


def points(run_id: str, derived: Path) -> list[dict[str, Any]]:
    """The points rows of an analysis (``points.csv``): the common columns, the study's own in ``extra``."""
    path = derived / "points.csv"
    if not path.exists():
        return []
    out = []
    for rec in pd.read_csv(path).to_dict("records"):
        row = {"run_id": run_id, **{POINT_COLUMNS[k]: _clean(rec.get(k)) for k in POINT_COLUMNS}}
        if isinstance(row["failed"], bool):
            row["failed"] = int(row["failed"])
        extra = {k: _clean(v) for k, v in rec.items() if k not in POINT_COLUMNS and _clean(v) is not None}
        row["extra"] = _canonical(extra)
        out.append(row)
    return out


def claims(run_id: str, derived: Path) -> list[dict[str, Any]]:
    """The claims rows of an analysis (``comparison.csv``), one per published claim."""
    path = derived / "comparison.csv"
    if not path.exists():
        return []
    t = pd.read_csv(path)
    return [{"run_id": run_id, **{c: _clean(rec.get(c)) for c in CLAIM_COLUMNS}} for rec in t.to_dict("records")]


#: a campaign's claims over runs (``comparison.csv`` of a campaign's analysis: ``runs`` is their number there)
CAMPAIGN_CLAIM_COLUMNS = {"claim": "claim", "published": "published", "reproduced": "reproduced",
                          "ci_low": "ci_low", "ci_high": "ci_high", "verdict": "verdict", "rule": "rule",
                          "bound_low": "bound_low", "bound_high": "bound_high", "runs": "n_runs", "scope": "scope",
                          "note": "note", "here_verdict": "here_verdict", "emulated": "emulated"}


def campaign(derived: Path, manifests: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A campaign's row and its claims over runs, from its runs' records (oldest first: the last is the campaign's
    folder) and its analysis; None when the analysis is not over runs (a campaign analysed one run at a time)."""
    path = derived / "comparison.csv"
    if not path.exists() or not manifests:
        return None
    t = pd.read_csv(path)
    if "runs" not in t or "scope" not in t:
        return None
    top = manifests[-1]
    campaign_id = str(top["run_id"])
    claims = [{"campaign_id": campaign_id, **{col: _clean(rec.get(c)) for c, col in CAMPAIGN_CLAIM_COLUMNS.items()}}
              for rec in t.to_dict("records")]
    for c in claims:  # a count of runs is a whole number (pandas reads a column with a gap as floats)
        c["n_runs"] = None if c["n_runs"] is None else int(c["n_runs"])
    left = sorted({str(x) for x in t.get("left_out", pd.Series(dtype=str)).dropna() if str(x)})
    scopes = sorted({str(x) for x in t["scope"].dropna() if str(x)})
    row = {"campaign_id": campaign_id, "study": top.get("study"), "profile": top.get("profile"),
           "started": manifests[0].get("start"), "ended": top.get("end"),
           "run_ids": json.dumps([str(m["run_id"]) for m in manifests]), "left_out": "; ".join(left) or None,
           "scope": "; ".join(scopes) or None, "digest": hashlib.sha256(_canonical(claims).encode()).hexdigest()[:16]}
    return row, claims


def digest(point_rows: list[dict[str, Any]], claim_rows: list[dict[str, Any]]) -> str:
    """What an analysis said, as one hash: adding the same analysis again is recognised and changes nothing."""
    return hashlib.sha256(_canonical([point_rows, claim_rows]).encode()).hexdigest()[:16]


def from_folder(run_dir: str | Path) -> dict[str, Any]:
    """The checked manifest of a run folder (``pglab.runs.record.read``: refused in one line if not a run, or if a
    field a row takes is of the wrong type or no finite number). Only the manifest: the ledger reads no point's meta
    (an analysis does, and checks them: ``pglab.runs.reading.checked_run``)."""
    return read(run_dir)
