"""Where a ledger lives: a SQLite file (the default, nothing to set up) or a PostgreSQL database (a team's).

A location is a path (``data/ledger.sqlite``), ``sqlite:PATH`` or ``postgresql://user@host/db``, checked by
``locations`` before anything is opened; what it holds is checked by ``checks`` before anything is written.
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
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pglab.errors import UserError
from pglab.ledger import checks
from pglab.ledger.locations import Where, parse, printable, shown
from pglab.ledger.schema import ADDED, SCHEMA_VERSION, column_type, ddl

ENV = "PGLAB_LEDGER"
REFERENCE = Path("ledger") / "reference.sqlite.gz"  # under the data root; packed (``_unpack``)


def location(url: str | None = None, data_root: str | Path = "data") -> str:
    """The ledger named by ``url``, else by ``$PGLAB_LEDGER``, else yours: ``<data_root>/ledger.sqlite``."""
    return url or os.environ.get(ENV) or str(Path(data_root) / "ledger.sqlite")


def is_yours(url: str | None, data_root: str | Path = "data") -> bool:
    """Whether ``url`` leaves the choice to the default: your ledger, which takes in the reference's runs."""
    return not url and not os.environ.get(ENV)


def reference(data_root: str | Path = "data") -> Path:
    return Path(data_root) / REFERENCE


def sqlite_path(url: str) -> Path:
    """The file a SQLite location names (a path, ``sqlite:///path`` or ``sqlite:path``); refused if the location is
    no SQLite file (``locations.parse``)."""
    where = parse(url)
    if where.path is None:
        raise UserError(f"ledger {shown(url)}: a PostgreSQL URL, not a SQLite file")
    return where.path


def _unpack(path: Path, said: str) -> Path:
    """A working copy of the gzipped ledger ``path`` (SQLite reads only plain files); refused if it is no gzip."""
    fd, name = tempfile.mkstemp(prefix="pglab-ledger-", suffix=".sqlite")
    os.close(fd)
    work = Path(name)
    try:
        with gzip.open(path, "rb") as src, open(work, "wb") as dst:
            shutil.copyfileobj(src, dst)
    except (OSError, EOFError, zlib.error) as exc:
        work.unlink(missing_ok=True)
        raise UserError(f"ledger {said}: cannot be unpacked ({printable(exc, 120)}); nothing was read or written") \
            from None
    return work


