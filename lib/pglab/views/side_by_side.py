"""Two runs side by side: host facts, placement, tools, parameters and the effects each run measured.

What ``pglab compare`` and the notebooks show beside the verdict of ``pglab.analysis.comparable`` (whether
the runs may be compared at all).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import placement
from pglab.analysis.comparable import (
    COSMETIC_PARAMETERS,
    DEFAULT_REFERENCE,
    EFFECT_COLUMNS,
    HOST_ORDER,
    MISSING,
    _cell,
    _section,
    host_facts,
    where,
)
from pglab.runs.reading import load_manifest


def _pairs(a: dict[str, Any], b: dict[str, Any], name: str, keys: Iterable[str] | None = None) -> pd.DataFrame:
    rows = [{name: k, "a": _cell(a.get(k, MISSING)), "b": _cell(b.get(k, MISSING)),
             "same": a.get(k, MISSING) == b.get(k, MISSING)} for k in (keys or dict.fromkeys([*a, *b]))]
    return pd.DataFrame(rows, columns=[name, "a", "b", "same"])


def hosts_table(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> pd.DataFrame:
    """One row per host fact (``local.cpu_model``): columns fact, a, b, same."""
    ha, hb = host_facts(manifest_a), host_facts(manifest_b)
    rank = {f: i for i, f in enumerate(HOST_ORDER)}
    keys = [f"{host}.{fact}" for host in dict.fromkeys([*ha, *hb])
            for fact in sorted({*ha.get(host, {}), *hb.get(host, {})}, key=lambda f: (rank.get(f, len(rank)), f))]
    a = {f"{h}.{k}": v for h, facts in ha.items() for k, v in facts.items()}
    b = {f"{h}.{k}": v for h, facts in hb.items() for k, v in facts.items()}
    return _pairs(a, b, "fact", keys)


def placement_table(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> pd.DataFrame:
    """One row per node and client: host, address and machine in each run, and whether the arrangement is the same."""
    def described(m: dict[str, Any]) -> dict[str, str]:
        rel = where(m)
        return {str(r["what"]): f"{r['host']} {r['address']} on {r['machine']} ({rel[str(r['what'])]})"
                for r in placement.nodes_table(m)}

    da, db, ra, rb = described(manifest_a), described(manifest_b), where(manifest_a), where(manifest_b)
    rows = [{"what": k, "a": da.get(k, MISSING), "b": db.get(k, MISSING), "same": ra.get(k) == rb.get(k)}
            for k in sorted(dict.fromkeys([*da, *db]))]
    return pd.DataFrame(rows, columns=["what", "a", "b", "same"])


def tools_table(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> pd.DataFrame:
    return _pairs(manifest_a.get("tools") or {}, manifest_b.get("tools") or {}, "tool")


def parameters_table(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> pd.DataFrame:
    """One row per (flattened) parameter; ``cosmetic`` marks the ones that are never refused."""
    t = _pairs(_section(manifest_a, "parameters"), _section(manifest_b, "parameters"), "parameter")
    t["parameter"] = t["parameter"].str.removeprefix("parameters.")
    t["cosmetic"] = [p.split(".")[0] in COSMETIC_PARAMETERS for p in t["parameter"]]
    return t


def comparison(run_dir: str | Path, reference_dir: str | Path | None = None) -> tuple[pd.DataFrame | None, str]:
    """The run's comparison.csv and where it came from.

    The derived table ``<data root>/derived/<study>/comparison.csv`` when its metrics.json names this run;
    otherwise the study's analysis run now into a temporary folder (archived runs have no derived
    tables). ``(None, why)`` when the analysis cannot read the run.
    """
    run = Path(run_dir).resolve()
    manifest = load_manifest(run)
    study, run_id = manifest.get("study"), manifest.get("run_id")
    for ancestor in list(run.parents)[:3]:
        derived = ancestor / "derived" / str(study)
        try:
            metrics = json.loads((derived / "details.json").read_text())
        except (OSError, ValueError):
            continue
        if metrics.get("run_id") == run_id and (derived / "comparison.csv").exists():
            return pd.read_csv(derived / "comparison.csv"), str(derived / "comparison.csv")
    from pglab.studies import module

    ref = Path(reference_dir if reference_dir is not None else DEFAULT_REFERENCE)
    try:
        with tempfile.TemporaryDirectory(prefix="pglab-compare-") as tmp:
            module(str(study), "analyze").analyze(run, Path(tmp) / "derived", Path(tmp) / "figures", ref)
            return pd.read_csv(Path(tmp) / "derived" / "comparison.csv"), f"analyzed now (reference {ref})"
    except Exception as exc:  # an old run the current analysis cannot read: say so, show the rest
        return None, f"analysis failed: {type(exc).__name__}: {exc}"


def effects_table(run_a: str | Path, run_b: str | Path, reference_dir: str | Path | None = None) -> pd.DataFrame:
    """The two runs' comparison.csv joined on ``claim``: reproduced (and interval, noise floor, verdict) for a and b.

    ``.attrs["sources"]`` says where each run's table came from (or why there is none).
    """
    ca, source_a = comparison(run_a, reference_dir)
    cb, source_b = comparison(run_b, reference_dir)
    present = [c for c in (ca, cb) if c is not None]
    cols = [c for c in EFFECT_COLUMNS if any(c in t.columns for t in present)]
    published = any("published" in t.columns for t in present)

    def side(t: pd.DataFrame | None, suffix: str) -> pd.DataFrame:
        t = t if t is not None else pd.DataFrame(columns=["claim"])
        out = pd.DataFrame({"claim": t["claim"]})
        if published:
            out[f"published{suffix}"] = t["published"] if "published" in t.columns else float("nan")
        for c in cols:
            out[f"{c}{suffix}"] = t[c] if c in t.columns else float("nan")
        return out

    sa, sb = side(ca, "_a"), side(cb, "_b")
    table = sa.merge(sb, on="claim", how="outer")  # sorted by claim: put back the analysis' order
    rank = {c: i for i, c in enumerate(dict.fromkeys([*sa["claim"], *sb["claim"]]))}
    table = table.sort_values("claim", key=lambda c: c.map(rank)).reset_index(drop=True)
    if published:
        table.insert(1, "published", table["published_a"].combine_first(table["published_b"]))
        table = table.drop(columns=["published_a", "published_b"])
    order = ["claim", *(["published"] if published else []), *(f"{c}{s}" for c in cols for s in ("_a", "_b"))]
    table = table[order]
    table.attrs["sources"] = {"a": source_a, "b": source_b}
    return table


def side_by_side(run_a: str | Path, run_b: str | Path, reference_dir: str | Path | None = None,
                 effects: bool = True) -> dict[str, pd.DataFrame]:
    """Tables ``hosts``, ``placement``, ``tools``, ``parameters`` and (``effects=True``) ``effects`` of two runs."""
    ma, mb = load_manifest(Path(run_a)), load_manifest(Path(run_b))
    tables = {"hosts": hosts_table(ma, mb), "placement": placement_table(ma, mb), "tools": tools_table(ma, mb),
              "parameters": parameters_table(ma, mb)}
    if effects:
        tables["effects"] = effects_table(run_a, run_b, reference_dir)
    return tables
