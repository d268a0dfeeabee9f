"""The configuration a running server really took, read back: pglab owns where it listens and which files it reads.

Why: a params file's settings are checked before anything starts (``pglab.server_settings``), but the proof is the
server's own view. ``pg_settings`` names each setting's value and the file it came from (``sourcefile``, visible to
the superuser pglab connects as); a setting pglab owns that came from another file or with another value means a
line pglab did not write took over, and no number measured on that server would be the run's.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pglab.errors import UserError

Node = Any  # a pglab.nodes.node.Node (which calls this module as it starts: not imported, no circle)

#: the files pglab writes or leaves in the data directory, which no setting may point elsewhere
FILES = {"hba_file": "pg_hba.conf", "ident_file": "pg_ident.conf", "config_file": "postgresql.conf"}


#: what the postmaster writes to postmaster.pid (lines 4-6) once it listens: the port, socket and address it took
PID_LINES = {3: "port", 4: "unix_socket_directories", 5: "listen_addresses"}


def listening(node: Node) -> list[str]:
    """Where the postmaster really listens (postmaster.pid), against where pglab put it: read without connecting,
    since a server moved to another port or socket cannot be reached where pglab looks."""
    lines = node.host.run(["cat", f"{node.data_dir}/postmaster.pid"], as_user=node.user).stdout.splitlines()
    owned = node.owned()
    bad = []
    for i, name in PID_LINES.items():
        took = lines[i].strip() if i < len(lines) else ""
        if took != str(owned[name]).split(",")[0].strip():
            bad.append(f"{name} = {took!r} (pglab wrote {str(owned[name])!r} in {node.data_dir}/pglab.conf)")
    return bad


def problems(node: Node) -> list[str]:
    """Each owned setting whose value or source differs from what pglab wrote (empty: the server is pglab's)."""
    moved = listening(node)
    if moved:
        return moved
    want: dict[str, str | None] = {**{k: str(v) for k, v in node.owned().items()}, **{k: None for k in node.fixed}}
    rows = node.query_fresh("select name, setting, coalesce(sourcefile, '') from pg_settings where name = any(%s)",
                      ([*want, *FILES, "data_directory"],))
    got = {name: (setting, source) for name, setting, source in rows}
    conf_file = posixpath.join(node.data_dir, "pglab.conf")
    data_dir = posixpath.normpath(got.get("data_directory", ("", ""))[0] or node.data_dir)
    bad = []
    for name, value in want.items():
        setting, source = got.get(name, ("", ""))
        elsewhere = posixpath.normpath(source or "/") != posixpath.normpath(conf_file)
        if elsewhere or (value is not None and setting != value):
            bad.append(f"{name} = {setting!r} from {source or 'no file'} (pglab wrote "
                       f"{repr(value) if value is not None else 'it'} in {conf_file})")
    for name, file in FILES.items():
        setting = got.get(name, ("", ""))[0]
        if posixpath.normpath(setting or "/") != posixpath.join(data_dir, file):
            bad.append(f"{name} = {setting!r} (pglab's is {posixpath.join(data_dir, file)})")
    return bad


def check(node: Node) -> None:
    """UserError naming every difference: the run stops before its first block."""
    bad = problems(node)
    if bad:
        raise UserError(f"node {node.name}: the server's configuration is not pglab's: {'; '.join(bad)}; "
                        "the run stops before its first block")
