"""The interface every replication system implements (DESIGN.md principle 4).

A system replicates the pgbench tables of ``provider`` (a started primary ``Node``) to
``subscriber`` (a started ``Node``; the streaming system turns it into a physical standby). Daemons
(slon, pgqd, londiste workers) are started through ``Host.start`` and listed by ``daemons()`` so that
the run manifest and ``pglab cleanup`` can find them.

Fairness: every system gets identical table definitions; ``add_history_key`` gives pgbench_history
the same ``hid bigserial primary key`` everywhere (pgbench names its insert columns, so it keeps
working), because Slony, Londiste and pglogical's default set need a primary key.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pglab.errors import ProcessError
from pglab.hosts.base import Background, Host, stop_all
from pglab.nodes import cpu_quota
from pglab.nodes.node import Node

TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
KEY_COLUMN = "hid"
MARKER_BID = 1  # the pgbench_branches row whose filler carries catch-up markers (see System.mark)


def add_history_key(node: Node, dbname: str) -> None:
    """The same primary key on pgbench_history for every system (see module docstring)."""
    node.query(f"alter table pgbench_history add column if not exists {KEY_COLUMN} bigserial primary key",
               dbname=dbname)


# pgbench's transaction updates one account, named in the history row it inserts: after a run that began
# with an empty history, only those accounts can have changed
TOUCHED_ACCOUNTS = "pgbench_accounts t where t.aid in (select h.aid from pgbench_history h)"


def table_checksums(node: Node, dbname: str, touched: bool = False) -> dict[str, dict[str, Any]]:
    """Row count and an order-independent checksum of every replicated table; with ``touched``, of
    pgbench_accounts only the rows the run's history names (a second instead of a few ms at scale 10)."""
    out = {}
    for t in TABLES:
        source = TOUCHED_ACCOUNTS if touched and t == "pgbench_accounts" else f"{t} t"
        count, digest = node.query(
            f"select count(*), coalesce(sum(hashtext(t::text)::bigint), 0) from {source}", dbname=dbname)[0]
        out[t] = {"rows": int(count), "checksum": int(digest)}
    return out


def lag_sample(lag_bytes: Any = None, lag_s: Any = None, lag_events: Any = None, *,
               events: bool = False) -> dict[str, float | None]:
    """One row for the lag CSV from query values (Decimal or None); ``events`` adds the events column."""
    def num(v: Any) -> float | None:
        return None if v is None else float(v)

    row = {"lag_bytes": num(lag_bytes), "lag_s": num(lag_s)}
    return {**row, "lag_events": num(lag_events)} if events else row


@dataclass
class Consistency:
    consistent: bool
    provider: dict[str, dict[str, Any]]
    subscriber: dict[str, dict[str, Any]]
    mismatched: list[str] = field(default_factory=list)
    scope: str = "whole tables"


