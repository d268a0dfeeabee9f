"""Londiste 3 on PgQ: a root node (provider) queues row changes, a leaf worker replays them.

Where things run (Londiste's documentation: a worker per node, next to its database; pgqd next to
the queue's database): pgqd and the root worker on the provider's host, the leaf worker on the
subscriber's host, each with its ini file, log and pidfile in that host's workspace, reaching its own
database over the socket. Node locations stored in PgQ (used by the other node's worker) are TCP to
the data address, with the worker host's passfile from its environment.

Recipe and pitfalls (checked on PostgreSQL 15 with Debian 12's packages): every table needs a primary
key (``add_history_key``); pgqd must run to tick the root's queue; the queue's default 60 s idle
ticker makes the initial copy take minutes, so ``ticker_idle_period`` is set to 1 second right
after create-root. python3-londiste lives in Debian's /usr/bin/python3, not in our venv: the
``londiste`` command is always run as a subprocess, never imported. Daemons run in the foreground
(no ``-d``) so that ``Background`` tracks them; the copy processes the leaf worker spawns daemonize
themselves (new session), so teardown also stops them through their pidfiles.

Catch-up is decided from PgQ's own snapshots: the leaf's consumer position on the provider
(``sub_last_tick``) only advances after the leaf committed that batch, and the tick's
``tick_snapshot`` tells which transactions the batches up to it contained. ``caught_up`` is true
when no data event of the replicated tables (committed when asked) lies outside that snapshot.
"""

from __future__ import annotations

import shlex

from pglab.hosts.base import Host
from pglab.nodes.node import Node
from pglab.nodes.workspace import SUPERUSER
from pglab.replication.base import TABLES, System, add_history_key, lag_sample

QUEUE = "pglab_q"
ROOT_JOB, LEAF_JOB = "pglab_root", "pglab_leaf"
ROOT_NODE, LEAF_NODE = "root_node", "leaf_node"
FQ_TABLES = tuple(f"public.{t}" for t in TABLES)


def conninfo(node: Node, dbname: str, from_node: Node | None = None) -> str:
    """libpq keywords for a program on ``from_node``'s host (default: the node's own): the socket there,
    else TCP to the data address (the program's PGPASSFILE). No password on any command line."""
    return node.dsn(dbname, from_host=(from_node or node).host)


def location(node: Node, dbname: str) -> str:
    """A node's location as PgQ stores it for the *other* nodes' workers: TCP to its data address."""
    return node.dsn(dbname)


