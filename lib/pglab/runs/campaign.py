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
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from pglab.runs import record
from pglab.runs.record import MANIFEST, ManifestError, inside
from pglab.runs.shapes import Count, Integer, PlainId, PositiveCount, RunStatus, _Open

CAMPAIGN = "campaign.json"
MEMBERS = "campaign"
OWN = "runs"  # an analysis of a campaign keeps each run's own tables in <derived>/runs/<run-id>/ (pglab.app.campaign)
FORMAT_VERSION = 1


def _known_format(value: int) -> int:
    if value > FORMAT_VERSION:
        raise ValueError(f"format {value} is newer than this pglab reads (up to {FORMAT_VERSION}): update pglab")
    return value


class Member(_Open):
    """One run of a campaign, as ``campaign.json`` lists it."""

    WHAT: ClassVar[str] = "campaign record"
    run_id: PlainId  # a folder name under campaign/: a plain id, never a path
    seed: Integer | None = None
    status: RunStatus | None = None


class Campaign(_Open):
    """``campaign.json`` (``record_of``): what ``members`` and the analysis over runs read. Its numbers are plain
    (no NaN or Infinity), its runs objects, each named by a plain id and listed once."""

    WHAT: ClassVar[str] = "campaign record"
    format_version: Annotated[PositiveCount, AfterValidator(_known_format)] = 1
    study: PlainId | None = None
    profile: str | None = None
    asked: Count | None = None  # how many runs the profile asked for
    runs: list[Member] = Field(min_length=1)


def draw_seed() -> int:
    """A run's seed of its own: drawn from the OS, recorded in its manifest and in ``campaign.json``, so that runs of
    a campaign (and of later campaigns) each randomise the order within blocks anew."""
    return secrets.randbelow(2**31 - 1) + 1


def read(folder: str | Path) -> dict[str, Any] | None:
    """The folder's checked ``campaign.json`` (None: a single run); a ManifestError, one line naming the file and
    the key, for one cut short, of the wrong shape, or listing a run twice."""
    path = Path(folder) / CAMPAIGN
    if not path.is_file():
        return None
    data = record.check(record.parse(path, Campaign.WHAT), path, Campaign)
    ids = [r["run_id"] for r in data["runs"]]
    twice = next((i for i, r in enumerate(ids) if r in ids[:i]), None)
    if twice is not None:
        raise ManifestError(path, f"runs.{twice}.run_id: {ids[twice]!r} is listed twice (a campaign's runs are "
                                  "independent runs, each counted once)")
    return data


def members(folder: str | Path) -> list[Path]:
    """The run folders of a published campaign, oldest first (the last is ``folder`` itself); ``[folder]`` for a
    single run. A member listed but absent is refused, in one line naming it: a campaign read in part would decide
    on fewer runs silently."""
    folder = Path(folder)
    data = read(folder)
    if data is None:
        return [folder]
    ids = [str(r["run_id"]) for r in data["runs"]]
    out = [inside(folder / MEMBERS, folder / MEMBERS / i, "campaign member") for i in ids[:-1]] + [folder]
    missing = [(n, p) for n, p in enumerate(out[:-1]) if not (p / MANIFEST).is_file()]
    if missing:
        n, first = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ManifestError(folder / CAMPAIGN, f"lists runs that are not there: runs.{n}.run_id {ids[n]!r} has no "
                                               f"run folder {first}{more}; restore it (`dvc pull`, or from "
                                               "data/runs/) rather than decide on fewer runs")
    last = record.read(folder)["run_id"]
    if ids[-1] != last:
        raise ManifestError(folder / CAMPAIGN, f"runs.{len(ids) - 1}.run_id: {ids[-1]!r} is not the run in "
                                               f"{folder} ({last!r}): the campaign's last run is the folder's own")
    return out


def record_of(runs: list[dict[str, Any]], study: str, profile: str, asked: int) -> dict[str, Any]:
    """``campaign.json``: each run's id, seed and status in order, and how many runs the profile asked for."""
    return {"format_version": FORMAT_VERSION, "study": study, "profile": profile, "asked": asked,
            "runs": [{"run_id": r["run_id"], "seed": r.get("seed"), "status": r.get("status")} for r in runs]}


def write(folder: Path, data: dict[str, Any]) -> None:
    """``campaign.json``, checked first as ``read`` will check it: a RecordError instead of a record no reader takes."""
    record.check_written(data, folder / CAMPAIGN, Campaign, today=False)
    (folder / CAMPAIGN).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def own_analyses(run_dir: Path, derived: Path) -> list[tuple[Path, Path]]:
    """(run folder, its own analysis folder) of every run published in ``run_dir``: for a campaign each member and
    ``derived/runs/<run-id>``; for a single run, itself and ``derived``."""
    if read(run_dir) is None:
        return [(run_dir, derived)]
    return [(m, derived / OWN / m.name) for m in members(run_dir)[:-1]] + [(run_dir, derived / OWN / _run_id(run_dir))]


def _run_id(run: Path) -> str:
    return str(record.read(run)["run_id"])
