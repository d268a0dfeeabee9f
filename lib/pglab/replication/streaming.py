"""Physical asynchronous streaming replication: the baseline the logical systems are compared with.

Order of calls (the same for every system, see base.py): ``pgbench -i`` on the provider, then
``add_history_key(provider)``, then ``prepare()``, then ``start()``. For streaming the order matters
most: ``prepare`` replaces the subscriber's cluster with a base backup of the provider, so the pgbench
tables (and the history key) must exist on the provider before it, and anything created on the
subscriber beforehand is discarded.

The subscriber ``Node`` object is kept (same name, data dir, port): only its cluster is replaced and
its role becomes ``standby``, so a ``Session`` that already tracks it still stops it.
"""

from __future__ import annotations

import time

from pglab.errors import ProcessError, UserError
from pglab.nodes.standby_copy import copy_backup
from pglab.replication.base import System, lag_sample


class Streaming(System):
    """An async physical standby fed by pg_basebackup and a walreceiver (no slot, no sync names)."""

    name = "streaming"

    @property
    def conninfo(self) -> str:
        """primary_conninfo: TCP to the provider's data address (the standby host's passfile, see
        ``Node.replication_conninfo``); application_name finds us in pg_stat_replication."""
        return self.provider.replication_conninfo(self.subscriber.name)

    def prepare(self) -> None:
        """Replace the subscriber's cluster with a base backup of the provider (same data dir and port)."""
        p, s = self.provider, self.subscriber
        sync_names = p.query("show synchronous_standby_names")[0][0]
        if sync_names:
            raise UserError(f"streaming: the provider has synchronous_standby_names={sync_names!r}; this system "
                            "measures asynchronous replication and a sync standby would change the result")
        s.stop()
        s.host.remove_tree(s.data_dir)  # only the subscriber's own data dir, never the workspace
        slot = {}
        if p.build:  # another build's major: a copy kept by a slot, as Node.backup makes it
            slot = {"primary_slot_name": copy_backup(p, s)}
        else:
            s.host.run([s.bin("pg_basebackup"), "-D", s.data_dir, "-X", "stream", "-c", "fast", "-d", self.conninfo,
                        "--no-sync"], as_user=s.user, timeout=600, env=s.ws.libpq_env())
        # A standby needs the primary's settings (max_connections etc. must not be lower): as Node.backup.
        inherited = {k: v for k, v in p.settings.items() if k != "synchronous_standby_names"}
        s.settings = {k: v for k, v in s.settings.items() if k != "synchronous_standby_names"}
        s.role = "standby"
        s.configure({**inherited, "primary_conninfo": self.conninfo, **slot})  # rewrites the copied port too
        s.write_hba()  # the copy brought the provider's
        s.host.run(["touch", f"{s.data_dir}/standby.signal"], as_user=s.user)

    def start(self, timeout: float = 60) -> None:
        """Start the standby and wait until the provider reports it as streaming."""
        self.subscriber.start()
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            rows = self.provider.query("select state from pg_stat_replication where application_name = %s",
                                       (self.subscriber.name,))
            state = rows[0][0] if rows else ""
            if state == "streaming":
                return
            time.sleep(0.1)
        raise ProcessError(self.provider.host.name, f"{self.name}: wait for {self.subscriber.name} to stream",
                           None, "", f"last state: {state or 'not connected'}\n{self.subscriber.log_tail()}",
                           timed_out=True)

    def caught_up(self) -> bool:
        """Provider's WAL position first, then the standby's replay position: everything committed so far."""
        lsn = self.provider.query("select pg_current_wal_lsn()", dbname=self.dbname)[0][0]
        done = self.subscriber.query("select coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", (lsn,),
                                     dbname=self.dbname)[0][0]
        return bool(done)

    def lag(self) -> dict[str, float | None]:
        """Bytes not yet replayed and replay_lag (NULL once the standby is idle: reported as None)."""
        rows = self.provider.query(
            "select pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), extract(epoch from replay_lag) "
            "from pg_stat_replication where application_name = %s", (self.subscriber.name,), dbname=self.dbname)
        return lag_sample(*rows[0]) if rows else lag_sample()