class Londiste(System):
    """Provider = Londiste root node, subscriber = leaf node; one queue, the four pgbench tables."""

    name = "londiste"
    debian_packages = ("postgresql-15-pgq3", "pgqd", "python3-londiste", "postgresql-15-londiste-sql")

    @classmethod
    def unavailable(cls, host: Host, bindir: str) -> str | None:
        for program in ("londiste", "pgqd"):
            if not host.which(program):
                return (f"{program} is not on PATH on {host.name} "
                        f"(install {' '.join(cls.debian_packages)})")
        return None

    # -- files ----------------------------------------------------------------------------------
    def _node(self, role: str) -> Node:
        """The node whose host runs ``role``'s worker: root = provider, leaf = subscriber."""
        return self.provider if role == "root" else self.subscriber

    def _dir(self, role: str) -> str:
        return self._node(role).ws.base

    def _ini(self, role: str) -> str:
        return f"{self._dir(role)}/londiste_{role}.ini"

    @property
    def _pgqd_ini(self) -> str:
        return f"{self._dir('root')}/pgqd.ini"

    def _write_configs(self) -> None:
        p = self.provider
        loop_delay = float(self.options.get("loop_delay_s", 1.0))
        copies = int(self.options.get("parallel_copies", len(TABLES)))  # one table at a time is minutes
        for role, job in (("root", ROOT_JOB), ("leaf", LEAF_JOB)):
            node, d = self._node(role), self._dir(role)
            text = (f"[londiste]\njob_name = {job}\ndb = {conninfo(node, self.dbname)}\nqueue_name = {QUEUE}\n"
                    f"logfile = {d}/londiste_{role}.log\npidfile = {d}/londiste_{role}.pid\n"
                    f"loop_delay = {loop_delay}\nparallel_copies = {copies}\n")
            node.host.write_text(self._ini(role), text, 0o600, owner=node.user)
        text = (f"[pgqd]\nbase_connstr = host={p.ws.socket_dir} port={p.port} user={SUPERUSER}\n"
                f"initial_database = {self.dbname}\ndatabase_list = {self.dbname}\n"
                f"logfile = {self._dir('root')}/pgqd.log\npidfile = {self._dir('root')}/pgqd.pid\n")
        p.host.write_text(self._pgqd_ini, text, 0o600, owner=p.user)

    def londiste(self, role: str, *args: str, timeout: float = 300, check: bool = True) -> str:
        """Run one ``londiste <ini> ...`` command as the server user on ``role``'s host; its output."""
        n = self._node(role)
        res = n.host.run(["londiste", self._ini(role), *args], as_user=n.user, timeout=timeout, check=check,
                         env=n.ws.libpq_env())
        return res.stdout + res.stderr

    # -- System ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Identical subscriber schema (empty tables), configs, root and leaf nodes, table membership."""
        p, s = self.provider, self.subscriber
        s.host.run([s.bin("pgbench"), "-i", "-I", "dtp", self.dbname], env=s.pg_env(), timeout=300)
        add_history_key(s, self.dbname)
        self._write_configs()
        self.londiste("root", "create-root", ROOT_NODE, location(p, self.dbname))
        # the default 60 s idle ticker would stretch the initial copy to minutes (153 s measured here)
        p.query("select pgq.set_queue_config(%s, 'ticker_idle_period', %s)",
                (QUEUE, self.options.get("ticker_idle_period", "1 second")), dbname=self.dbname)
        max_lag = self.options.get("ticker_max_lag")
        if max_lag:
            p.query("select pgq.set_queue_config(%s, 'ticker_max_lag', %s)", (QUEUE, max_lag), dbname=self.dbname)
        self.londiste("leaf", "create-leaf", LEAF_NODE, location(s, self.dbname),
                      f"--provider={conninfo(p, self.dbname, s)}")
        self.londiste("root", "add-table", *FQ_TABLES)
        self.londiste("leaf", "add-table", *FQ_TABLES)

    def start(self) -> None:
        """pgqd, root and leaf workers in the foreground; wait until every table is 'ok' and caught up."""
        self.spawn(self.provider, ["pgqd", self._pgqd_ini], "pgqd")
        self.spawn(self.provider, ["londiste", self._ini("root"), "worker"], "londiste_root")
        self.spawn(self.subscriber, ["londiste", self._ini("leaf"), "worker"], "londiste_leaf")
        self.wait_initial_copy()

    def _copied(self) -> bool:
        rows = self.subscriber.query("select table_name, local, merge_state from londiste.get_table_list(%s)",
                                     (QUEUE,), dbname=self.dbname)
        done = {name for name, local, state in rows if local and state == "ok"}
        return set(FQ_TABLES) <= done

    def _logs_tail(self) -> str:
        files = [("root", "pgqd.log"), ("root", "londiste_root.log"), ("leaf", "londiste_leaf.log")]
        return "\n".join(self._node(role).host.run(["tail", "-n", "15", f"{self._dir(role)}/{f}"], check=False).stdout
                         for role, f in files)

    def caught_up(self) -> bool:
        """No data event for our tables lies outside the snapshot of the leaf's last finished tick."""
        rows = self.provider.query(
            "select q.queue_data_pfx, t.tick_snapshot::text from pgq.queue q "
            "join pgq.consumer c on c.co_name = %s "
            "join pgq.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id "
            "join pgq.tick t on t.tick_queue = q.queue_id and t.tick_id = s.sub_last_tick "
            "where q.queue_name = %s", (LEAF_JOB, QUEUE), dbname=self.dbname)
        if not rows:
            return False
        table, snap = rows[0]
        pending = self.provider.query(
            f"select exists (select 1 from {table} where ev_txid >= txid_snapshot_xmin(%(s)s::txid_snapshot) "
            "and not txid_visible_in_snapshot(ev_txid, %(s)s::txid_snapshot) and ev_extra1 = any(%(t)s))",
            {"s": snap, "t": list(FQ_TABLES)}, dbname=self.dbname)  # type: ignore[arg-type]
        return not pending[0][0]

    def lag(self) -> dict[str, float | None]:
        """pgq.get_consumer_info for the leaf: age of its last tick and events not yet processed."""
        rows = self.provider.query("select extract(epoch from lag), pending_events "
                                   "from pgq.get_consumer_info(%s, %s)", (QUEUE, LEAF_JOB), dbname=self.dbname)
        seconds, events = rows[0] if rows else (None, None)
        return lag_sample(lag_s=seconds, lag_events=events, events=True)

    def teardown(self) -> None:
        """Ask the workers and pgqd to stop (SIGINT via pidfile), then stop their sessions and copies."""
        p = self.provider
        if self.processes:
            for role in ("leaf", "root"):
                self.londiste(role, "-s", timeout=30, check=False)
            p.host.run(["pgqd", "-s", self._pgqd_ini], as_user=p.user, timeout=30, check=False)
        super().teardown()
        # copy processes daemonize into their own sessions: stop any left by pidfile (our files only)
        for role in ("leaf", "root"):
            script = (f"for f in {shlex.quote(self._dir(role))}/londiste_*.pid.copy.*; do [ -f \"$f\" ] || continue; "
                      "pid=$(cat \"$f\"); [ -n \"$pid\" ] && kill -TERM \"$pid\" 2>/dev/null; done; true")
            self._node(role).host.run(["sh", "-c", script], check=False)
