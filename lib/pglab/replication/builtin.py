"""PostgreSQL's built-in logical replication (publication + subscription).

Order of calls (see base.py): ``pgbench -i`` and ``add_history_key`` on the provider, then
``prepare()`` (settings, subscriber schema, publication), then ``start()`` (subscription and initial
copy). Never re-run ``pgbench -i`` on the provider once the publication exists: it drops and recreates
the tables, which silently leaves them out of the publication.

The helpers here (settings with a restart only when needed, the subscriber schema, polling) are shared
with pglogical.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from psycopg import sql

from pglab.errors import ProcessError
from pglab.nodes.node import Node
from pglab.replication.base import TABLES, System, add_history_key, lag_sample

PUBLICATION = "pglab_pub"
SUBSCRIPTION = "pglab_sub"


def apply_settings(node: Node, settings: dict[str, Any]) -> None:
    """Write ``settings``; restart only if one of them needs it, else reload (saves a restart per node).

    pg_file_settings re-reads the files at query time and flags a postmaster-level parameter whose
    value differs from the running one ("setting could not be applied"), so no reload race is involved.
    """
    node.configure(settings)
    if not node.is_running():
        return
    pending = node.query("select name from pg_file_settings where error is not null and not applied")
    if pending:
        node.restart()
    else:
        node.reload()


def dsn(node: Node, dbname: str) -> str:
    """libpq DSN the other side's server processes use: TCP to ``node``'s data address. No password and
    no passfile path: each server takes its own host's passfile from its environment (PGPASSFILE)."""
    return node.dsn(dbname)


def ensure_database(node: Node, dbname: str) -> None:
    if not node.query("select 1 from pg_database where datname = %s", (dbname,)):
        node.query(sql.SQL("create database {}").format(sql.Identifier(dbname)).as_string(None))


def subscriber_schema(node: Node, dbname: str) -> None:
    """Empty pgbench tables with the provider's definitions: ``pgbench -i -I dtp`` plus the history key."""
    ensure_database(node, dbname)
    node.host.run([node.bin("pgbench"), "-i", "-I", "dtp", dbname], env=node.pg_env(), timeout=300)  # on its host
    add_history_key(node, dbname)


def wait_for(check: Callable[[], Any], timeout: float, node: Node, what: str, poll_s: float = 0.1) -> Any:
    """Poll ``check`` until it returns something other than None; ProcessError(timed_out) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            raise ProcessError(node.host.name, what, None, "", node.log_tail(), timed_out=True)
        time.sleep(poll_s)


def lsn_reached(provider: Node, dbname: str, slot_where: str, args: tuple[Any, ...]) -> bool:
    """Provider's WAL position, then the slot's confirmed_flush_lsn: caught up with all commits so far.

    Both are read in one statement on the provider, in that order (pg_current_wal_lsn is evaluated
    first), so anything committed before the call is covered. An idle apply worker confirms up to the
    end of WAL after a walsender keepalive, so this also becomes true when nothing is replicated.
    """
    rows = provider.query(
        "with cur as materialized (select pg_current_wal_lsn() as lsn) "
        f"select coalesce(bool_and(s.confirmed_flush_lsn >= cur.lsn), false) from cur, pg_replication_slots s "
        f"where {slot_where}", args, dbname=dbname)
    return bool(rows and rows[0][0])


def slot_lag(provider: Node, dbname: str, slot_where: str, args: tuple[Any, ...]) -> dict[str, float | None]:
    """Bytes between the provider's WAL position and the slot, and the walsender's replay_lag."""
    rows = provider.query(
        "select pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), "
        "extract(epoch from r.replay_lag) from pg_replication_slots s "
        "left join pg_stat_replication r on r.pid = s.active_pid "
        f"where {slot_where}", args, dbname=dbname)
    return lag_sample(*rows[0]) if rows else lag_sample()


class BuiltinLogical(System):
    """Publication of the four pgbench tables, one subscription; caught up when its slot confirms."""

    name = "builtin"

    def prepare(self) -> None:
        """wal_level=logical on both, empty tables on the subscriber, the publication on the provider."""
        for node in (self.provider, self.subscriber):
            apply_settings(node, {"wal_level": "logical"})
        subscriber_schema(self.subscriber, self.dbname)
        self.provider.query(f"drop publication if exists {PUBLICATION}", dbname=self.dbname)
        self.provider.query(f"create publication {PUBLICATION} for table {', '.join(TABLES)}", dbname=self.dbname)

    def start(self, timeout: float = 120) -> None:
        """Create the subscription (copies the tables) and wait until every table is in state 'r'."""
        self.subscriber.query(
            f"create subscription {SUBSCRIPTION} connection '{dsn(self.provider, self.dbname)}' "
            f"publication {PUBLICATION}", dbname=self.dbname)

        def ready() -> bool | None:
            states = self.subscriber.query(
                "select r.srsubstate from pg_subscription_rel r join pg_subscription s on s.oid = r.srsubid "
                "where s.subname = %s", (SUBSCRIPTION,), dbname=self.dbname)
            return True if len(states) == len(TABLES) and all(st == "r" for (st,) in states) else None

        wait_for(ready, timeout, self.subscriber, f"{self.name}: initial copy of {SUBSCRIPTION}")

    def caught_up(self) -> bool:
        return lsn_reached(self.provider, self.dbname, "s.slot_name = %s", (SUBSCRIPTION,))

    def lag(self) -> dict[str, float | None]:
        return slot_lag(self.provider, self.dbname, "s.slot_name = %s", (SUBSCRIPTION,))

    def teardown(self) -> None:
        """Drop the subscription (and with it the provider's slot); a no-op when it does not exist."""
        super().teardown()
        s = self.subscriber
        if not s.is_running():
            return
        if not s.query("select 1 from pg_database where datname = %s", (self.dbname,)):
            return
        if not s.query("select 1 from pg_subscription where subname = %s", (SUBSCRIPTION,), dbname=self.dbname):
            return
        try:
            s.query(f"drop subscription {SUBSCRIPTION}", dbname=self.dbname)
        except Exception:  # provider unreachable: detach from the slot so that the drop succeeds locally
            s.query(f"alter subscription {SUBSCRIPTION} disable", dbname=self.dbname)
            s.query(f"alter subscription {SUBSCRIPTION} set (slot_name = none)", dbname=self.dbname)
            s.query(f"drop subscription {SUBSCRIPTION}", dbname=self.dbname)
