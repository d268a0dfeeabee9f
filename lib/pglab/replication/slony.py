"""Slony-I 2.2: trigger-based replication driven by slonik (configuration) and two slon daemons.

Where things run (the Slony-I documentation: one slon per node, near its database): slonik runs on
the provider's host, each slon on its node's host over the socket; paths (``store path``) are TCP
to the server's data address, because the *client* node's slon uses them.

Recipe and pitfalls (checked on PostgreSQL 15 with Debian 12's packages): every table needs a primary
key (``add_history_key``); slon's default timing leaves the subscriber far behind, so slon runs
with ``-s 1000 -t 2000`` unless ``options`` say otherwise; slonik's ``wait for event`` returns
before the initial copy is done, so ``start`` checks the catalogs itself.

Catch-up is decided from snapshots, not event counters: the subscriber's ``sl_setsync.ssy_snapshot``
is the provider snapshot of the last SYNC it applied (written in the same transaction as the data),
so the subscriber holds every logged change whose transaction is visible in it. ``caught_up`` is true
when no row of the provider's ``sl_log_1``/``sl_log_2`` (committed when asked) falls outside that
snapshot.
"""

from __future__ import annotations

import glob
import os
import shlex

from pglab.hosts.base import Background, Host
from pglab.nodes.node import Node
from pglab.replication.base import TABLES, System, add_history_key, lag_sample

CLUSTER = "pglab"
SCHEMA = f"_{CLUSTER}"
SET_ID = 1
PROVIDER_ID, SUBSCRIBER_ID = 1, 2


def conninfo(node: Node, dbname: str, from_node: Node | None = None) -> str:
    """libpq keywords for a program on ``from_node``'s host (default: ``node``'s own): the socket on the
    same host (trust there), else TCP to the data address with that host's passfile (PGPASSFILE in the
    program's environment). No password on any command line."""
    return node.dsn(dbname, from_host=(from_node or node).host)


