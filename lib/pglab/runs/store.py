"""The raw run store: every invocation's exact command and output, written before any parsing.

Layout::

    data/runs/<study>/<run-id>/manifest.json          every run ever collected (the archive)
    data/runs/<study>/<run-id>/<point-id>/{meta.json,command.txt,stdout.txt,stderr.txt,exit_code,...}
    data/raw/<study>/                                  a copy of the run the DVC pipeline analyzes

A run id is a UTC timestamp plus a random suffix and a run folder is created with ``exist_ok=False``:
a new run can never overwrite or delete an earlier one, and no DVC or git command touches the archive.

The manifest and every point's meta are written through the record's models (``runs.writing.write_record``):
a value a reader would refuse stops the run at the write, naming the key. Reading a run is ``runs.reading``
(no host imports), what writing needs without hosts is ``runs.writing``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglab.hosts.base import Result
from pglab.runs import campaign, record, runs_index
from pglab.runs.reading import load_manifest, points_not_ok, points_not_ok_summary
from pglab.runs.record import FORMAT_VERSION, MANIFEST, META, Bookkeeping, PointMeta, RunRecord
from pglab.runs.writing import git_revision, now, package_versions, write_json, write_record

_SAVE_LOCK = threading.Lock()


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

    def save(self) -> None:
        """The meta as it is now, checked against the record's model (``record.PointMeta``)."""
        write_meta(self.dir, self.meta)

    def finish(self, status: str, error: str | None = None) -> None:
        self.meta.update(status=status, end=now())
        if error:
            self.meta["error"] = error
        self.save()


def write_meta(point_dir: Path, meta: dict[str, Any]) -> None:
    """A point's meta.json, in today's format, checked first: a RecordError naming the key instead of a meta the
    sweep, resuming or the analysis would refuse."""
    write_record(Path(point_dir) / META, meta, PointMeta)


class RunStore:
    """One run of one study: its manifest and its points."""

    def __init__(self, root: Path, study: str, profile: str, parameters: dict[str, Any]):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.root = Path(root)
        self.dir = self.root / f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir(parents=True, exist_ok=False)
        self.manifest: dict[str, Any] = {
            "format_version": FORMAT_VERSION, "study": study, "profile": profile, "parameters": parameters,
            "run_id": self.dir.name,
            "git_revision": git_revision(), "packages": package_versions(), "start": now(),
            "status": "running", "pid": os.getpid(), "nodes": [], "processes": [], "hosts": {},
            "tools": {}, "points": {"total": 0, "ok": 0, "failed": 0},
        }
        self.save()
        runs_index.register(self.dir / MANIFEST)  # findable by `pglab cleanup` whatever the data root

    def save(self) -> None:
        """The manifest as it is now, checked against the record's model (``record.RunRecord``) first: a value a
        reader would refuse (a point id that is no plain id, a count that is no number) stops the run here,
        naming the key, instead of leaving a record that no analysis can read."""
        with _SAVE_LOCK:  # a thread of the run may save too (samplers)
            write_record(self.dir / MANIFEST, self.manifest, RunRecord)

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
        meta = {"format_version": FORMAT_VERSION, "point": d.name, "start": now(), "status": "running", **factors}
        write_meta(d, meta)
        return Point(d, meta)

    def finish(self, status: str, **extra: Any) -> None:
        self.manifest.update(status=status, end=now(), **extra)
        self.save()

    def points_not_ok(self) -> dict[str, str]:
        return points_not_ok(self.dir)

    def points_not_ok_summary(self) -> str:
        return points_not_ok_summary(self.dir)


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """A killed run's manifest as ``pglab cleanup`` leaves it, in the format it was written (``Bookkeeping``)."""
    write_record(path, manifest, Bookkeeping, today=False)


# -- the pipeline's run: a copy of one archived run (``runs.reading`` says which run an analysis reads) --------


def publish(run_dir: Path, dest: Path, earlier: Sequence[Path] = (), campaign_record: dict[str, Any] | None = None
            ) -> Path:
    """Make ``dest`` a copy of ``run_dir`` (whole, via a rename); what was there is archived first. A campaign
    (``runs.campaign``): its ``earlier`` runs copied under ``campaign/`` and its record beside, in the same rename."""
    run_dir, dest = Path(run_dir), Path(dest)
    archive = run_dir.parent
    _archive_previous(dest, archive)
    tmp = dest.with_name(f".{dest.name}.publishing-{uuid.uuid4().hex[:6]}")
    shutil.copytree(run_dir, tmp, symlinks=True)
    for run in earlier:
        shutil.copytree(run, record.inside(tmp / campaign.MEMBERS, tmp / campaign.MEMBERS / Path(run).name,
                                           "campaign member"), symlinks=True)
    if campaign_record is not None:
        campaign.write(tmp, campaign_record)
    old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:6]}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    if old.exists():
        shutil.rmtree(old)
    return dest


def archive_published(dest: Path, archive: Path) -> None:
    """Every run published in ``dest`` has its original in ``archive`` (copied there if missing)."""
    _archive_previous(dest, archive)


def _archive_previous(dest: Path, archive: Path) -> None:
    """A pipeline folder holds copies, but never lose one whose original is not archived (older layouts)."""
    if not dest.exists():
        return
    candidates = [dest] if (dest / MANIFEST).exists() else [p for p in dest.iterdir() if (p / MANIFEST).exists()]
    if (dest / campaign.CAMPAIGN).exists():
        candidates += [p for p in campaign.members(dest) if p != dest]
    for run in candidates:
        target = record.inside(archive, archive / load_manifest(run)["run_id"], "archived copy")
        if not target.exists():
            archive.mkdir(parents=True, exist_ok=True)
            shutil.copytree(run, target, symlinks=True)
