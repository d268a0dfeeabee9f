"""A run's record (its manifest and each point's meta.json), read as untrusted input: checked in this one place
before anything uses it, and brought up to today's format (``pglab.runs.formats``).

A run folder can come from anywhere (a colleague's copy, a tarball, a hand edit, a disk that filled), and
what its manifest says becomes folder names (``pglab spread`` writes ``<out>/<run id>/``) and paths
(``plan.points``). So every reader goes through ``read`` (or ``bookkeeping``, what ``pglab cleanup`` needs):
a manifest that is not JSON, not an object, lacks a key or has one of the wrong type, names its run or
study with anything but a plain id, or sits in a folder named as another run, is refused with a
``ManifestError``: one line naming the file and the problem, exit 2 (``pglab.exits``).

Only the keys the code reads are modelled (``pglab.runs.shapes``: strict, finite numbers where a reader relies on
one), and no number anywhere in a record is NaN, Infinity or beyond 64 bits (``not_finite``); any other key is
allowed (each format added keys), so every manifest pglab ever wrote is accepted. The same models check what pglab
writes (``check_written``, called by the run store): a record a reader would refuse is never written. An analysis
reads its study's parameters as its own model validates them (``parameters``) and the baseline from its one place
(``baseline``). No host imports: the analysis reads runs without them.
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pglab.errors import PglabError, UserError
from pglab.runs import formats
from pglab.runs.formats import FORMAT_VERSION
from pglab.runs.shapes import (  # noqa: F401  (the record's models, read here as record.RunRecord and so on)
    PLAIN_ID,
    Bookkeeping,
    PlainId,
    PointMeta,
    RunRecord,
    _Open,
    plain_id,
)

MANIFEST = "manifest.json"
META = "meta.json"  # a point's record, in the point's folder
M = TypeVar("M", bound=BaseModel)
MAX_BYTES = 64 << 20  # the largest shipped manifest is 0.3 MB: anything near this is not a manifest
MAX_INT = 2**63 - 1  # no reader (SQLite's INTEGER, numpy's int64) takes a larger whole number
#: the folder name ``RunStore`` gives a run (UTC timestamp, random suffix): such a folder holds that run
RUN_FOLDER = re.compile(r"\d{8}T\d{6}Z-[0-9a-z]+")


def shown(text: object, limit: int = 200) -> str:
    """``text`` on one line: control characters escaped, cut at ``limit``."""
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


class ManifestError(UserError):
    """A run folder whose manifest (or a point's meta) cannot be trusted: one line, ``<file>: <problem>``."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        self.problem = shown(problem, 400)
        super().__init__(f"{shown(path, 400)}: {self.problem}")


class RecordError(PglabError, ValueError):
    """pglab was about to write a record a reader would refuse: nothing was written, and the key is named.

    Not a user error: the run's own code put the value there (or let through a value its parameters should have
    refused), so the run stops at the write instead of leaving a record no analysis can read."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        self.problem = shown(problem, 400)
        super().__init__(f"{shown(path, 400)}: not written: {self.problem} (a reader would refuse this record)")


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """``loc`` as the key path a reader of ``data`` sees: without the tags pydantic adds for a union's members
    (``hosts.db1.hostname.str``: a tag is no key of the data where it stands). A key missing is the last part."""
    if data is None:
        return ".".join(str(p) for p in loc)
    keys, at = [], data
    for i, part in enumerate(loc):
        if isinstance(at, dict) and (part in at or i == len(loc) - 1):
            keys.append(str(part))
            at = at.get(part)
        elif isinstance(at, list) and isinstance(part, int) and 0 <= part < len(at):
            keys.append(str(part))
            at = at[part]
    return ".".join(keys)


def _first_problem(exc: ValidationError, data: Any = None) -> str:
    """The first validation error as ``key.sub: what`` (and how many more keys are wrong)."""
    errors = exc.errors(include_url=False)
    e = errors[0]
    where = _where(e["loc"], data) or "the manifest"
    if e["type"] == "missing":
        what = "missing"
    elif e["type"] == "value_error":
        what = str(e.get("ctx", {}).get("error") or e["msg"])
    else:  # "a valid dictionary or instance of Member": a JSON object is what is meant
        msg = re.sub(r" or instance of \w+", "", e["msg"]).lower()
        what = f"{msg}, not {shown(_json(e.get('input')), 60)}"
    others = len({_where(x["loc"], data) for x in errors} - {where})  # a union's members: one key, one problem
    more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
    return f"{where}: {what}{more}"


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def not_finite(data: Any) -> str | None:
    """The first number in ``data`` no reader can use, as ``key.sub: what`` (None when there is none): NaN and
    Infinity (Python's json reads them, and ``1e400`` as Infinity; pglab writes neither, orjson writes null) and a
    whole number beyond 64 bits. Walked without recursion: a record nested deep is refused, never a crash."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where or 'the record'}: {_json(value)} is not a finite number (JSON has no NaN or Infinity)"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            return f"{where or 'the record'}: {shown(value, 40)} is too large a number (beyond 64 bits)"
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(items)))
    return None


