"""The per-user index of runs: where every run's manifest is, whatever data root it was written under.

``pglab cleanup`` must find a killed run even when it was collected with another ``--data-root``
(a notebook's temporary folder, another checkout). So every ``RunStore`` registers its manifest here
when the run starts: one small file per run in ``$PGLAB_STATE_DIR/runs/`` (default
``${XDG_STATE_HOME:-~/.local/state}/pglab/runs/``) holding the manifest's absolute path, never any
content of the run. Entries of runs that ended and left nothing behind are pruned by ``pglab cleanup``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pglab.errors import UserError
from pglab.hosts.base import state_dir


def index_dir() -> Path:
    return state_dir() / "runs"


def _entry_name(manifest: Path) -> str:
    digest = hashlib.sha256(str(manifest).encode()).hexdigest()[:12]
    return f"{manifest.parent.name}-{digest}"


def register(manifest: str | Path) -> Path:
    """Record ``manifest``'s absolute path (idempotent); returns the index entry.

    Raises UserError when the index cannot be written: a run nobody could find after a SIGKILL must
    not start.
    """
    path = Path(manifest).resolve()
    d = index_dir()
    entry = d / _entry_name(path)
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = entry.with_name(entry.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{path}\n")
        os.replace(tmp, entry)
    except OSError as exc:
        raise UserError(f"cannot register the run in {d} ({exc}); set PGLAB_STATE_DIR to a writable folder") from None
    return entry


def entries() -> list[tuple[Path, Path]]:
    """``(index entry, manifest path)`` of every registered run, oldest run first."""
    d = index_dir()
    if not d.is_dir():
        return []
    found = []
    for entry in sorted(d.iterdir()):
        if entry.name.endswith(".tmp") or not entry.is_file():
            continue
        try:
            text = entry.read_text().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            found.append((entry, Path(text)))
    return sorted(found, key=lambda e: e[1].parent.name)


def unregister(entry: Path) -> None:
    try:
        entry.unlink()
    except FileNotFoundError:
        pass
