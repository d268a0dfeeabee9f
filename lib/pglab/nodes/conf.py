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

from typing import Any

# The rules (what a setting's name is, which values one line can carry) are ``pglab.userfiles``': the parameter
# models check a profile's server settings by them before anything starts, and the analyses read those models
# without the node layer.
from pglab.server_settings import DIRECTIVES
from pglab.userfiles import setting_name_problem as name_problem
from pglab.userfiles import setting_value_problem as value_problem


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
    if name.lower() in DIRECTIVES:  # pglab writes its one include itself (Node.init); no value may add another
        raise ValueError(f"{name} is a configuration directive, not a setting: pglab reads no file it did not write")
    try:
        return f"{name} = {value(v)}\n"
    except ValueError as exc:
        raise ValueError(f"setting {name}: {exc}") from None

