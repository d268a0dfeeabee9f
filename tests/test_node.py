"""Nodes on real clusters, locally and through SSH: init, standby, sync state, auth, settings."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from conftest import postgres_pids
from pglab.errors import QueryTimeout, UserError
from pglab.hosts.inventory import Inventory
from pglab.nodes.target import ServerTarget
from pglab.runs.session import session

pytestmark = pytest.mark.servers


@pytest.mark.parametrize("placed", ["local", "ssh", "lab"], indirect=True)
def test_primary_with_synchronous_standby(placed: tuple[Inventory, tuple[str, str, str]]) -> None:
    """Lab: primary on lab1, standby on lab2 (pg_basebackup and the walreceiver over TCP between them)."""
    inventory, (where, standby_host, _) = placed
    with session(inventory) as s:
        s.deploy.open([where, standby_host])
        primary = s.deploy.node("primary", where, {"synchronous_standby_names": "FIRST 1 (sb1)"})
        primary.start()
        assert primary.host.run(["id", "-un"], as_user=primary.user).stdout.strip() != "root"
        standby = s.deploy.standby(primary, "sb1", standby_host)
        standby.start()
        assert primary.wait_for_sync_state("sb1") == "sync"
        primary.query("create table t (x int primary key)")
        primary.query("insert into t select generate_series(1, 100)")
        primary.wait_for_replay(standby)
        assert standby.query("select count(*) from t") == [(100,)]
        snap = standby.snapshot_settings()
        assert snap["in_recovery"] is True and snap["server_version_num"] >= 150000
        assert "primary_conninfo" in snap["settings"]
        # the password is in no setting and no command: passfile paths only
        assert primary.ws.password not in str(snap) and primary.ws.password not in str(primary.describe())
        # socket dir closed to others; TCP refuses a client without the password
        mode = primary.host.run(["stat", "-c", "%a", primary.ws.socket_dir]).stdout.strip()
        assert mode == "700"
        if where == "local":
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(host="127.0.0.1", port=primary.port, user="pglab", dbname="postgres",
                                passfile="/dev/null", connect_timeout=5)
            ok = psycopg.connect(host="127.0.0.1", port=primary.port, user="pglab", dbname="postgres",
                                 passfile=primary.ws.local_passfile, connect_timeout=5)
            assert ok.execute("select 1").fetchone() == (1,)
            ok.close()
        assert standby.host.name == standby_host
        bases = [primary.ws.base, standby.ws.base]
    for base in bases:
        assert not postgres_pids(base)  # the sshd and lab "remotes" run on this machine too: same check
        assert not primary.host.exists(base)  # removed after success (one filesystem for all hosts here)


def test_threads_get_one_workspace_per_host_and_one_password(inventory: Inventory) -> None:
    """Pairs are set up in threads: each host gets one workspace, every workspace the run's one password
    (session 15's race made two, and nodes of the two refused each other's password)."""
    names = ["local", "ssh"] * 3
    with session(inventory) as s:
        start = threading.Barrier(len(names))

        def make(name: str) -> tuple[str, int, str, int]:
            start.wait()
            ws = s.deploy.workspace(name)
            return name, id(ws), ws.password, s.deploy._port(name)

        with ThreadPoolExecutor(len(names)) as pool:
            made = list(pool.map(make, names))
        assert len({(name, ws) for name, ws, _, _ in made}) == 2
        assert len({password for _, _, password, _ in made}) == 1
        assert len({(name, port) for name, _, _, port in made}) == len(names)
        assert set(s.deploy.workspaces) == {"local", "ssh"}


def test_health_waits_for_a_server_going_down_instead_of_calling_it_running(inventory: Inventory) -> None:
    """A server shutting down still runs (``pg_ctl status`` says so) while it refuses connections: the
    point that failed on it was followed by another failed point when health() read that as running."""
    with session(inventory) as s:
        node = s.deploy.node("primary", "local").start()
        held = node.connect()  # a smart shutdown waits for this client; meanwhile new connections are refused
        node.host.run([node.bin("pg_ctl"), "-D", node.data_dir, "-m", "smart", "-W", "stop"], as_user=node.user)
        assert node.is_running()
        threading.Timer(1.5, held.close).start()
        t0 = time.monotonic()
        problem = s.health()
        assert problem and "node primary on host local is not running any more" in problem, problem
        assert 1.0 < time.monotonic() - t0 < 15
        node.up = False  # stopped from outside: the session has nothing left to stop


def test_cleanup_after_an_exception(inventory: Inventory) -> None:
    """A commit with a dead synchronous standby fails at its deadline; cleanup then stops everything."""
    t0 = time.monotonic()
    with pytest.raises(QueryTimeout, match="primary.*IPC:SyncRep") as err:
        with session(inventory) as s:
            primary = s.deploy.node("primary", "local", {"synchronous_standby_names": "FIRST 1 (sb1)"})
            primary.start()
            standby = s.deploy.standby(primary, "sb1")
            standby.start()
            primary.wait_for_sync_state("sb1")
            standby.stop()  # a dead synchronous standby: without a client deadline this commit waits forever
            t0 = time.monotonic()
            primary.query("create table t (x int)", timeout=3)
    assert time.monotonic() - t0 < 3 + 4
    assert "synchronous standby" in str(err.value) and err.value.timed_out
    # cleanup resets synchronous_standby_names first and stops everything
    assert not postgres_pids(primary.ws.base)
    assert primary.host.exists(primary.log_file)  # evidence kept on failure
    primary.ws.remove()


def test_a_server_given_by_connection_string_is_a_target(inventory: Inventory) -> None:
    """What the cloud study will do: a server pglab did not start, reached through the client's passfile."""
    with session(inventory) as s:
        node = s.deploy.node("n", "local")
        node.start()
        target = ServerTarget.from_dsn("managed", f"host=127.0.0.1 port={node.port} user=pglab dbname=postgres "
                                                  "sslmode=prefer")
        client = s.deploy.client("local")
        env = client.env(target)
        assert env["PGPASSFILE"] == client.ws.passfile and env["PGHOST"] == "127.0.0.1"
        res = client.host.run([client.bin("psql"), "-XAtc", "select inet_client_addr() is not null"], env=env)
        assert res.stdout.strip() == "t"  # over TCP, with the run's password from the client host's passfile
        assert "passfile" not in target.describe() and target.describe()["port"] == str(node.port)
    with pytest.raises(UserError, match="holds a password"):
        ServerTarget.from_dsn("bad", "host=db.example.net password=hunter2")
    with pytest.raises(UserError, match="unsupported connection keywords keepalives"):
        ServerTarget.from_dsn("bad", "host=db.example.net keepalives=1")
    with pytest.raises(UserError, match="not a libpq connection string"):
        ServerTarget.from_dsn("bad", "host=db port")
