"""What reading a run needs: its manifest and its points' metas through the record, which points are not
measured, a raw file's text, and which run an analysis reads. No host imports.

Why apart from ``runs.store`` (which writes runs): the analyze stages, the notebooks' analysis, the reports and
the ledger read runs and must not depend on the host layer (a DVC stage depends on exactly what it imports, so
an edit to the SSH code would re-run every analysis).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pglab.errors import first_line
from pglab.runs import campaign, record
from pglab.runs.record import MANIFEST, META, ManifestError


def load_manifest(run_dir: str | Path, study: str | None = None) -> dict[str, Any]:
    """The run's manifest, checked and in today's format (``pglab.runs.record``): a ManifestError, one line naming
    the file and the problem, for one that is cut short, of the wrong shape or hand-edited; with ``study``, of
    that study."""
    return record.read(run_dir, study)


def read_meta(point_dir: str | Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A point's meta.json, checked and in today's format; ``manifest`` is its run's (``load_manifest``)."""
    return record.read_meta(point_dir, manifest)


def point_metas(run_dir: str | Path, manifest: Mapping[str, Any] | None = None, pattern: str = "*",
                planned: bool = True) -> list[tuple[Path, dict[str, Any]]]:
    """(folder, meta) of the points in ``run_dir`` whose folder matches ``pattern``, sorted by folder; ``planned``:
    only the points of the design (they carry a ``block``), not set-up steps. Set-aside attempts
    (``interrupted/``) are one level down and never among them."""
    run_dir = Path(run_dir)
    manifest = manifest if manifest is not None else load_manifest(run_dir)
    out = []
    for path in sorted(run_dir.glob(f"{pattern}/{META}")):
        meta = read_meta(path.parent, manifest)
        if not planned or meta.get("block") is not None:
            out.append((path.parent, meta))
    return out


def planned_points(manifest: Mapping[str, Any]) -> list[str]:
    """The plan's points, then those a first look added (``plan.adaptive.added``), each once."""
    plan = manifest.get("plan") or {}
    added = (plan.get("adaptive") or {}).get("added", [])
    return list(dict.fromkeys([*plan.get("points", []), *added]))


def points_not_ok(run_dir: str | Path, manifest: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Planned point id -> why it is not ``ok`` (its status and error, or "not measured"), in plan order.

    What makes a run ``complete``: every planned point measured (pglab.runs.session), a first look's added
    blocks' points included."""
    manifest = manifest if manifest is not None else load_manifest(run_dir)
    out: dict[str, str] = {}
    for pid in planned_points(manifest):
        if not (Path(run_dir) / pid / META).exists():
            out[pid] = "not measured"
            continue
        try:
            meta = read_meta(Path(run_dir) / pid, manifest)
        except ManifestError as exc:
            out[pid] = f"unreadable meta.json ({exc.problem})"
            continue
        if meta.get("status") != "ok":
            error = first_line(meta.get("error"))
            out[pid] = f"{meta.get('status')}" + (f": {error}" if error else "")
    return out


def points_not_ok_summary(run_dir: str | Path, show: int = 3) -> str:
    """One line: how many planned points are not ok, and the first few with why."""
    manifest = load_manifest(run_dir)
    bad = points_not_ok(run_dir, manifest)
    total = len(planned_points(manifest))
    first = "; ".join(f"{pid} {why}" for pid, why in list(bad.items())[:show])
    more = f" (and {len(bad) - show} more: {Path(run_dir) / '*' / META})" if len(bad) > show else ""
    return f"{len(bad)} of {total} planned points not measured ({first}{more})"


def not_publishable(run_dir: str | Path, status: str | None) -> str | None:
    """Why a run of this status is not the pipeline's run (None for a complete one)."""
    if status == "partial":
        return f"run {run_dir} is partial: {points_not_ok_summary(run_dir)}"
    if status != "complete":
        return f"run {run_dir} ended {status}: run `pglab cleanup`"
    return None


def checked_run(run_dir: str | Path, study: str | None = None) -> dict[str, Any]:
    """The run's manifest (``load_manifest``), once every other record of the folder a reader takes was checked too:
    each point's meta.json (set-aside attempts aside), and, in a run that says it is complete, one for every planned
    point. A ManifestError, one line naming the file and the key, before anything is analysed or added: a hand edit
    there would otherwise crash an analysis half way, or make it decide on fewer points without a word."""
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir, study)
    point_metas(run_dir, manifest, planned=False)
    if manifest["status"] == "complete":
        planned = planned_points(manifest)
        missing = [(n, pid) for n, pid in enumerate(planned) if not (run_dir / pid / META).is_file()]
        if missing:
            n, pid = missing[0]
            key = f"plan.points.{n}" if n < len(manifest["plan"].get("points", [])) else "plan.adaptive.added"
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ManifestError(run_dir / MANIFEST, f"status complete, but {key} {pid!r} has no {run_dir / pid / META}"
                                                    f"{more}: a point folder removed or not copied")
    return manifest


def checked_published(run_dir: str | Path, study: str | None = None) -> list[Path]:
    """The runs published in ``run_dir`` (a campaign's, oldest first, or the one run), each checked whole
    (``checked_run``) and the campaign's record too (``campaign.members``): what an analysis reads, refused in one
    line before it writes anything."""
    if (Path(run_dir) / MANIFEST).is_file():  # the folder's own run first: a run of another study is named as such
        load_manifest(run_dir, study)
    runs = campaign.members(run_dir)
    for run in runs:
        checked_run(run, study)
    return runs


def read_optional(folder: str | Path, name: str) -> str:
    """A raw file's text, or "" when the command wrote none (e.g. no stderr)."""
    p = Path(folder) / name
    return p.read_text() if p.exists() else ""


# -- which run: the archive and the pipeline's run ---------------------------------------------------------
# Every run `pglab collect` writes goes to the archive, data/runs/<study>/<run-id>/, which no DVC
# command and no git command ever touches. The pipeline's run, data/raw/<study>/, is a copy of one
# archived run (``runs.store.publish``): DVC tracks it (collect's output), restores it on checkout and
# ships it in a remote.


def archive_dir(data_root: str | Path, study: str) -> Path:
    return Path(data_root) / "runs" / study


def pipeline_dir(data_root: str | Path, study: str) -> Path:
    return Path(data_root) / "raw" / study


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


def analysis_run(data_root: str | Path, study: str) -> Path | None:
    """The run analysis reads: the pipeline's run if there is one, else the newest complete archived run."""
    pipeline = pipeline_dir(data_root, study)
    if (pipeline / MANIFEST).exists():
        return pipeline
    return latest_run(archive_dir(data_root, study))
