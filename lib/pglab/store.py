"""The raw run store: every invocation's exact command and output, written before any parsing.

Layout (DESIGN.md "Data contract")::

    data/raw/<study>/<run-id>/manifest.json
    data/raw/<study>/<run-id>/<point-id>/{meta.json,command.txt,stdout.txt,stderr.txt,exit_code,...}

A run id is a UTC timestamp plus a random suffix and a run folder is created with ``exist_ok=False``:
a new run can never overwrite or delete an earlier one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from pglab.hosts import Result

MANIFEST = "manifest.json"
PACKAGES = ("pglab", "psycopg", "pandas", "seaborn", "matplotlib", "fabric", "papermill", "dvc", "pydantic",
            "scipy", "numpy")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def write_json(path: Path, data: Any) -> None:
    """Write whole, then rename: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def git_revision(cwd: str | Path = ".") -> str | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (rev + ("+dirty" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@dataclass
class Point:
    """One measured point's folder. ``record`` writes a command's raw output."""

    dir: Path
    meta: dict[str, Any]

    @property
    def id(self) -> str:
        return self.dir.name

    def record(self, result: Result, prefix: str = "") -> None:
        (self.dir / f"{prefix}command.txt").write_text(result.command + "\n")
        (self.dir / f"{prefix}stdout.txt").write_text(result.stdout)
        (self.dir / f"{prefix}stderr.txt").write_text(result.stderr)
        (self.dir / f"{prefix}exit_code").write_text(f"{result.exit_code}\n")
        self.meta.setdefault("commands", {})[prefix or "main"] = {
            "host": result.host, "exit_code": result.exit_code, "duration_s": round(result.duration_s, 4)}

    def write_json(self, name: str, data: Any) -> None:
        write_json(self.dir / name, data)

    def finish(self, status: str, error: str | None = None) -> None:
        self.meta.update(status=status, end=now())
        if error:
            self.meta["error"] = error
        write_json(self.dir / "meta.json", self.meta)


class RunStore:
    """One run of one study: its manifest and its points."""

    def __init__(self, root: Path, study: str, profile: str, parameters: dict[str, Any]):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.root = Path(root)
        self.dir = self.root / f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir(parents=True, exist_ok=False)
        self.manifest: dict[str, Any] = {
            "study": study, "profile": profile, "parameters": parameters, "run_id": self.dir.name,
            "git_revision": git_revision(), "packages": package_versions(), "start": now(),
            "status": "running", "pid": os.getpid(), "nodes": [], "processes": [], "hosts": {},
            "tools": {}, "points": {"total": 0, "ok": 0, "failed": 0},
        }
        self.save()

    def save(self) -> None:
        write_json(self.dir / MANIFEST, self.manifest)

    def add_node(self, description: dict[str, Any]) -> None:
        self.manifest["nodes"].append(description)
        self.save()

    def update_node(self, description: dict[str, Any]) -> None:
        """Replace the entry with the same data dir (a node's role can change, e.g. primary -> standby)."""
        nodes = self.manifest["nodes"]
        nodes[:] = [n for n in nodes if n["data_dir"] != description["data_dir"]] + [description]
        self.save()

    def add_process(self, description: dict[str, Any]) -> None:
        self.manifest["processes"].append(description)
        self.save()

    def point(self, point_id: str, **factors: Any) -> Point:
        d = self.dir / point_id
        d.mkdir(exist_ok=False)
        meta = {"point": point_id, "start": now(), "status": "running", **factors}
        write_json(d / "meta.json", meta)
        return Point(d, meta)

    def finish(self, status: str, **extra: Any) -> None:
        self.manifest.update(status=status, end=now(), **extra)
        self.save()


def runs(study_root: Path) -> Iterator[Path]:
    """Run folders of a study, oldest first (run ids sort by time)."""
    if not study_root.exists():
        return iter(())
    return iter(sorted(p for p in study_root.iterdir() if (p / MANIFEST).exists()))


def latest_run(study_root: Path, statuses: tuple[str, ...] = ("complete",)) -> Path | None:
    """The newest run whose manifest status is one of ``statuses``."""
    found = None
    for run in runs(study_root):
        if json.loads((run / MANIFEST).read_text()).get("status") in statuses:
            found = run
    return found


def read_optional(folder: Path, name: str) -> str:
    """A raw file's text, or "" when the command wrote none (e.g. no stderr)."""
    p = Path(folder) / name
    return p.read_text() if p.exists() else ""


def load_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / MANIFEST).read_text())
