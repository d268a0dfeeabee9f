"""What a ledger location may be, decided before anything is opened, created or connected to.

A location comes from a command line or ``$PGLAB_LEDGER``: text anyone may have typed wrong. It is a SQLite file
(a path, ``sqlite:PATH``, ``sqlite:///PATH``) or a PostgreSQL URL (``postgresql://user@host/db``, the scheme in
any case). Anything else that starts like a URL (``postgresql:/x``, ``postgres:x``, ``http://...``) is refused,
never taken for a file name: a typo of a URL would otherwise become a file whose name holds the password. A
password anywhere (``user:secret@``, ``password=``) is refused without being shown: libpq reads it from
``~/.pgpass`` or ``PGPASSFILE``, so it never lands in shell history, ``ps`` or a log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pglab.errors import UserError

POSTGRES_SCHEMES = ("postgresql", "postgres")
#: a URL scheme and its colon (RFC 3986): a location starting so is a URL, never a file name
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
#: ``user:password@`` (after the scheme; a ``://`` is no password's colon), or a ``password=`` parameter, anywhere
SECRET = re.compile(r":(?!//)[^@]*@|password\s*=", re.IGNORECASE)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
FORMS = "a SQLite file (a path, sqlite:PATH) or postgresql://user@host/db"


@dataclass(frozen=True)
class Where:
    """A checked location: ``kind`` is ``sqlite`` (``path`` is its file) or ``postgresql`` (``url`` for libpq)."""

    kind: str
    url: str
    path: Path | None = None

    @property
    def packed(self) -> bool:
        """A ``.gz`` SQLite file: kept gzipped, unpacked to be read."""
        return self.path is not None and self.path.name.endswith(".gz")


def printable(text: object, limit: int = 0) -> str:
    """``text`` on one line with every control character escaped (a terminal's escape sequences shown, never
    obeyed), cut at ``limit`` if given."""
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if not limit or len(s) <= limit else s[: limit - 3] + "..."


def shown(text: str) -> str:
    """A location as a message may quote it: whole, escaped, unless it might hold a secret (then its scheme)."""
    if "@" in text or SECRET.search(_after_scheme(text)):
        m = SCHEME.match(text)
        return f"{printable(m.group(1), 40)}:..." if m else "(a location not shown: it may hold a password)"
    return printable(text, 200)


def _after_scheme(text: str) -> str:
    m = SCHEME.match(text)
    return text[m.end():].removeprefix("//") if m else text


def _refuse(text: str, why: str) -> UserError:
    return UserError(f"ledger {shown(text)}: {why}; nothing was read or written")


def parse(text: str) -> Where:
    """The location ``text`` names, or a one-line refusal (exit 2) of a location that is none of the known forms,
    holds a password or a control character."""
    if not text:
        raise _refuse(text, f"an empty location: give {FORMS}")
    if CONTROL.search(text):
        raise _refuse(text, "holds a control character")
    if SECRET.search(_after_scheme(text)):
        raise _refuse(text, "holds a password (user:password@ or password=); put it in ~/.pgpass (or a file named "
                            "by PGPASSFILE) instead, so that it never appears in a command")
    m = SCHEME.match(text)
    if m is None:
        return _file(text, text)
    scheme, rest = m.group(1).lower(), text[m.end():]
    if scheme in POSTGRES_SCHEMES:
        return _postgres(text, scheme, rest)
    if scheme == "sqlite":
        if rest.startswith("///"):  # sqlite:///rel/path, sqlite:////abs/path (SQLAlchemy's form)
            return _file(text, rest[3:])
        if rest.startswith("//"):
            raise _refuse(text, "sqlite:// names a host, not a file: write sqlite:///PATH or sqlite:PATH")
        return _file(text, rest)
    raise _refuse(text, f"{scheme}: is not a ledger's scheme: give {FORMS} (a file whose name starts with "
                        f"'{printable(m.group(1), 40)}:' is ./{printable(m.group(1), 40)}:...)")


def _file(text: str, path: str) -> Where:
    """A SQLite file's path, unless it still looks like a URL (``sqlite:postgresql://...``, ``x/postgres://y``)."""
    if not path:
        raise _refuse(text, "names no file")
    if SCHEME.match(path) or "://" in path:
        raise _refuse(text, f"looks like a URL, not a file: give {FORMS}")
    return Where("sqlite", str(Path(path)), Path(path))


def _postgres(text: str, scheme: str, rest: str) -> Where:
    """A PostgreSQL URL that libpq reads, its scheme in lower case (libpq knows no other), with no password."""
    if not rest.startswith("//"):
        raise _refuse(text, f"{scheme}: must be followed by // (postgresql://user@host/db)")
    url = f"{scheme}:{rest}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here, not later in libpq
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - the parser's own message would quote the URL
        raise _refuse(text, "not a PostgreSQL URL libpq reads (postgresql://user@host:port/db; an IPv6 "
                            "host in brackets)") from None
    if parts.password is not None or "password" in given:
        raise _refuse(text, "holds a password; put it in ~/.pgpass (or a file named by PGPASSFILE) instead")
    return Where("postgresql", url)
