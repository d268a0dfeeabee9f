"""The raw run store: every invocation's exact command and output, written before any parsing.

Layout::

    data/runs/<study>/<run-id>/manifest.json          every run ever collected (the archive)
    data/runs/<study>/<run-id>/<point-id>/{meta.json,command.txt,stdout.txt,stderr.txt,exit_code,...}
    data/raw/<study>/                                  a copy of the run the DVC pipeline analyzes

A run id is a UTC timestamp plus a random suffix and a run folder is created with ``exist_ok=False``:
a new run can never overwrite or delete an earlier one, and no DVC or git command touches the archive.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from pglab.errors import first_line
from pglab.hosts.base import Result
from pglab.runs import record, runs_index
from pglab.runs.record import MANIFEST

_SAVE_LOCK = threading.Lock()
PACKAGES = ("pglab", "psycopg", "pandas", "seaborn", "matplotlib", "fabric", "papermill", "dvc", "pydantic",
            "scipy", "numpy")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


_JSON_OPTIONS = (orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
                 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME)


def _json_default(o: Any) -> Any:
    """numpy scalars as numbers; anything else (paths, timestamps, Decimals) as its str, as ``json``'s
    ``default=str`` did."""
    if hasattr(o, "item") and callable(o.item) and type(o).__module__ == "numpy":
        return o.item()
    return str(o)


def write_json(path: Path, data: Any) -> None:
    """Write whole, then rename: a reader never sees half a file.

    orjson, not ``json``: an indented ``json.dumps`` runs the pure-Python encoder, and the manifest
    and every point's meta and settings snapshot are written during the sweep (measured: 1.2 s of
    pglab's 3.2 s of main-thread CPU over a 40-point run; orjson takes about a twentieth of that).
    Non-finite floats are written as null (valid JSON, where ``json`` wrote NaN).
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(data, default=_json_default, option=_JSON_OPTIONS))
    os.replace(tmp, path)


#: what `dvc repro` itself rewrites between stages (the lock, the metrics kept in git): a change there is
#: no change of code or parameters, and counted it marked every run but the pipeline's first ``+dirty``
PIPELINE_RECORDS = (":(top,exclude)dvc.lock", ":(top,exclude)data/metrics")


def git_revision(cwd: str | Path = ".") -> str | None:
    """HEAD, with ``+dirty`` when tracked files other than the pipeline's records differ from it. The first
    ``git status`` of a fresh clone re-reads every file and runs the nbstripout filter on each notebook,
    seconds on a busy machine: given a minute, and the revision is still recorded (``+unverified``) if even
    that is not enough."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not rev:
        return None
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/", *PIPELINE_RECORDS],
                               cwd=cwd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return rev + "+unverified"
    return rev + ("+dirty" if dirty else "")


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
    _open: dict[str, float] = field(default_factory=dict, repr=False)
    _windows: list[tuple[float, float]] = field(default_factory=list, repr=False)

    @property
    def id(self) -> str:
        return self.dir.name

    def workload_started(self, key: str = "main") -> None:
        """A measured workload (pgbench, sysbench, the TSBS loader) starts: its window counts toward the
        run's measurement share (``measured_s`` over the collect's wall time)."""
        self._open[key] = time.monotonic()

    def workload_ended(self, key: str = "main") -> None:
        """...and ends. Windows that overlap (writes and reads at once) count once: ``measured_s`` is the
        length of their union, so a point is never measured for longer than it ran."""
        t0 = self._open.pop(key, None)
        if t0 is None:
            return
        self._windows.append((t0, time.monotonic()))
        total, end = 0.0, float("-inf")
        for a, b in sorted(self._windows):
            total += max(0.0, b - max(a, end))
            end = max(end, b)
        self.meta["measured_s"] = round(total, 3)

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
        runs_index.register(self.dir / MANIFEST)  # findable by `pglab cleanup` whatever the data root

    def save(self) -> None:
        with _SAVE_LOCK:  # a thread of the run may save too (samplers)
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

    @classmethod
    def reopen(cls, run_dir: Path) -> RunStore:
        """An earlier run, to be resumed in its own folder: the manifest records the resume."""
        self = cls.__new__(cls)
        self.dir = Path(run_dir)
        self.root = self.dir.parent
        self.manifest = load_manifest(self.dir)
        resumes = self.manifest.setdefault("resumes", [])
        resumes.append({"at": now(), "pid": os.getpid(), "previous_status": self.manifest.get("status"),
                        "previous_pid": self.manifest.get("pid"), "git_revision": git_revision()})
        self.manifest.update(status="running", pid=os.getpid(), leftovers=[])
        for key in ("end", "outcome", "signals_during_cleanup"):
            self.manifest.pop(key, None)
        self.save()
        runs_index.register(self.dir / MANIFEST)
        return self

    @property
    def attempt(self) -> int:
        """1 for a run's first process, 2 after its first resume..."""
        return 1 + len(self.manifest.get("resumes", []))

    def point(self, point_id: str, unique: bool = False, **factors: Any) -> Point:
        """A new point folder; ``unique`` (set-up steps, repeated on resume) adds ``.2``, ``.3``... rather
        than fail when the id exists. Measured points never reuse a folder."""
        d = self.dir / point_id
        if unique:
            n = 1
            while d.exists():
                n += 1
                d = self.dir / f"{point_id}.{n}"
        d.mkdir(exist_ok=False)
        meta = {"point": d.name, "start": now(), "status": "running", **factors}
        write_json(d / "meta.json", meta)
        return Point(d, meta)

    def finish(self, status: str, **extra: Any) -> None:
        self.manifest.update(status=status, end=now(), **extra)
        self.save()

    def points_not_ok(self) -> dict[str, str]:
        return points_not_ok(self.dir)

    def points_not_ok_summary(self) -> str:
        return points_not_ok_summary(self.dir)


