"""Where a ledger lives: a SQLite file (the default, nothing to set up) or a PostgreSQL database (a team's).

A location is a path (``data/ledger.sqlite``), ``sqlite:///abs/path`` or ``postgresql://user@host/db``.
Two ledgers matter in a checkout: the **reference** (``data/ledger/reference.sqlite.gz``, in git, gzipped: the runs the
repository shipped, written only by whoever ships runs) and **yours** (``data/ledger.sqlite``, ignored by git:
what your commands add), which starts as a copy of the reference and takes in its new runs whenever it is read.
A PostgreSQL URL never carries a password (it would land in shell history, ``ps`` and logs): libpq reads
it from ``~/.pgpass`` or ``PGPASSFILE``, as pglab's own servers do. The SQL the ledger sends is written
once, with ``?`` placeholders; for psycopg they become ``%s``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pglab.errors import UserError
from pglab.ledger.schema import ADDED, SCHEMA_VERSION, column_type, ddl

ENV = "PGLAB_LEDGER"
REFERENCE = Path("ledger") / "reference.sqlite.gz"  # under the data root; packed (``_unpacked``)


def location(url: str | None = None, data_root: str | Path = "data") -> str:
    """The ledger named by ``url``, else by ``$PGLAB_LEDGER``, else yours: ``<data_root>/ledger.sqlite``."""
    return url or os.environ.get(ENV) or str(Path(data_root) / "ledger.sqlite")


def is_yours(url: str | None, data_root: str | Path = "data") -> bool:
    """Whether ``url`` leaves the choice to the default: your ledger, which takes in the reference's runs."""
    return not url and not os.environ.get(ENV)


def reference(data_root: str | Path = "data") -> Path:
    return Path(data_root) / REFERENCE


def _unpacked(path: Path) -> tuple[tuple[Path, Path] | None, Path]:
    """(None, ``path``) for a plain SQLite file; for ``*.gz`` (the reference ledger, kept in git at a quarter of
    its size) ((the file, a working copy), the working copy): SQLite reads only plain files, so the ledger is
    unpacked into a temporary file, and ``Ledger.close`` packs it back if it changed."""
    if not path.name.endswith(".gz"):
        return None, path
    fd, name = tempfile.mkstemp(prefix="pglab-ledger-", suffix=".sqlite")
    os.close(fd)
    work = Path(name)
    if path.is_file():
        try:
            with gzip.open(path, "rb") as src, open(work, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except (OSError, EOFError) as exc:
            work.unlink(missing_ok=True)
            raise UserError(f"ledger {path}: cannot be unpacked ({exc})") from None
    else:
        work.unlink()  # SQLite makes a new one
    return (path, work), work


def sqlite_path(url: str) -> Path:
    """The file a SQLite location names (a path, ``sqlite:///abs/path`` or ``sqlite:rel/path``)."""
    return Path(url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:"))


def _postgres_url(url: str) -> str:
    """``url`` if it names no password, in its user part or its query string (libpq reads both)."""
    from psycopg.conninfo import conninfo_to_dict

    parts = urlsplit(url)
    try:
        given = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - libpq's message would quote the URL, password and all
        raise UserError(f"ledger {parts.scheme}://{parts.hostname or ''}/...: not a PostgreSQL URL libpq reads") \
            from None
    if parts.password is not None or "password" in given:
        raise UserError(f"ledger {parts.scheme}://{parts.hostname or ''}/...: the URL holds a password; put it in "
                        "~/.pgpass (or a file named by PGPASSFILE) instead, so that it never appears in a command")
    return url


class Ledger:
    """An open connection and its dialect; use as a context manager (commits, or rolls back on error)."""

    def __init__(self, url: str | Path | None = None, data_root: str | Path = "data"):
        self.url = location(str(url) if url is not None else None, data_root)
        self._packed: tuple[Path, Path] | None = None  # a .gz ledger: (the file, its working copy)
        self._changed = False  # DDL the open made (a schema migration): written back like rows
        if self.url.startswith(("postgresql://", "postgres://")):
            import psycopg

            try:
                self.conn: Any = psycopg.connect(_postgres_url(self.url), connect_timeout=10)
            except psycopg.OperationalError as exc:
                raise UserError(f"ledger {self.shown}: cannot connect ({str(exc).strip().splitlines()[0]})") from None
            self.kind = "postgresql"
        else:
            path = sqlite_path(self.url)
            if path.is_dir():
                raise UserError(f"ledger {path}: is a folder, not a SQLite file")
            path.parent.mkdir(parents=True, exist_ok=True)
            self._packed, path = _unpacked(path)
            try:
                self.conn = sqlite3.connect(path)
                self.conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.Error as exc:
                raise UserError(f"ledger {path}: cannot be opened as SQLite ({exc})") from None
            self.kind = "sqlite"
        self._create()

    @property
    def shown(self) -> str:
        """The location without anything secret (a PostgreSQL URL never has a password: see ``_postgres_url``)."""
        return self.url

    def _create(self) -> None:
        with self.transaction():
            for statement in ddl(sqlite=self.kind == "sqlite"):
                self.execute(statement)
            found = self.query("SELECT value FROM meta WHERE key = ?", ("schema_version",))
            if not found:
                self._changed = True
                self.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("schema_version", str(SCHEMA_VERSION)))
            elif int(found[0][0]) > SCHEMA_VERSION:
                raise UserError(f"ledger {self.shown}: schema version {found[0][0]} is newer than this pglab's "
                                f"({SCHEMA_VERSION}); update pglab to read it")
            elif int(found[0][0]) < SCHEMA_VERSION:  # an older ledger gains the columns added since (empty)
                self._changed = True
                for version in range(int(found[0][0]) + 1, SCHEMA_VERSION + 1):
                    for table, columns in ADDED.get(version, {}).items():
                        for column in columns:
                            self.execute(f"ALTER TABLE {table} ADD COLUMN {column} {column_type(column)}")
                self.execute("UPDATE meta SET value = ? WHERE key = ?", (str(SCHEMA_VERSION), "schema_version"))

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        if self.kind == "postgresql":
            with self.conn.cursor() as cur:
                cur.executemany(self._sql(sql), rows)
        else:
            self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(self._sql(sql), tuple(params)).fetchall()]

    def columns(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and rows of a query."""
        cur = self.conn.execute(self._sql(sql), tuple(params))
        return [d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def compact(self) -> None:
        """A SQLite file rewritten without its free pages (after a rebuild or an import: a file kept in git)."""
        if self.kind == "sqlite":
            self.conn.execute("VACUUM")

    def close(self) -> None:
        """Closed; a ``.gz`` ledger that changed is compacted and packed back (deterministic bytes: no name, no
        time in the gzip header), in one rename; its working copy goes either way."""
        if self._packed is None:
            self.conn.close()
            return
        packed, work = self._packed
        try:
            changed = self._changed or self.conn.total_changes > 0
            if changed:
                self.conn.commit()
                self.conn.execute("VACUUM")
            self.conn.close()
            if changed:
                tmp = packed.with_name(f".{packed.name}.writing")
                with open(work, "rb") as src, open(tmp, "wb") as raw, \
                        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as dst:
                    shutil.copyfileobj(src, dst)
                os.replace(tmp, packed)
        finally:
            work.unlink(missing_ok=True)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
