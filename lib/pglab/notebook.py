"""What a study notebook calls: parameters in, an ``Analysis`` out. Keeps notebooks thin."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pglab.errors import UserError
from pglab.inventory import load_inventory
from pglab.paths import repo_root
from pglab.store import latest_run
from pglab.studies import module


def study_values(study: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """The study parameters among a notebook's variables (the model's fields, nothing else)."""
    fields = module(study, "params").Params.model_fields
    return {k: namespace[k] for k in fields if k in namespace}


def _resolve(path: str, root: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else root / p


def run(study: str, values: dict[str, Any], *, profile: str, collect: bool, data_root: str = "",
        figures_root: str = "", inventory: str = "", progress: bool = True) -> Any:
    """Collect (optionally) then analyze; relative paths are relative to the checkout."""
    root = repo_root()
    data = _resolve(data_root, root) if data_root else Path(tempfile.mkdtemp(prefix=f"pglab-{study}-"))
    figs = _resolve(figures_root, root) if figures_root else data / "figures"
    inv = load_inventory(_resolve(inventory, root) if inventory else None)
    if collect:
        run_dir = module(study, "collect").collect(values, data_root=data, profile=profile, inventory=inv,
                                                   progress=progress)
    else:
        run_dir = latest_run(data / "raw" / study)
        if run_dir is None:
            raise UserError(f"collect=False but there is no complete run under {data / 'raw' / study}")
    return module(study, "analyze").analyze(run_dir, data / "derived" / study, figs / study,
                                            root / "data" / "reference")


def where_nodes_ran(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node: the notebook must say where every node ran."""
    hosts = manifest.get("hosts", {})
    return [{"node": n["name"], "role": n["role"], "host": n["host"], "port": n["port"],
             "cores": hosts.get(n["host"], {}).get("cores"), "machine": hosts.get(n["host"], {}).get("hostname")}
            for n in manifest.get("nodes", [])]
