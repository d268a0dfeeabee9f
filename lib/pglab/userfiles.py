"""Files a user hands pglab (params, inventory, ``pglab parse`` input, a service file, a passfile): every way
one can be wrong becomes one message naming the file, and for YAML the line and column, never a traceback.

The base layer beside ``errors``: hosts (the inventory), runs (the params) and the parsers all read
user files the same way. Also here: which server settings a params file may give (``setting_problems``), the
rules ``nodes.conf`` writes postgresql.conf by, so that a parameter model checks them without the node layer.
"""

from __future__ import annotations

import math
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from pglab.errors import UserError

MAX_YAML_BYTES = 1 << 20  # a params file or an inventory is a few kB; 1 MiB is surely a wrong file
#: nodes a YAML file may hold with its aliases expanded: a params file holds a few hundred; a "billion laughs"
#: file of 369 bytes holds 10**9 and would take minutes and gigabytes in every reader that walks it
MAX_YAML_NODES = 100_000
SNIFF_BYTES = 8192  # where a NUL byte says "binary"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # what no quoting keeps on one line: newline, CR, NUL, escape...


#: an absolute path of plain characters: what may go into a command line or an inventory check unquoted
PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+@/-]*")

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


def short(value: Any, n: int = 80) -> str:
    """``repr(value)`` cut to ``n`` characters on one line: an error message never echoes a whole input."""
    text = value if isinstance(value, str) and n > 80 else repr(value)
    text = CONTROL.sub(" ", text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _expanded_nodes(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many nodes ``node`` stands for once every alias is expanded (each shared node counted once per use,
    computed once: linear in the file, however large the expansion)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node that contains itself: counted once (PyYAML refuses recursive aliases anyway)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded_nodes(x, memo) for x in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
    memo[key] = total
    return total


def safe_yaml(text: str, path: str | Path) -> Any:
    """``yaml.safe_load`` of a user's file, refused past ``MAX_YAML_NODES`` nodes with aliases expanded."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            return None
        size = _expanded_nodes(node, {})
        if size > MAX_YAML_NODES:
            raise FileError(path, f"expands to more than {MAX_YAML_NODES:,} YAML values through its aliases "
                                  f"(*name); a params file or an inventory holds a few hundred")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FileError(path, f"is not valid YAML: {yaml_problem(exc)}") from None


def yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; a syntax error is named with its line and column."""
    text = read_text(path, what)
    data = safe_yaml(text, path)
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



# -- server settings from a params file: what nodes/conf.py can write as one line of postgresql.conf -------------
SETTING_NAME = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?", re.I)
_SETTING_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but TAB


def setting_name_problem(name: object) -> str | None:
    """Why ``name`` is not a setting's name (as the server, case-insensitive: ``TimeZone`` is ``timezone``)."""
    if not isinstance(name, str) or not SETTING_NAME.fullmatch(name):
        return (f"{name!r} is not a setting name (letters, digits and underscores, or one "
                "'prefix.name' for an extension's setting)")
    return None


def setting_value_problem(value: object) -> str | None:
    """Why ``value`` cannot be written as one setting's value (the lexer ends a line at a newline, whatever the
    quoting)."""
    if isinstance(value, bool) or value is None:
        return None if isinstance(value, bool) else "no value (null)"
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if not isinstance(value, str):
        return f"a {type(value).__name__} is not a setting's value (a string, number or boolean)"
    bad = _SETTING_CONTROL.search(value)
    if bad:
        return (f"{value[:40]!r} holds the control character {bad.group()!r} (a newline, NUL or other control "
                "character cannot be part of one setting's value)")
    return None


def setting_problems(settings: dict[str, Any]) -> list[str]:
    """Every name or value in ``settings`` that could not be written as itself (for parameter validation)."""
    out = []
    for k, v in settings.items():
        p = setting_name_problem(k)
        if p:
            out.append(p)
            continue
        p = setting_value_problem(v)
        if p:
            out.append(f"{k}: {p}")
    return out
