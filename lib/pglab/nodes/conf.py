"""Server settings as data: a name and a value become exactly one line of postgresql.conf, or are refused.

Why here, below every study: values reach the configuration file from params files, from the deployment
(paths, conninfo strings) and from a study's own code alike. PostgreSQL's configuration lexer
(``guc-file.l``) reads a quoted value up to the closing quote, un-doubles ``''`` and reads a backslash as an
escape (``\\'`` is a quote, ``\\n`` a newline), and a newline ends the line whatever the quoting. So a value is
written with backslashes and quotes escaped, and a value that holds a character the lexer cannot carry
inside one line (newline, carriage return, NUL, other control characters) is refused: there is no quoting
that keeps it one setting. Names are refused unless they are a setting's name (a custom ``a.b`` included).
"""

from __future__ import annotations

import math
import re
from typing import Any

NAME = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but TAB


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a setting's name (as the server, case-insensitive: ``TimeZone`` is ``timezone``)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return (f"{name!r} is not a setting name (letters, digits and underscores, or one "
                "'prefix.name' for an extension's setting)")
    return None


def value_problem(value: object) -> str | None:
    """Why ``value`` cannot be written as one setting's value."""
    if isinstance(value, bool) or value is None:
        return None if isinstance(value, bool) else "no value (null)"
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if not isinstance(value, str):
        return f"a {type(value).__name__} is not a setting's value (a string, number or boolean)"
    bad = _CONTROL.search(value)
    if bad:
        return (f"{value[:40]!r} holds the control character {bad.group()!r} (a newline, NUL or other control "
                "character cannot be part of one setting's value)")
    return None


def value(v: Any) -> str:
    """``v`` as the configuration file's lexer reads it back, unchanged."""
    problem = value_problem(v)
    if problem:
        raise ValueError(problem)
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (int, float)):
        return str(v)
    return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"


def line(name: str, v: Any) -> str:
    """One line of postgresql.conf; raises ValueError naming the setting rather than write anything else."""
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    try:
        return f"{name} = {value(v)}\n"
    except ValueError as exc:
        raise ValueError(f"setting {name}: {exc}") from None


def problems(settings: dict[str, Any]) -> list[str]:
    """Every name or value in ``settings`` that could not be written as itself (for parameter validation)."""
    out = []
    for k, v in settings.items():
        p = name_problem(k)
        if p:
            out.append(p)
            continue
        p = value_problem(v)
        if p:
            out.append(f"{k}: {p}")
    return out
