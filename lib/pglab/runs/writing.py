"""What writing a run (or its analysis) needs that touches no host: JSON written whole, a record checked against
its model before it is written, and the provenance a manifest records (git revision, package versions).

Why apart from ``runs.store``: the store registers runs (``runs_index``) and records commands' results, which
ties it to the host layer; the analysis, the ledger and the notebook also write JSON and record revisions, and
must not pull hosts in with them (a DVC stage depends on exactly the modules it imports).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from pglab.runs import record

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


def _dumps(data: Any) -> bytes:
    return orjson.dumps(data, default=_json_default, option=_JSON_OPTIONS)


def _replace(path: Path, body: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(body)
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    """Write whole, then rename: a reader never sees half a file.

    orjson, not ``json``: an indented ``json.dumps`` runs the pure-Python encoder, and the manifest
    and every point's meta and settings snapshot are written during the sweep (measured: 1.2 s of
    pglab's 3.2 s of main-thread CPU over a 40-point run; orjson takes about a twentieth of that).
    Non-finite floats are written as null (valid JSON, where ``json`` wrote NaN).
    """
    _replace(Path(path), _dumps(data))


def write_record(path: Path, data: Any, model: type[record.Bookkeeping] | type[record.PointMeta],
                 today: bool = True) -> None:
    """``write_json`` of a run record (a manifest, a point's meta), checked first against ``model`` as a reader will
    see it (the JSON read back: paths and numpy numbers as written): a RecordError naming the key instead of a
    record no reader would accept later (``record.check_written``). Costs a parse of what is written (0.2 ms for
    the largest shipped manifest)."""
    body = _dumps(data)
    record.check_written(orjson.loads(body), path, model, today)
    _replace(Path(path), body)


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