@dataclass
class System(ABC):
    """One replication system between two nodes. Subclasses set ``name`` and ``debian_packages``."""

    provider: Node
    subscriber: Node
    dbname: str = "bench"
    options: dict[str, Any] = field(default_factory=dict)
    processes: list[Background] = field(default_factory=list)
    # Called with every daemon as soon as it is started (the Session lists it in the run manifest,
    # so that a SIGTERM between two daemon starts still stops the first one).
    on_process: Callable[[Background], Any] | None = None

    name = "abstract"
    debian_packages: tuple[str, ...] = ()

    @classmethod
    def unavailable(cls, host: Host, bindir: str) -> str | None:
        """None when the system can run on ``host`` (servers from ``bindir``), else why it is skipped.

        Checked on files and programs only, before any server starts.
        """
        return None

    def spawn(self, node: Node, argv: list[str], label: str) -> Background:
        """Start a daemon on ``node``'s host as the server user, logs in that host's workspace, with that
        host's passfile (and TLS settings); tracked before anything else runs. Under an emulated machine per node
        it runs on the node's core and in its CPU share (``emulate``): slon, pgqd and londiste's workers are part
        of the machine they serve, as on the article's."""
        base = f"{node.ws.base}/{label}"
        argv = cpu_quota.confined(argv, node.cpus, node.cpu_group)
        proc = node.host.start(argv, f"{base}.out", f"{base}.err", as_user=node.user, env=node.ws.libpq_env())
        self.processes.append(proc)
        if self.on_process:
            self.on_process(proc)
        return proc

    @abstractmethod
    def prepare(self) -> None:
        """Both sides: extensions, settings (restart if needed), schema on the subscriber, keys."""

    @abstractmethod
    def start(self) -> None:
        """Start replicating the pgbench tables and wait until the initial copy is complete."""

    @abstractmethod
    def caught_up(self) -> bool:
        """True when the subscriber has applied everything the provider had committed at the call."""

    def lag(self) -> dict[str, float | None]:
        """One sample for the lag CSV: {"lag_bytes": ..., "lag_s": ...} (None where not known)."""
        return lag_sample()

    def mark(self, token: str, timeout: float | None = None) -> None:
        """Commit a marker on the provider: one update of pgbench_branches, replicated like any other.

        Every system here applies transactions in the provider's commit order, so once the marker is
        visible on the subscriber everything committed before it has been applied there. The same
        test for every system, measured at *apply* (the systems' own confirmations can trail it: the
        built-in apply worker reports flushed positions about once a second).

        The commit gives up after ``timeout`` (default: the provider's ``query_timeout_s``) with
        QueryTimeout: a provider with a dead synchronous standby would otherwise wait forever.
        """
        self.provider.query(f"update pgbench_branches set filler = %s where bid = {MARKER_BID}", (token,),
                            dbname=self.dbname, timeout=timeout)

    def applied(self, token: str) -> bool:
        """True once the subscriber shows the marker ``token`` (see ``mark``)."""
        return bool(self.subscriber.query(
            f"select 1 from pgbench_branches where bid = {MARKER_BID} and filler = %s::char(88)", (token,),
            dbname=self.dbname))

    def wait_caught_up(self, timeout: float, poll_s: float = 0.05) -> float:
        """Seconds until caught up (resolution ``poll_s``); ProcessError(timed_out) after ``timeout``."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.caught_up():
                return time.monotonic() - start
            time.sleep(poll_s)
        raise ProcessError(self.provider.host.name, f"{self.name}: wait for catch-up", None, "", "", timed_out=True)

    def _copied(self) -> bool:
        """True when the initial copy is complete (systems with their own copy phase override this)."""
        return True

    def _check_daemons(self) -> None:
        """A daemon that died makes waiting pointless: fail with the tail of its logs."""
        for b in self.processes:
            if not b.running():
                raise ProcessError(b.host.name, b.command, None, "", self._logs_tail())

    def _logs_tail(self) -> str:
        return "\n".join(b.host.run(["tail", "-n", "15", b.stderr_path], check=False).stdout for b in self.processes)

    def wait_initial_copy(self) -> None:
        """Wait for ``_copied`` (daemons watched), then for catch-up, within ``copy_timeout_s``."""
        deadline = time.monotonic() + float(self.options.get("copy_timeout_s", 300))
        while not self._copied():
            self._check_daemons()
            if time.monotonic() > deadline:
                raise ProcessError(self.provider.host.name, f"{self.name}: wait for the initial copy", None, "",
                                   self._logs_tail(), timed_out=True)
            time.sleep(0.2)
        self.wait_caught_up(max(1.0, deadline - time.monotonic()))

    def verify(self, touched: bool = False) -> Consistency:
        """Both nodes' checksums, taken at once (each query is one backend's work). ``touched`` checks of
        pgbench_accounts only what the last run changed: right after a point, when the whole tables were
        checked at set-up and are checked again when the pair closes."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            on_provider = pool.submit(table_checksums, self.provider, self.dbname, touched)
            p, s = on_provider.result(), table_checksums(self.subscriber, self.dbname, touched)
        bad = [t for t in TABLES if p[t] != s[t]]
        return Consistency(not bad, p, s, bad, "touched rows" if touched else "whole tables")

    def daemons(self) -> list[dict[str, Any]]:
        return [{"host": b.host.name, "pid": b.pid, "command": b.command} for b in self.processes]

    def teardown(self) -> None:
        """Stop daemons and replication; safe to call twice and after a failed start."""
        stop_all(self.processes)
        self.processes.clear()
