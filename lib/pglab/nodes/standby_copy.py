"""A standby's data directory copied from its running primary, for builds no pg_basebackup here can back up.

Debian's pg_basebackup 15 refuses servers of 16 and later ("incompatible server version"), and registry builds
ship none. PostgreSQL's low-level backup needs no client program: between ``pg_backup_start`` and
``pg_backup_stop`` (``pg_start_backup``/``pg_stop_backup`` before 15) the data directory is copied as it is,
and the label ``pg_backup_stop`` returns goes into the copy as ``backup_label``. The WAL the standby needs from
the backup's start on is kept by a physical slot made (reserving WAL at once) before the backup starts: the
standby streams it through that slot (``primary_slot_name``), so nothing is recycled before it connects.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from pglab.errors import ProcessError

#: what a copy leaves out: the running server's own files, the WAL (streamed through the slot instead),
#: and what the server empties at start anyway
EXCLUDE = ("./postmaster.pid", "./postmaster.opts", "./pg_wal/*", "./pg_replslot/*", "./pg_stat_tmp/*",
           "./pg_dynshmem/*", "./pg_notify/*", "./pg_serial/*", "./pg_snapshots/*", "./pg_subtrans/*",
           "./pglab.conf", "./pg_hba.conf")


def backup_sql(major: int) -> tuple[str, str]:
    """(start, stop) of a non-exclusive low-level backup on ``major``; stop returns (labelfile, spcmapfile)."""
    if major >= 15:
        return ("select pg_backup_start(%s, true)", "select labelfile, spcmapfile from pg_backup_stop(false)")
    return ("select pg_start_backup(%s, true, false)", "select labelfile, spcmapfile from pg_stop_backup(false, false)")


def copy_backup(primary: Any, standby: Any) -> str:
    """``standby.data_dir`` made from ``primary`` (a running ``pglab.nodes.node.Node``), on the standby's host;
    the name of the slot that keeps its WAL, for ``primary_slot_name``."""
    slot = f"pglab_{standby.name}".lower()
    primary.query("select pg_create_physical_replication_slot(%s, true)", (slot,))
    major = int(primary.query("show server_version_num")[0][0]) // 10000
    start, stop = backup_sql(major)
    archive = f"{primary.ws.base}/.copy-{standby.name}.tar"
    with primary.connect() as conn:  # a non-exclusive backup lives as long as the session that started it
        conn.execute(start, (f"pglab standby {standby.name}",))
        res = primary.host.run(["tar", "-C", primary.data_dir, *(f"--exclude={x}" for x in EXCLUDE), "-cf",
                                archive, "."], as_user=primary.user, check=False, timeout=600)
        label, spcmap = conn.execute(stop).fetchone()
    if res.exit_code not in (0, 1):  # 1: a file changed as it was read, which the backup's WAL replay mends
        raise ProcessError(primary.host.name, f"tar of {primary.data_dir}", res.exit_code, res.stdout, res.stderr)
    try:
        _place(primary, standby, archive)
    finally:
        primary.host.run(["rm", "-f", archive])
    standby.host.write_text(f"{standby.data_dir}/backup_label", label, 0o600, owner=standby.user)
    if spcmap:
        standby.host.write_text(f"{standby.data_dir}/tablespace_map", spcmap, 0o600, owner=standby.user)
    return slot


def _place(primary: Any, standby: Any, archive: str) -> None:
    """The archive unpacked into the standby's (new, 0700) data directory: in place when both nodes share a host,
    else through this machine (``Host.get`` then ``put``)."""
    host, there = standby.host, archive
    host.mkdir(standby.data_dir, 0o700, owner=standby.user)
    moved = primary.host.name != host.name
    if moved:
        fd, local = tempfile.mkstemp(prefix="pglab-copy-", suffix=".tar")
        os.close(fd)
        try:
            primary.host.get(archive, local)
            there = f"{standby.ws.base}/.copy-{standby.name}.tar"
            host.put(local, there, 0o600, owner=standby.user)
        finally:
            os.unlink(local)
    try:
        host.run(["tar", "-C", standby.data_dir, "-xf", there], as_user=standby.user, timeout=600)
        host.run(["mkdir", "-p", "-m", "0700", f"{standby.data_dir}/pg_wal/archive_status"], as_user=standby.user)
    finally:
        if moved:
            host.run(["rm", "-f", there])
