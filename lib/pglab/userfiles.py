"""Files a user hands pglab (params, inventory, ``pglab parse`` input, a service file, a passfile): every way
one can be wrong becomes one message naming the file, and for YAML the line and column, never a traceback.

The base layer beside ``errors``: hosts (the inventory), runs (the params) and the parsers all read
user files the same way.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml

from pglab.errors import UserError

MAX_YAML_BYTES = 1 << 20  # a params file or an inventory is a few kB; 1 MiB is surely a wrong file
SNIFF_BYTES = 8192  # where a NUL byte says "binary"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # what no quoting keeps on one line: newline, CR, NUL, escape...


def one_line(v: str | None) -> str | None:
    """``v`` if it holds no control character, else ValueError (for pydantic validators): a value that goes into
    an environment variable, a command's argument, a path or a report must stay one line of text."""
    bad = CONTROL.search(v) if v is not None else None
    if bad:
        raise ValueError(f"{v[:40]!r} holds the control character {bad.group()!r}")
    return v


class FileError(UserError):
    """A user's file that cannot be used: ``path`` and ``problem`` (what was expected)."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def check_readable(path: str | Path, what: str, max_bytes: int | None = None) -> Path:
    """``path`` as a Path once it is known to be a readable regular file (not empty, not too big)."""
    p = Path(path)
    try:  # not Path.exists: it raises when a folder above the file may not be entered
        st = p.stat()
    except FileNotFoundError:
        raise FileError(p, f"does not exist (expected {what})") from None
    except OSError as exc:
        raise FileError(p, f"cannot be read: {exc.strerror or exc} (expected {what})") from None
    if stat.S_ISDIR(st.st_mode):
        raise FileError(p, f"is a directory (expected {what}, a file)")
    if not stat.S_ISREG(st.st_mode):
        raise FileError(p, f"is not a regular file (expected {what})")
    try:
        with p.open("rb"):
            pass
    except OSError as exc:
        raise FileError(p, f"cannot be read: {exc.strerror or exc} (expected {what})") from None
    size = st.st_size
    if size == 0:
        raise FileError(p, f"is empty (expected {what})")
    if max_bytes is not None and size > max_bytes:
        raise FileError(p, f"is {size:,} bytes; {what} is at most {max_bytes:,} (is this the right file?)")
    return p


def read_text(path: str | Path, what: str, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The whole file as UTF-8 text, refused when it is binary, not UTF-8 or blank."""
    p = check_readable(path, what, max_bytes)
    data = p.read_bytes()
    if b"\0" in data[:SNIFF_BYTES]:
        raise FileError(p, f"is a binary file (expected {what}, text)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileError(p, f"is not UTF-8 text (line {line}, byte {exc.start}; expected {what})") from None
    if not text.strip():
        raise FileError(p, f"holds only blank lines (expected {what})")
    return text


def check_text(path: str | Path, what: str, max_bytes: int = MAX_YAML_BYTES) -> Path:
    """A file another program reads (a libpq passfile or service file): readable, not empty, not binary.
    Its content is not decoded or kept: a passfile holds passwords."""
    p = check_readable(path, what, max_bytes)
    if looks_binary(p):
        raise FileError(p, f"is a binary file (expected {what}, text)")
    return p


def looks_binary(path: str | Path) -> bool:
    """A NUL byte in the first few kB (a large tool output is not read whole to know it)."""
    with Path(path).open("rb") as f:
        return b"\0" in f.read(SNIFF_BYTES)


def yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; a syntax error is named with its line and column."""
    text = read_text(path, what)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FileError(path, f"is not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise FileError(path, f"holds a YAML {kind(data)} at its top level; {what} is a mapping (`key: value` lines)")
    return data


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``line L, column C: what`` from a PyYAML error (its own message names the file ``<unicode string>``)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


def kind(value: Any) -> str:
    """How YAML would call this value: a list, a string, a number..."""
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__