def _new_home(path: Path, said: str) -> None:
    """Refused if a new ledger at ``path`` could never be written (a file where a folder would be): said now,
    before any work, not when the ledger is written at the end."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"ledger {said}: {printable(parent, 200)} is a file, not a folder; nothing was written")
            return


class Ledger:
    """An open connection and its dialect; use as a context manager (commits, or rolls back on error).

    ``readonly``: a ledger only read (merged in): it must exist and be a ledger of this schema with ids of pglab's
    forms (``strict``); it is never created, upgraded or written. A new SQLite ledger is made in a scratch file
    and takes its place (and its folders) only when the command ends well: a refused command leaves no file."""

    def __init__(self, url: str | Path | None = None, data_root: str | Path = "data", *, readonly: bool = False,
                 strict: bool = True):
        self.where: Where = parse(location(str(url) if url is not None else None, data_root))
        self.url = self.where.url
        self.readonly = readonly
        self.strict = strict  # read only: of this very schema, its ids checked (``strict=False``: any ledger)
        self._copy: tuple[Path, Path, bool] | None = None  # (the file, its working copy, whether it is new)
        self._changed = False  # DDL the open made (a schema migration): written back like rows
        if self.where.kind == "postgresql":
            import psycopg

            try:
                self.conn: Any = psycopg.connect(self.url, connect_timeout=10)
            except psycopg.OperationalError as exc:
                raise UserError(f"ledger {self.shown}: cannot connect "
                                f"({printable(str(exc).strip().splitlines()[0], 200)})") from None
            self.conn.read_only = readonly
            self.kind = "postgresql"
        else:
            self.kind = "sqlite"
            self._open_sqlite(self.where.path or Path())
        try:
            self._create()
        except sqlite3.Error as exc:
            self.close(ok=False)
            raise UserError(f"ledger {self.shown}: cannot be read as SQLite ({printable(exc, 120)}); nothing was "
                            "written") from None
        except BaseException:
            self.close(ok=False)
            raise

    def _open_sqlite(self, path: Path) -> None:
        said = self.shown
        if path.is_dir():
            raise UserError(f"ledger {said}: is a folder, not a SQLite file")
        if path.exists() and not path.is_file():
            raise UserError(f"ledger {said}: not a regular file")
        if not path.exists():
            if self.readonly:
                raise UserError(f"ledger {said}: no such file (a ledger read or merged is never created)")
            _new_home(path, said)
            fd, name = tempfile.mkstemp(prefix="pglab-ledger-", suffix=".sqlite")
            os.close(fd)
            self._copy = (path, Path(name), True)
        elif self.where.packed:
            self._copy = (path, _unpack(path, said), False)
        work = self._copy[1] if self._copy else path
        try:
            checks.sqlite_file(work, said)
            self.conn = sqlite3.connect(f"file:{quote(str(work.resolve()))}?mode=ro", uri=True) if self.readonly \
                else sqlite3.connect(work)
            self.conn.execute("PRAGMA foreign_keys = ON")
        except (UserError, sqlite3.Error) as exc:
            if self._copy:
                self._copy[1].unlink(missing_ok=True)
            if isinstance(exc, UserError):
                raise
            raise UserError(f"ledger {said}: cannot be opened as SQLite ({printable(exc, 120)})") from None

    @property
    def shown(self) -> str:
        """The location as a message may quote it (escaped; a PostgreSQL URL never has a password: ``locations``)."""
        return shown(self.url)

    def _create(self) -> None:
        """The schema checked (``checks``), then, unless read only, made or upgraded; the values checked."""
        with self.transaction():
            found = checks.version(self)
            if self.readonly and found is None:
                raise UserError(f"ledger {self.shown}: holds no ledger (no table of one); nothing was read")
            if self.readonly and self.strict and found is not None and found < SCHEMA_VERSION:
                raise UserError(f"ledger {self.shown}: schema version {found} is older than this pglab's "
                                f"({SCHEMA_VERSION}) and a ledger merged in is never written; upgrade a copy of it "
                                "first (open it with `pglab ledger list --ledger COPY`)")
            if not self.readonly:
                for statement in ddl(sqlite=self.kind == "sqlite"):
                    self.execute(statement)
                if found is None:
                    self._changed = True
                    self.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                                 ("schema_version", str(SCHEMA_VERSION)))
                elif found < SCHEMA_VERSION:  # an older ledger gains the columns added since (empty)
                    self._changed = True
                    for v in range(found + 1, SCHEMA_VERSION + 1):
                        for table, columns in ADDED.get(v, {}).items():
                            for column in columns:
                                self.execute(f"ALTER TABLE {table} ADD COLUMN {column} {column_type(column)}")
                    self.execute("UPDATE meta SET value = ? WHERE key = ?", (str(SCHEMA_VERSION), "schema_version"))
            checks.values(self)
            if self.readonly and self.strict:
                checks.ids(self)

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

    def close(self, ok: bool = True) -> None:
        """Closed. A working copy is written back if it changed: a ``.gz`` ledger compacted and packed (deterministic
        bytes: no name, no time in the gzip header), a new ledger moved into place (its folders made) only if
        ``ok``; in one rename either way, and the working copy goes."""
        if self._copy is None:
            self.conn.close()
            return
        target, work, new = self._copy
        try:
            changed = not self.readonly and (new or self._changed or self.conn.total_changes > 0)
            write = changed and (ok or not new)  # an existing .gz keeps what was committed, as a plain file does
            if write:
                self.conn.commit()
                if self.where.packed:
                    self.conn.execute("VACUUM")
            self.conn.close()
            if write:
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.writing")
                with open(work, "rb") as src, open(tmp, "wb") as raw:
                    if self.where.packed:
                        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as dst:
                            shutil.copyfileobj(src, dst)
                    else:
                        shutil.copyfileobj(src, raw)
                os.replace(tmp, target)
        finally:
            work.unlink(missing_ok=True)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(ok=kind is None)
