"""What a ledger must be before it is read, merged or written: a ledger's file comes from anyone (a colleague's
merge, a download), so it is checked first and refused in one line, never half-used.

- the file: a SQLite database (its header), not a text file that happens to be named ``.sqlite``;
- the schema: a ``meta`` table with a whole-number ``schema_version`` no newer than this pglab's, and every table
  with the very columns of that version (an older ledger is upgraded only when it is opened to be written);
- the values: a number column holds numbers (SQLite stores whatever it is given: ``'abc'`` as a ``reproduced``
  value would break every later reader);
- the ids of a ledger merged in: a run id is a run folder's name, a study a plain id, a machine key 12 hex digits
  (they are printed, matched and used as folder names).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pglab.errors import UserError
from pglab.ledger.schema import ADDED, ADDED_TABLES, INTEGER, REAL, SCHEMA_VERSION, TABLES
from pglab.runs.record import PLAIN_ID, RUN_FOLDER

Ledger = Any  # a pglab.ledger.backend.Ledger (which calls these checks as it opens: not imported, no circle)

SQLITE_HEADER = b"SQLite format 3\x00"
MACHINE_KEY = re.compile(r"[0-9a-f]{12}")


def sqlite_file(path: Path, shown: str) -> None:
    """Refused unless ``path`` is empty (a new database) or starts with SQLite's header."""
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise UserError(f"ledger {shown}: not a SQLite file (a ledger is one, plain or gzipped); nothing was read "
                        "or written")


def columns_of(version: int) -> dict[str, set[str]]:
    """Table -> the columns a ledger of schema ``version`` has."""
    later = {t for v, tables in ADDED_TABLES.items() if v > version for t in tables}
    return {t: set(cols) - {c for v, added in ADDED.items() if v > version for c in added.get(t, ())}
            for t, (cols, _) in TABLES.items() if t not in later}


def _tables(ledger: Ledger) -> tuple[dict[str, set[str]], bool]:
    """(ledger table -> its columns, whether the database holds tables of something else)."""
    if ledger.kind == "sqlite":
        names = [r[0] for r in ledger.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = {n: {r[1] for r in ledger.query(f"PRAGMA table_info(\"{n}\")")} for n in names if n in TABLES}
        return found, any(n not in TABLES and not n.startswith("sqlite_") for n in names)
    found: dict[str, set[str]] = {}
    for table, column in ledger.query("SELECT table_name, column_name FROM information_schema.columns "
                                      "WHERE table_schema = current_schema()"):
        if table in TABLES:
            found.setdefault(table, set()).add(column)
    return found, False  # a team's database may hold other tables beside the ledger's


def version(ledger: Ledger) -> int | None:
    """The schema version of the ledger, None if the database holds no ledger yet (nothing at all); refused if it
    holds something else, a version that is no whole number or is newer than this pglab's, or tables that are
    not those of its version."""
    found, others = _tables(ledger)
    where = f"ledger {ledger.shown}"
    if not found:
        if others:
            raise UserError(f"{where}: a database, but not a pglab ledger (no table of one); nothing was written")
        return None
    rows = ledger.query("SELECT value FROM meta WHERE key = ?", ("schema_version",)) if "meta" in found else []
    if not rows:
        raise UserError(f"{where}: not a pglab ledger (no schema_version in a meta table); nothing was written")
    said = rows[0][0]
    if not isinstance(said, (str, int)) or not re.fullmatch(r"[1-9][0-9]{0,5}", str(said)):
        raise UserError(f"{where}: schema version {_quoted(said)} is not a whole number: not a ledger pglab wrote; "
                        "nothing was written")
    v = int(said)
    if v > SCHEMA_VERSION:
        raise UserError(f"{where}: schema version {v} is newer than this pglab's ({SCHEMA_VERSION}); update pglab "
                        "to read it")
    for table, want in columns_of(v).items():
        have = found.get(table)
        if have != want:
            problem = "is missing" if have is None else \
                f"has the columns {_names(have - want) or '(none extra)'} and lacks {_names(want - have) or '(none)'}"
            raise UserError(f"{where}: table {table} {problem}, unlike a ledger of schema {v}: not a ledger pglab "
                            "wrote; nothing was written")
    return v


def values(ledger: Ledger) -> None:
    """Refused if a number column of a SQLite ledger holds text or bytes (PostgreSQL's types see to its own)."""
    if ledger.kind != "sqlite":
        return
    for table, want in columns_of(SCHEMA_VERSION).items():
        have = {r[1] for r in ledger.query(f"PRAGMA table_info({table})")}
        numeric = [c for c in TABLES[table][0] if c in want & have and (c in REAL or c in INTEGER)]
        text = [c for c in TABLES[table][0] if c in want & have and c not in numeric]
        tests = [f"SUM(typeof({c}) NOT IN ('real', 'integer', 'null'))" for c in numeric] + \
                [f"SUM(typeof({c}) NOT IN ('text', 'null'))" for c in text]
        if not tests:  # a table this ledger's older schema lacks (read, never upgraded)
            continue
        bad = ledger.query(f"SELECT {', '.join(tests)} FROM {table}")[0]
        for column, n in zip(numeric + text, bad, strict=True):
            if n:
                kind = "a number" if column in numeric else "text"
                raise UserError(f"ledger {ledger.shown}: table {table}, column {column}: {n} value"
                                f"{'s are' if n > 1 else ' is'} not {kind}: not a ledger pglab wrote; nothing was "
                                "read or written")


def ids(ledger: Ledger) -> None:
    """Refused if a run id, study or machine key of the ledger is not of the form pglab gives it."""
    checks = [(t, "run_id", RUN_FOLDER, "a run folder's name (a UTC time and a suffix)")
              for t in ("runs", "analyses", "points", "claims")]
    checks += [(t, "campaign_id", RUN_FOLDER, "a run folder's name") for t in ("campaigns", "campaign_claims")]
    checks += [("runs", "study", PLAIN_ID, "a plain id"), ("campaigns", "study", PLAIN_ID, "a plain id"),
               ("runs", "machine_key", MACHINE_KEY, "12 hex digits"),
               ("machines", "machine_key", MACHINE_KEY, "12 hex digits")]
    for table, column, pattern, form in checks:
        for (value,) in ledger.query(f"SELECT DISTINCT {column} FROM {table}"):
            if not isinstance(value, str) or not pattern.fullmatch(value):
                raise UserError(f"ledger {ledger.shown}: table {table} holds the {column} {_quoted(value)}, not "
                                f"{form}: not a ledger pglab wrote; nothing was read or written")


def _quoted(value: object) -> str:
    from pglab.ledger.locations import printable

    return printable(repr(value), 60)


def _names(cols: set[str]) -> str:
    return ", ".join(sorted(cols))
