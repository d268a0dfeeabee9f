"""A campaign: several independent runs of one study and profile, published together as the pipeline's run.

Why: a verdict rests on runs, not on the blocks of one run (``pglab.analysis.over_runs``). Layout of the
pipeline's folder (``data/raw/<study>/``) when a profile sets ``runs`` above 1::

    data/raw/<study>/                        the campaign's last run, exactly as a single run is published
    data/raw/<study>/campaign.json           the runs in order (ids, seeds), the profile, how many were asked
    data/raw/<study>/campaign/<run-id>/      each earlier run of the campaign, whole

So everything that reads one run reads the last one unchanged, and a reader that knows campaigns reads
them all (``members``). Every run is also in the archive (``data/runs/<study>/<run-id>/``) as ever.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from pglab.runs.record import MANIFEST, inside

CAMPAIGN = "campaign.json"
MEMBERS = "campaign"
OWN = "runs"  # an analysis of a campaign keeps each run's own tables in <derived>/runs/<run-id>/ (pglab.app.campaign)
FORMAT_VERSION = 1


def draw_seed() -> int:
    """A run's seed of its own: drawn from the OS, recorded in its manifest and in ``campaign.json``, so that runs of
    a campaign (and of later campaigns) each randomise the order within blocks anew."""
    return secrets.randbelow(2**31 - 1) + 1


def read(folder: str | Path) -> dict[str, Any] | None:
    """The folder's ``campaign.json`` (None: a single run)."""
    path = Path(folder) / CAMPAIGN
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise ValueError(f"{path}: not a campaign record (no list of runs)")
    return data


def members(folder: str | Path) -> list[Path]:
    """The run folders of a published campaign, oldest first (the last is ``folder`` itself); ``[folder]`` for a
    single run. A member listed but absent is refused: a campaign read in part would decide on fewer runs silently."""
    folder = Path(folder)
    data = read(folder)
    if data is None:
        return [folder]
    ids = [str(r["run_id"]) for r in data["runs"]]
    out = [inside(folder / MEMBERS, folder / MEMBERS / i, "campaign member") for i in ids[:-1]] + [folder]
    missing = [str(p) for p in out[:-1] if not (p / MANIFEST).is_file()]
    if missing:
        raise ValueError(f"{folder / CAMPAIGN} lists runs that are not there: {', '.join(missing)}")
    return out


def record_of(runs: list[dict[str, Any]], study: str, profile: str, asked: int) -> dict[str, Any]:
    """``campaign.json``: each run's id, seed and status in order, and how many runs the profile asked for."""
    return {"format_version": FORMAT_VERSION, "study": study, "profile": profile, "asked": asked,
            "runs": [{"run_id": r["run_id"], "seed": r.get("seed"), "status": r.get("status")} for r in runs]}


def write(folder: Path, data: dict[str, Any]) -> None:
    (folder / CAMPAIGN).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def own_analyses(run_dir: Path, derived: Path) -> list[tuple[Path, Path]]:
    """(run folder, its own analysis folder) of every run published in ``run_dir``: for a campaign each member and
    ``derived/runs/<run-id>``; for a single run, itself and ``derived``."""
    if read(run_dir) is None:
        return [(run_dir, derived)]
    return [(m, derived / OWN / m.name) for m in members(run_dir)[:-1]] + [(run_dir, derived / OWN / _run_id(run_dir))]


def _run_id(run: Path) -> str:
    return str(json.loads((run / MANIFEST).read_text())["run_id"])