def parse(path: str | Path, what: str = "run manifest") -> Any:
    """The JSON in ``path``; ManifestError (naming the file) when it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ManifestError(path, f"{path.stat().st_size} bytes: too large for a {what}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        where = "not a pglab run folder" if what == "run manifest" else "the point was not measured"
        raise ManifestError(path, f"no such file: {where}") from None
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
    except RecursionError:
        raise ManifestError(path, f"nested too deep for a {what}: hand-edited or not a {what}") from None


def _shape_problem(data: Any, model: type[_Open]) -> str | None:
    """Why ``data`` does not have ``model``'s shape (None when it does)."""
    if not isinstance(data, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(data), "null")
        return f"not a {model.WHAT}: a JSON {kind}, not an object"
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return f"not a {model.WHAT}: {_first_problem(exc, data)}"
    except RecursionError:
        return f"not a {model.WHAT}: nested too deep"
    number = not_finite(data) if model.FINITE else None
    return f"not a {model.WHAT}: {number}" if number else None


def check(data: Any, path: str | Path, model: type[_Open] = RunRecord) -> dict[str, Any]:
    """``data`` (a parsed record) if it has ``model``'s shape and belongs in its folder; else ManifestError."""
    path = Path(path)
    problem = _shape_problem(data, model)
    if problem:
        raise ManifestError(path, problem)
    folder, run_id = path.parent.name, data.get("run_id")
    if run_id is not None and RUN_FOLDER.fullmatch(folder) and run_id != folder:
        raise ManifestError(path, f"run_id {run_id!r} is not the name of its folder {folder!r}: a hand-edited "
                                  "manifest, or a run copied into another run's folder")
    return data


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A checked manifest (``check``) in today's format (``pglab.runs.formats`` says what each migration does)."""
    return formats.manifest(data)


def read(run_dir: str | Path, study: str | None = None) -> dict[str, Any]:
    """The checked manifest of the run in ``run_dir``, in today's format; with ``study``, refused unless it is a run
    of that study."""
    path = Path(run_dir) / MANIFEST
    data = check(parse(path), path)
    if study is not None and data["study"] != study:
        raise ManifestError(path, f"a run of {data['study']}, not of {study}")
    return migrate(data)


def read_meta(point_dir: str | Path, run: Mapping[str, Any]) -> dict[str, Any]:
    """The checked meta.json of the point in ``point_dir``, in today's format; ``run`` is its run's manifest (as
    ``read`` returns it: what an older point lacks may come from it)."""
    path = Path(point_dir) / META
    data = check(parse(path, PointMeta.WHAT), path, PointMeta)
    return formats.meta(data, path.parent.name, run)


def check_written(data: Any, path: str | Path, model: type[_Open], today: bool = True) -> None:
    """RecordError naming the key when ``data`` (what is about to be written to ``path``, as JSON gives it back)
    would not pass ``model`` or (``today``) is not in today's format: the writer's half of the contract.
    ``pglab cleanup`` adds to a killed run's manifest in whatever format it was written (``today=False``)."""
    problem = _shape_problem(data, model)
    if problem is None and today and data.get("format_version") != FORMAT_VERSION:
        problem = f"format_version: {data.get('format_version')!r}, not today's {FORMAT_VERSION}"
    if problem:
        raise RecordError(path, problem)


def _known(model: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the keys ``model`` (when it forbids others) and its nested models no longer have."""
    forbid = model.model_config.get("extra") == "forbid"
    out = {} if forbid else dict(data)
    for name, field in model.model_fields.items():
        if name in data:
            out[name] = _prune(field.annotation, data[name])
    return out


def _prune(annotation: Any, value: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _known(annotation, value) if isinstance(value, Mapping) else value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        return _known(models[0], value) if len(models) == 1 and isinstance(value, Mapping) else value
    if origin is list and args and isinstance(value, list):
        return [_prune(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, Mapping):
        return {k: _prune(args[1], v) for k, v in value.items()}
    return value


def parameters(manifest: Mapping[str, Any], model: type[M]) -> M:
    """The run's parameters as its study's own model (``studies/<study>/params.py``) validates them: what an
    analysis reads instead of ``manifest["parameters"][key]`` with a default copied from the model.

    Tolerant of the run's age: a key an older run lacks takes the model's default, a key the model no longer has
    (at any depth) is left out. What the model refuses is a ManifestError naming the key."""
    given = manifest.get("parameters") or {}
    known = _known(model, given)
    try:
        return model.model_validate(known, strict=False)  # as JSON kept it: tolerant of type, not of bounds
    except ValidationError as exc:
        where = f"run {manifest.get('run_id', '?')}"
        raise ManifestError(where, f"parameters.{_first_problem(exc, known)} (today's {model.__module__}."
                                   f"{model.__name__} refuses what this run recorded)") from None


def baseline(manifest: Mapping[str, Any], default: str) -> str:
    """The configuration every block ran twice, from its one place (``plan.baseline``; a format-1 plan lacking it
    took ``parameters.baseline`` on read); ``default`` (what the parameters name) for a record without a plan."""
    plan = manifest.get("plan") or {}
    return str(plan.get("baseline") or default)


def under_way(adaptive: Mapping[str, Any], first: int, added: int) -> tuple[int, int]:
    """(blocks added, the block cut short) of a first look's record (``plan.adaptive``) left while a block ran: that
    block never finished, so it is cut short, not added. Older code (a record without ``blocks_finished``) counted
    it in ``blocks_added``: taken off here, for whoever reads such a record (a resumed run, the analysis)."""
    if "blocks_finished" not in adaptive and added:
        added -= 1
    return added, int(adaptive.get("cut_short") or first + added + 1)


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
