"""A run folder's manifest, read as untrusted input: checked in this one place before anything uses it.

A run folder can come from anywhere (a colleague's copy, a tarball, a hand edit, a disk that filled), and
what its manifest says becomes folder names (``pglab spread`` writes ``<out>/<run id>/``) and paths
(``plan.points``). So every reader goes through ``read`` (or ``bookkeeping``, what ``pglab cleanup`` needs):
a manifest that is not JSON, not an object, lacks a key or has one of the wrong type, names its run or
study with anything but a plain id, or sits in a folder named as another run, is refused with a
``ManifestError``: one line naming the file and the problem, exit 2 (``pglab.app.exits``).

Only the keys the code reads are modelled; any other key is allowed (each format added keys), so every
manifest pglab ever wrote is accepted. No host imports: the analysis reads manifests without them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, NonNegativeInt, ValidationError

from pglab.errors import UserError

MANIFEST = "manifest.json"
MAX_BYTES = 64 << 20  # the largest shipped manifest is 0.3 MB: anything near this is not a manifest
#: a plain id: one path component that names nothing but itself (no '/', no '..', no NUL, no newline)
PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: the folder name ``RunStore`` gives a run (UTC timestamp, random suffix): such a folder holds that run
RUN_FOLDER = re.compile(r"\d{8}T\d{6}Z-[0-9a-z]+")


def shown(text: object, limit: int = 200) -> str:
    """``text`` on one line: control characters escaped, cut at ``limit``."""
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


class ManifestError(UserError):
    """A run folder whose manifest cannot be trusted: one line, ``<file>: <problem>``."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        self.problem = shown(problem, 400)
        super().__init__(f"{shown(path, 400)}: {self.problem}")


def plain_id(value: str) -> str:
    """``value`` if it is a plain id (letters, digits, '.', '_', '-'; no '..'), else ValueError."""
    if not PLAIN_ID.fullmatch(value) or ".." in value:
        raise ValueError(f"{value!r} is not a plain id (letters, digits, '.', '_' and '-', no '..')")
    return value


PlainId = Annotated[str, AfterValidator(plain_id)]


class _Open(BaseModel):
    """Extra keys allowed: each manifest format added some, and unknown ones are reported, not refused."""

    model_config = ConfigDict(extra="allow")


class Bookkeeping(_Open):
    """What ``pglab cleanup`` reads of a run: its status, its process and what it started."""

    status: str
    study: PlainId | None = None
    run_id: PlainId | None = None
    pid: int | None = None
    control: dict[str, Any] | None = None
    inventory: str | None = None
    nodes: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    workspaces: dict[str, str] = {}
    local_passfiles: dict[str, str] = {}
    boot_ids: dict[str, str | None] = {}
    leftovers: list[dict[str, Any]] = []


class Node(_Open):
    """A server the run started (``Node.describe``): what placement and cleanup read of it."""

    name: str
    host: str
    role: str
    port: int


class Topology(_Open):
    client: dict[str, Any] | None = None
    clients: dict[str, dict[str, Any]] | None = None


class Adaptive(_Open):
    """A first look's record (``workloads.adaptive``): counts of blocks, and why the adding stopped."""

    added: list[PlainId] = []  # the points of added blocks
    first_look: NonNegativeInt | None = None
    blocks_added: NonNegativeInt | None = None
    blocks_finished: NonNegativeInt | None = None
    cut_short: NonNegativeInt | None = None
    max_blocks: NonNegativeInt | None = None
    stopped: str | None = None
    why: str | None = None


class Plan(_Open):
    points: list[PlainId] = []  # point folders: paths under the run folder
    adaptive: Adaptive | None = None


class RunRecord(Bookkeeping):
    """What the analyses, ``compare``, ``spread`` and resuming read of a run."""

    study: PlainId
    run_id: PlainId
    profile: str | None = None
    git_revision: str | None = None
    parameters: dict[str, Any] = {}
    plan: Plan = Plan()
    nodes: list[Node] = []  # type: ignore[assignment]  (narrower than cleanup's)
    topology: Topology = Topology()
    hosts: dict[str, dict[str, Any]] = {}
    tools: dict[str, Any] = {}
    packages: dict[str, Any] = {}
    points: dict[str, Any] = {}
    systems: dict[str, dict[str, Any]] = {}
    resumes: list[dict[str, Any]] = []
    failed_points: list[str] = []


def _first_problem(exc: ValidationError) -> str:
    """The first validation error as ``key.sub: what`` (and how many more)."""
    errors = exc.errors(include_url=False)
    e = errors[0]
    where = ".".join(str(p) for p in e["loc"]) or "the manifest"
    if e["type"] == "missing":
        what = "missing"
    elif e["type"] == "value_error":
        what = str(e.get("ctx", {}).get("error") or e["msg"])
    else:
        what = f"{e['msg'].lower()}, not {shown(json.dumps(e.get('input'), default=str), 60)}"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{where}: {what}{more}"


def parse(path: str | Path) -> Any:
    """The JSON in ``path``; ManifestError (naming the file) when it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ManifestError(path, f"{path.stat().st_size} bytes: too large for a run manifest")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(path, "no such file: not a pglab run folder") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ManifestError(path, f"cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # a NUL in the path
        raise ManifestError(path, f"not a usable path ({exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ManifestError(path, f"not valid JSON, truncated or hand-edited ({exc})") from None


def check(data: Any, path: str | Path, model: type[Bookkeeping] = RunRecord) -> dict[str, Any]:
    """``data`` (a parsed manifest) if it has ``model``'s shape and belongs in its folder; else ManifestError."""
    path = Path(path)
    if not isinstance(data, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(data), "null")
        raise ManifestError(path, f"not a run manifest: a JSON {kind}, not an object")
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(path, f"not a run manifest: {_first_problem(exc)}") from None
    folder, run_id = path.parent.name, data.get("run_id")
    if run_id is not None and RUN_FOLDER.fullmatch(folder) and run_id != folder:
        raise ManifestError(path, f"run_id {run_id!r} is not the name of its folder {folder!r}: a hand-edited "
                                  "manifest, or a run copied into another run's folder")
    return data


def read(run_dir: str | Path, study: str | None = None) -> dict[str, Any]:
    """The checked manifest of the run in ``run_dir``; with ``study``, refused unless it is a run of that study."""
    path = Path(run_dir) / MANIFEST
    data = check(parse(path), path)
    if study is not None and data["study"] != study:
        raise ManifestError(path, f"a run of {data['study']}, not of {study}")
    return data


def bookkeeping(path: str | Path) -> dict[str, Any]:
    """The manifest at ``path`` checked for what ``pglab cleanup`` reads (a killed run's may lack the rest)."""
    return check(parse(path), path, Bookkeeping)


def inside(root: str | Path, path: str | Path, what: str = "output") -> Path:
    """``path`` if it resolves (symlinks followed) inside ``root``; else UserError: a folder name taken from a
    run can never make pglab write elsewhere."""
    base, target = Path(root).resolve(), Path(path).resolve()
    if target != base and not target.is_relative_to(base):
        raise UserError(f"{shown(path)}: the {what} would be written outside {shown(root)} (to {shown(target)}); "
                        "nothing was written")
    return Path(path)
