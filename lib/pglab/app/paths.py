"""Where things live, found from any working directory (papermill, nbval and JupyterLab differ)."""

from __future__ import annotations

from pathlib import Path


def repo_root(start: str | Path | None = None) -> Path:
    """The nearest folder upwards that holds dvc.yaml and params/ (the project checkout)."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "params").is_dir() and (d / "pyproject.toml").exists():
            return d
    raise FileNotFoundError(f"no pglab checkout (params/ + pyproject.toml) above {here}")