def planned_points(manifest: dict[str, Any]) -> list[str]:
    """The plan's points, then those a first look added (``plan.adaptive.added``), each once."""
    plan = manifest.get("plan", {})
    added = (plan.get("adaptive") or {}).get("added", [])
    return list(dict.fromkeys([*plan.get("points", []), *added]))


def points_not_ok(run_dir: Path) -> dict[str, str]:
    """Planned point id -> why it is not ``ok`` (its status and error, or "not measured"), in plan order.

    What makes a run ``complete``: every planned point measured (pglab.runs.session), a first look's added
    blocks' points included."""
    planned = planned_points(load_manifest(run_dir))
    out: dict[str, str] = {}
    for pid in planned:
        try:
            meta = json.loads((Path(run_dir) / pid / "meta.json").read_text())
        except (OSError, ValueError):
            out[pid] = "not measured"
            continue
        if meta.get("status") != "ok":
            error = first_line(meta.get("error"))
            out[pid] = f"{meta.get('status')}" + (f": {error}" if error else "")
    return out


def not_publishable(run_dir: Path, status: str | None) -> str | None:
    """Why a run of this status is not the pipeline's run (None for a complete one)."""
    if status == "partial":
        return f"run {run_dir} is partial: {points_not_ok_summary(run_dir)}"
    if status != "complete":
        return f"run {run_dir} ended {status}: run `pglab cleanup`"
    return None


def points_not_ok_summary(run_dir: Path, show: int = 3) -> str:
    """One line: how many planned points are not ok, and the first few with why."""
    bad = points_not_ok(run_dir)
    total = len(planned_points(load_manifest(run_dir)))
    first = "; ".join(f"{pid} {why}" for pid, why in list(bad.items())[:show])
    more = f" (and {len(bad) - show} more: {Path(run_dir) / '*' / 'meta.json'})" if len(bad) > show else ""
    return f"{len(bad)} of {total} planned points not measured ({first}{more})"


def runs(study_root: Path) -> Iterator[Path]:
    """Run folders of a study, oldest first (run ids sort by time)."""
    if not study_root.exists():
        return iter(())
    return iter(sorted(p for p in study_root.iterdir() if (p / MANIFEST).exists()))


def latest_run(study_root: Path, statuses: tuple[str, ...] = ("complete",)) -> Path | None:
    """The newest run whose manifest status is one of ``statuses``."""
    found = None
    for run in runs(study_root):
        if load_manifest(run).get("status") in statuses:
            found = run
    return found


def read_optional(folder: Path, name: str) -> str:
    """A raw file's text, or "" when the command wrote none (e.g. no stderr)."""
    p = Path(folder) / name
    return p.read_text() if p.exists() else ""


def load_manifest(run_dir: str | Path, study: str | None = None) -> dict[str, Any]:
    """The run's manifest, checked (``pglab.runs.record``): a ManifestError, one line naming the file and the
    problem, for one that is cut short, of the wrong shape or hand-edited; with ``study``, of that study."""
    return record.read(run_dir, study)


# -- the archive and the pipeline's run ------------------------------------------------------------
# Every run `pglab collect` writes goes to the archive, data/runs/<study>/<run-id>/, which no DVC
# command and no git command ever touches. The pipeline's run, data/raw/<study>/, is a copy of one
# archived run: DVC tracks it (collect's output), restores it on checkout and ships it in a remote.
# So `dvc checkout`, `dvc exp apply` or `git checkout` can replace data/raw/<study>, but a run, once
# written, stays in the archive.


def archive_dir(data_root: str | Path, study: str) -> Path:
    return Path(data_root) / "runs" / study


def pipeline_dir(data_root: str | Path, study: str) -> Path:
    return Path(data_root) / "raw" / study


def publish(run_dir: Path, dest: Path) -> Path:
    """Make ``dest`` a copy of ``run_dir`` (whole, via a rename); what was there is archived first."""
    run_dir, dest = Path(run_dir), Path(dest)
    archive = run_dir.parent
    _archive_previous(dest, archive)
    tmp = dest.with_name(f".{dest.name}.publishing-{uuid.uuid4().hex[:6]}")
    shutil.copytree(run_dir, tmp, symlinks=True)
    old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:6]}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    if old.exists():
        shutil.rmtree(old)
    return dest


def _archive_previous(dest: Path, archive: Path) -> None:
    """A pipeline folder holds copies, but never lose one whose original is not archived (older layouts)."""
    if not dest.exists():
        return
    candidates = [dest] if (dest / MANIFEST).exists() else [p for p in dest.iterdir() if (p / MANIFEST).exists()]
    for run in candidates:
        target = record.inside(archive, archive / load_manifest(run)["run_id"], "archived copy")
        if not target.exists():
            archive.mkdir(parents=True, exist_ok=True)
            shutil.copytree(run, target, symlinks=True)


def analysis_run(data_root: str | Path, study: str) -> Path | None:
    """The run analysis reads: the pipeline's run if there is one, else the newest complete archived run."""
    pipeline = pipeline_dir(data_root, study)
    if (pipeline / MANIFEST).exists():
        return pipeline
    return latest_run(archive_dir(data_root, study))
