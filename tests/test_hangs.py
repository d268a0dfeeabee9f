"""No client hangs: every write pglab makes on a primary whose synchronous standby died ends at its deadline.

A commit waiting for a synchronous standby ignores statement_timeout (the server turns it off before
the wait), so only the client can end it. Each library path that commits on the primary is tried
with a short deadline, locally and through SSH (tunnel, TCP keepalives): each must raise QueryTimeout
within the deadline plus a margin, naming the node and what the commit was waiting for.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import postgres_pids
from pglab.errors import ProcessError, QueryTimeout
from pglab.hosts.inventory import Inventory
from pglab.nodes.connection import CANCEL_GRACE_S, TCP_KEEPALIVE
from pglab.nodes.node import Node
from pglab.replication.builtin import BuiltinLogical
from pglab.runs.session import session
from pglab.workloads.catchup import run_and_catch_up

pytestmark = pytest.mark.servers

DEADLINE = 3.0
MARGIN = 4.0  # the diagnosis and the cancel; a hang would blow far past it
DB = "bench"
SYNC_NAMES = "FIRST 1 (standby1)"


def kill_postmaster(node: Node) -> None:
    """SIGKILL the node's postmaster, by the PID in its postmaster.pid (that PID only)."""
    pid = int(node.host.read_text(f"{node.data_dir}/postmaster.pid").splitlines()[0])
    node.host.run(["kill", "-KILL", str(pid)])
    deadline = time.monotonic() + 10
    while node.host.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not node.host.pid_alive(pid)


def assert_times_out(call, node: Node, statement: str) -> QueryTimeout:
    """``call()`` raises QueryTimeout within DEADLINE + MARGIN, naming the node and the SyncRep wait."""
    t0 = time.monotonic()
    with pytest.raises(QueryTimeout) as info:
        call()
    elapsed = time.monotonic() - t0
    assert DEADLINE - 0.2 <= elapsed < DEADLINE + MARGIN, elapsed
    err = info.value
    text = str(err)
    assert isinstance(err, ProcessError) and err.timed_out  # the studies' except ProcessError catches it
    assert f"node {node.name} (host {node.host.name}, port {node.port})" in text, text
    assert statement in text and f"{DEADLINE:g} s" in text, text
    assert "waiting for a synchronous standby to confirm (IPC:SyncRep" in text, text
    assert f"synchronous_standby_names = '{SYNC_NAMES}'" in text, text
    return err


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_commits_waiting_for_a_dead_sync_standby_end_at_the_deadline(inventory: Inventory, where: str) -> None:
    with session(inventory) as s:
        primary = s.deploy.node("primary", where, {"synchronous_standby_names": SYNC_NAMES})
        primary.start()
        base = primary.ws.base
        standby = s.deploy.standby(primary, "standby1")
        standby.start()
        assert primary.wait_for_sync_state("standby1") == "sync"
        primary.query(f"create database {DB}")
        primary.host.run([primary.bin("pgbench"), "-i", "-s", "1", DB], env=primary.pg_env())
        with primary.connect(DB) as conn:  # TCP gets keepalives (remote nodes), a Unix socket does not
            params = conn.info.get_parameters()
            assert (params.get("tcp_user_timeout") == str(TCP_KEEPALIVE["tcp_user_timeout"])) == (where == "ssh")
            assert (params.get("keepalives") == "1") == (where == "ssh")

        kill_postmaster(standby)

        # Node.query with a per-call deadline
        assert_times_out(lambda: primary.query("create database x", timeout=DEADLINE), primary, "create database x")
        # Node.query with the node's default deadline; the cancelled connection was replaced
        primary.query_timeout_s = DEADLINE
        assert_times_out(lambda: primary.query("truncate pgbench_history", dbname=DB), primary,
                         "truncate pgbench_history")
        # the logical_replication marker, committed on the provider after a run: within the catch-up
        # deadline, not the node's (longer) default
        primary.query_timeout_s = 60
        system = BuiltinLogical(primary, standby, dbname=DB)
        err = assert_times_out(lambda: run_and_catch_up(
            system, lambda: primary.host.start(["true"], f"{base}/w.out", f"{base}/w.err"), lag_csv=None,
            lag_interval_s=0, poll_s=0.05, run_timeout_s=30, catchup_timeout_s=DEADLINE, token="pglab marker"),
            primary, "update pgbench_branches set filler")
        assert "committed locally" in str(err)
        # a connection of its own, in a transaction: the commit is guarded too
        def transaction() -> None:
            with primary.connect(DB, autocommit=False, timeout=DEADLINE) as conn:
                conn.execute("insert into pgbench_history (tid, bid, aid, delta) values (1, 1, 1, 1)")
        assert_times_out(transaction, primary, "commit")
        # the study's fresh-session read (set_level) still works: reads do not wait for the standby
        assert primary.query_fresh("show synchronous_commit", dbname=DB) == [("on",)]
        assert primary.query("select 1") == [(1,)]
    assert not postgres_pids(base)
    assert not primary.host.exists(base)


@pytest.fixture
def node(inventory: Inventory):
    """One started node in a session; after the test the session has stopped it."""
    with session(inventory) as s:
        n = s.deploy.node("n", "local")
        n.start()
        base = n.ws.base
        yield n
    assert not postgres_pids(base)


def test_a_long_per_call_deadline_outlasts_the_server_backstop(node: Node) -> None:
    """A per-call timeout above the node's default moves the server's statement_timeout out of the way."""
    node.query_timeout_s = 1.0
    assert node.query("select pg_sleep(3.5)", timeout=10) == [("",)]
    assert node.query("show statement_timeout") == [("3s",)]  # back to the default backstop
    t0 = time.monotonic()
    with pytest.raises(QueryTimeout, match="pg_sleep") as info:
        node.query("select pg_sleep(30)")
    assert time.monotonic() - t0 < 1 + MARGIN
    assert "it was running" in str(info.value) or "Timeout:PgSleep" in str(info.value)


def test_a_backend_that_ignores_the_cancel_is_cut_off(node: Node) -> None:
    """When the cancel does not help (a stopped backend here, a vanished host in real life) the socket is cut."""
    node.query_timeout_s = 2.0
    assert node.query("select 1") == [(1,)]
    pid = node._conn.info.backend_pid  # our own server's backend, by PID
    deadline = time.monotonic() + 10  # stopped only once it waits for our next query: else, on a busy
    while time.monotonic() < deadline:  # machine, it may be stopped before it reports that wait
        if node.query_fresh(f"select wait_event from pg_stat_activity where pid = {pid}") == [("ClientRead",)]:
            break
        time.sleep(0.05)
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(QueryTimeout, match="select 2.*ClientRead") as info:
            node.query("select 2")
        assert time.monotonic() - t0 < 2.0 + CANCEL_GRACE_S + MARGIN
        assert isinstance(info.value.__cause__, Exception)  # the cut connection's own error
    finally:
        os.kill(pid, signal.SIGCONT)
    assert node.query("select 3") == [(3,)]  # a fresh session
