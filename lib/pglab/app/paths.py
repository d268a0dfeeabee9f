"""Where things live, found from any working directory (papermill, nbval and JupyterLab differ)."""

from __future__ import annotations

import os
from pathlib import Path

from pglab.errors import UserError
from pglab.runs.record import shown

#: Your runs' copies, analyses, figures and reports (``pglab repro``, ``pglab collect``, ``pglab analyze``, ``pglab
#: report``), laid out as the checkout is (``data/raw``, ``data/derived``, ``data/metrics``, ``figures``, ``reports``):
#: beside the shipped runs in ``data/``, ``figures/`` and ``reports/``, never over them. Ignored by git and DVC, so
#: measuring here changes no tracked file; the runs themselves are archived in ``data/runs/`` as always.
YOURS = Path("yours")
YOURS_DATA = YOURS / "data"


def repo_root(start: str | Path | None = None) -> Path:
    """The nearest folder upwards that holds dvc.yaml and params/ (the project checkout)."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "params").is_dir() and (d / "pyproject.toml").exists():
            return d
    raise FileNotFoundError(f"no pglab checkout (params/ + pyproject.toml) above {here}")


def output_dir(path: str | Path, what: str = "--out") -> Path:
    """``path`` as a folder that exists and can be written, made (with its parents) now: an output that is a
    file, or cannot be made, is refused (UserError) before any analysis starts, not after it."""
    p = Path(path)
    try:
        if p.exists() and not p.is_dir():
            raise UserError(f"{what} {shown(p)}: exists and is not a folder")
        p.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # a parent that is a file, no permission, a NUL in the name
        why = getattr(exc, "strerror", None) or exc
        raise UserError(f"{what} {shown(p)}: cannot be made a folder ({why})") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(f"{what} {shown(p)}: not writable")
    return p