class Slony(System):
    """Provider = Slony node 1 (set origin), subscriber = node 2."""

    name = "slony"
    debian_packages = ("slony1-2-bin", "postgresql-15-slony1-2")

    @classmethod
    def unavailable(cls, host: Host, bindir: str) -> str | None:
        for program in ("slonik", "slon"):
            if not host.which(program):
                return f"{program} is not on PATH on {host.name} (install {' '.join(cls.debian_packages)})"
        libdir = os.path.normpath(f"{bindir}/../lib")
        checks = {f"{libdir}/slony1_funcs.*.so": "the slony1_funcs server module",
                  "/usr/share/slony1/slony1_base.*.sql": "slony1's SQL scripts"}
        for pattern, what in checks.items():
            if host.is_local:
                found = bool(glob.glob(pattern))
            else:
                folder, name = os.path.split(pattern)  # the folder quoted, the file name's glob left to the shell
                found = host.run(["sh", "-c", f"ls {shlex.quote(folder)}/{name}"], check=False).exit_code == 0
            if not found:
                return f"{what} ({pattern}) is missing on {host.name} (install {' '.join(cls.debian_packages)})"
        return None

    # -- helpers --------------------------------------------------------------------------------
    def _conninfo(self, node: Node, from_node: Node | None = None) -> str:
        return conninfo(node, self.dbname, from_node)

    def _preamble(self) -> str:
        """Admin conninfos as seen from the provider's host, where slonik runs."""
        p = self.provider
        return (f"cluster name = {CLUSTER};\n"
                f"node {PROVIDER_ID} admin conninfo = '{self._conninfo(p, p)}';\n"
                f"node {SUBSCRIBER_ID} admin conninfo = '{self._conninfo(self.subscriber, p)}';\n")

    def slonik(self, script: str, timeout: float = 300) -> str:
        """Run a slonik script (preamble added) from stdin as the server user on the provider's host."""
        node = self.provider
        res = node.host.run(["slonik"], stdin=self._preamble() + script, as_user=node.user, timeout=timeout,
                            env=node.ws.libpq_env())
        return res.stdout + res.stderr

    # -- System ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Identical subscriber schema (empty tables), then the cluster, both paths and the set."""
        p, s = self.provider, self.subscriber
        s.host.run([s.bin("pgbench"), "-i", "-I", "dtp", self.dbname], env=s.pg_env(), timeout=300)
        add_history_key(s, self.dbname)
        pc, sc = self._conninfo(p, s), self._conninfo(s, p)  # each used by the other node's slon
        tables = "".join(
            f"set add table (set id = {SET_ID}, origin = {PROVIDER_ID}, id = {i}, "
            f"fully qualified name = 'public.{t}');\n" for i, t in enumerate(TABLES, start=1))
        self.slonik(
            f"init cluster (id = {PROVIDER_ID}, comment = 'pglab provider');\n"
            f"store node (id = {SUBSCRIBER_ID}, comment = 'pglab subscriber', event node = {PROVIDER_ID});\n"
            f"store path (server = {PROVIDER_ID}, client = {SUBSCRIBER_ID}, conninfo = '{pc}');\n"
            f"store path (server = {SUBSCRIBER_ID}, client = {PROVIDER_ID}, conninfo = '{sc}');\n"
            f"create set (id = {SET_ID}, origin = {PROVIDER_ID}, comment = 'pgbench tables');\n"
            + tables
            + f"set add sequence (set id = {SET_ID}, origin = {PROVIDER_ID}, id = 1, "
              "fully qualified name = 'public.pgbench_history_hid_seq');\n")

    def _start_slon(self, node: Node, node_id: int) -> Background:
        sync_ms = int(self.options.get("sync_interval_ms", 1000))
        timeout_ms = int(self.options.get("sync_interval_timeout_ms", 2000))
        return self.spawn(node, ["slon", "-s", str(sync_ms), "-t", str(timeout_ms), CLUSTER, self._conninfo(node)],
                          f"slon{node_id}")

    def start(self) -> None:
        """Both slons, ``subscribe set``, then wait for the copy (sl_setsync) and a full catch-up."""
        self._start_slon(self.provider, PROVIDER_ID)
        self._start_slon(self.subscriber, SUBSCRIBER_ID)
        self.slonik(f"subscribe set (id = {SET_ID}, provider = {PROVIDER_ID}, receiver = {SUBSCRIBER_ID}, "
                    "forward = no);\n")
        self.wait_initial_copy()

    def _copied(self) -> bool:
        """The subscriber committed the copy: its set is active and has a sync position."""
        rows = self.subscriber.query(
            f"select exists (select 1 from {SCHEMA}.sl_subscribe where sub_set = %s and sub_receiver = %s "
            f"and sub_active) and exists (select 1 from {SCHEMA}.sl_setsync where ssy_setid = %s)",
            (SET_ID, SUBSCRIBER_ID, SET_ID), dbname=self.dbname)
        return bool(rows[0][0])

    def caught_up(self) -> bool:
        """No change logged on the provider lies outside the last snapshot the subscriber applied."""
        rows = self.subscriber.query(f"select ssy_snapshot::text from {SCHEMA}.sl_setsync where ssy_setid = %s",
                                     (SET_ID,), dbname=self.dbname)
        if not rows:
            return False
        snap = rows[0][0]
        pending = " or ".join(
            f"exists (select 1 from {SCHEMA}.{log} where log_origin = {PROVIDER_ID} "
            f"and log_txid >= txid_snapshot_xmin(%(s)s::txid_snapshot) "
            f"and not txid_visible_in_snapshot(log_txid, %(s)s::txid_snapshot))" for log in ("sl_log_1", "sl_log_2"))
        return not self.provider.query(f"select {pending}", {"s": snap}, dbname=self.dbname)[0][0]  # type: ignore[arg-type]

    def lag(self) -> dict[str, float | None]:
        """sl_status on the provider: events the subscriber has not confirmed and their age."""
        rows = self.provider.query(
            f"select st_lag_num_events, extract(epoch from st_lag_time) from {SCHEMA}.sl_status "
            f"where st_origin = %s and st_received = %s", (PROVIDER_ID, SUBSCRIBER_ID), dbname=self.dbname)
        events, seconds = rows[0] if rows else (None, None)
        return lag_sample(lag_s=seconds, lag_events=events, events=True)

    def teardown(self) -> None:
        """Stop both slons (SIGTERM to their sessions: watchdog parent and worker)."""
        super().teardown()
