"""A managed database, emulated: a server this test starts outside pglab (TLS required, scram-sha-256 only, a
least-privilege role, a database not named postgres, no pg_stat_statements), measured end to end by
cloud_providers. pglab must never attempt what the role may not do, must name what it could not read, and
its connection preflight must count what the tools really open (measured here against the real server)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import yaml
from conftest import REPO, workspaces
from pglab.errors import PglabError, PreflightError
from pglab.hosts import tls
from pglab.hosts.base import Result
from pglab.hosts.inventory import Inventory
from pglab.hosts.local import LocalHost
from pglab.nodes import privileges, sql_guard
from pglab.studies.cloud_providers import collect, targets
from pglab.userfiles import FileError
from pglab.workloads import sysbench, waits

pytestmark = pytest.mark.servers
BIN = "/usr/lib/postgresql/15/bin"
SMOKE = yaml.safe_load((REPO / "params/cloud_providers.yaml").read_text())["profiles"]["smoke"]
MAX_CONNECTIONS, RESERVED = 20, 3  # a small managed instance: 17 slots for roles that are not superusers
# what a least-privilege role must never send to a server pglab did not start (the server log is searched)
SUPERUSER_ONLY = re.compile(r"alter\s+system|\bcheckpoint\b|pg_stat_statements\w*\s*\(|from\s+pg_stat_statements|"
                            r"pg_stat_reset|create\s+extension|"
                            r"pg_ls_|pg_read_(binary_)?file|pg_reload_conf|pg_terminate_backend|pg_switch_wal", re.I)


def tiny(**kw: object) -> dict:
    """SMALLER than smoke (as tests/test_dvc.py): the test checks behaviour, not numbers."""
    return {**SMOKE, "blocks": 1, "seconds": 2, "sysbench_seconds": 2, "sysbench_tables": 2,
            "sysbench_table_size": 200, "wait_sample_ms": 100, **kw}


@dataclass
class Managed:
    """The emulated managed server: only this fixture's admin (the provider) may use the socket."""

    port: int
    base: Path
    ca: Path
    passfile: Path
    passwords: dict[str, str]
    agents: list[psycopg.Connection] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(host=str(self.base / "s"), port=self.port, user="admin", dbname="postgres",
                               autocommit=True)

    def dsn(self, role: str, db: str) -> str:
        return (f"host=127.0.0.1 port={self.port} dbname={db} user={role} sslmode=verify-full "
                f"sslrootcert={self.ca}")

    def target(self, role: str = "bench", db: str = "benchdb", **kw: object) -> dict:
        return {"name": role, "label": f"managed, role {role}", "provider": "other", "dsn": self.dsn(role, db),
                "passfile": str(self.passfile), "disposable": True, **kw}

    def env(self, role: str = "bench", db: str = "benchdb") -> dict[str, str]:
        """libpq's environment for a client program (no password: the passfile)."""
        return {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(self.port), "PGUSER": role, "PGDATABASE": db,
                "PGSSLMODE": "verify-full", "PGSSLROOTCERT": str(self.ca), "PGPASSFILE": str(self.passfile)}

    def hold(self, n: int) -> None:
        """``n`` sessions of the provider's own superuser agents, as a managed service keeps open."""
        while len(self.agents) > n:
            self.agents.pop().close()
        while len(self.agents) < n:
            self.agents.append(self.admin())

    def statements_of(self, roles: tuple[str, ...], since: int = 0) -> list[str]:
        """Lines the server logged for sessions of ``roles`` (log_line_prefix names user@database)."""
        text = self.log.read_text(errors="replace")[since:]
        return [ln for ln in text.splitlines() if any(f"] {r}@" in ln for r in roles)]


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def server() -> Iterator[Managed]:
    """initdb + pg_ctl as postgres on a free port; hostssl + scram-sha-256 only; its own CA."""
    base = Path(tempfile.mkdtemp(prefix="mt-", dir="/tmp"))
    base.chmod(0o755)
    port = LocalHost().free_port(30000, 60000)
    pw = {r: f"mt-{r}-" + secrets.token_hex(10) for r in ("bench", "nomon")}
    ca = tls.RunCA.create("managed test")
    cert, key = ca.server_cert(["127.0.0.1"], "managed")
    (base / "s").mkdir(mode=0o700)  # the provider's socket: no client of the test's reaches it
    for name, text, mode in (("server.crt", cert, 0o644), ("server.key", key, 0o600)):
        (base / name).write_text(text)
        (base / name).chmod(mode)
    (base / "root.crt").write_text(ca.cert_pem)
    shutil.chown(base / "s", "postgres")
    shutil.chown(base / "server.key", "postgres")
    data = base / "data"
    _sh("install", "-d", "-o", "postgres", "-m", "700", str(data))
    _sh("runuser", "-u", "postgres", "--", f"{BIN}/initdb", "-D", str(data), "-U", "admin", "-A", "reject")
    (data / "pg_hba.conf").write_text("local all admin trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n")
    with (data / "postgresql.conf").open("a") as f:
        f.write(f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{base / 's'}'\n"
                f"ssl = on\nssl_cert_file = '{base / 'server.crt'}'\nssl_key_file = '{base / 'server.key'}'\n"
                f"max_connections = {MAX_CONNECTIONS}\nsuperuser_reserved_connections = {RESERVED}\n"
                "password_encryption = 'scram-sha-256'\nfsync = off\nlog_statement = 'all'\nlog_connections = on\n"
                "log_disconnections = on\nlog_line_prefix = '%m [%p] %q%u@%d '\n")
    log = base / "server.log"
    log.touch()
    shutil.chown(log, "postgres")
    _sh("runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", str(data), "-l", str(log), "-w", "start")
    srv = Managed(port, base, base / "root.crt", base / "pgpass", pw)
    try:
        with srv.admin() as c:
            c.execute("set log_statement = 'none'")  # the passwords below stay out of the server log
            c.execute(f"create role bench login createdb password '{pw['bench']}' "
                      "in role pg_monitor, pg_read_all_settings")
            c.execute("create database benchdb owner bench")
            c.execute(f"create role nomon login password '{pw['nomon']}'")
            c.execute("create database nomondb owner nomon")
        srv.passfile.write_text(f"127.0.0.1:{port}:benchdb:bench:{pw['bench']}\n"
                                f"127.0.0.1:{port}:nomondb:nomon:{pw['nomon']}\n")
        srv.passfile.chmod(0o600)
        yield srv
    finally:
        srv.hold(0)
        subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", str(data), "-m", "fast", "-w",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def bench_run(server: Managed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """cloud_providers at a tiny size against the managed server, as the role the docs ask for."""
    data = tmp_path_factory.mktemp("data")
    since = server.log.stat().st_size
    d = collect.collect(tiny(targets=[server.target()]), data_root=data, profile="test", progress=False)
    return d, since


def test_the_server_is_a_managed_one(server: Managed) -> None:
    """What the emulation must hold for the tests below to mean anything: TLS required, no superuser."""
    common = {"host": "127.0.0.1", "port": server.port, "user": "bench", "dbname": "benchdb",
              "passfile": str(server.passfile), "connect_timeout": 5}
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        psycopg.connect(**common, sslmode="disable")
    with psycopg.connect(**common, sslmode="verify-full", sslrootcert=str(server.ca)) as c:
        row = c.execute("select rolsuper, pg_has_role('pg_monitor', 'USAGE'), "
                        "(select count(*) from pg_available_extensions where name = 'pg_stat_statements' "
                        "and installed_version is not null) from pg_roles where rolname = current_user").fetchone()
    assert row == (False, True, 0)


def test_a_managed_server_is_measured_end_to_end_with_least_privilege(server: Managed,
                                                                      bench_run: tuple[Path, int]) -> None:
    d, since = bench_run
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "complete" and m["points"]["failed"] == 0
    t = m["targets"]["bench"]
    assert t["started_by_pglab"] is False and t["connection"]["sslmode"] == "verify-full"
    assert t["client_connection"]["tls"] is True and m["topology"]["tls"] is True
    # what the role may do, read from the server; what pglab skipped on it and why
    assert t["privileges"]["superuser"] is False and t["privileges"]["pg_monitor"] is True
    assert t["privileges"]["pg_read_all_settings"] is True and t["privileges"]["pg_checkpoint"] is False
    assert t["unreadable_settings"] == {}  # pg_read_all_settings: every setting could be read
    skipped = t["skipped"]
    assert "pg_checkpoint" in skipped["CHECKPOINT"] and "not installed" in skipped["pg_stat_statements"]
    assert "ALTER SYSTEM" in skipped and "pg_stat_reset" in skipped
    # the server's own log: every statement of the role, and not one that needs a superuser
    lines = server.statements_of(("bench",), since)
    assert any("CREATE TABLE sbtest1" in ln for ln in lines) and any("pg_stat_activity" in ln for ln in lines)
    assert any("pg_settings" in ln for ln in lines)  # pglab's own statements are in it too
    assert [ln for ln in lines if SUPERUSER_ONLY.search(ln)] == []
    authorized = [ln for ln in lines if "connection authorized" in ln]
    assert authorized and all("SSL enabled" in ln for ln in authorized)  # every connection used TLS
    # the password: in no file the run wrote (the whole data root: run folder, published copy, index), no command line
    files = [f for f in d.parents[2].rglob("*") if f.is_file()]
    assert len(files) > 20
    assert [str(f) for f in files if server.passwords["bench"].encode() in f.read_bytes()] == []
    assert all(server.passwords["bench"] not in ln for ln in collect.command_lines(d))


def test_a_role_without_pg_monitor_is_warned_and_told_what_it_could_not_read(
        server: Managed, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The role the docs of a managed service tell users to create: no pg_monitor, no pg_read_all_settings,
    while two sessions of the provider's agents are open."""
    server.hold(2)
    try:
        since = server.log.stat().st_size
        d = collect.collect(tiny(targets=[server.target("nomon", "nomondb")], workloads=["pgbench"]),
                            data_root=tmp_path, profile="test", progress=False)
    finally:
        server.hold(0)
    err = capfd.readouterr().err
    assert "target nomon: role nomon cannot see other sessions' details" in err, err
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "complete"
    c = m["connections"]["nomon"]
    assert c["in_use"] >= 2 and c["hidden_sessions"] >= 2  # the agents, counted by their rows
    assert "cannot see other sessions' details" in c["warning"]
    t = m["targets"]["nomon"]
    assert t["privileges"]["pg_monitor"] is False and t["privileges"]["pg_read_all_settings"] is False
    unreadable = t["unreadable_settings"]
    assert {"shared_preload_libraries", "data_directory", "hba_file"} <= set(unreadable)
    assert "pg_read_all_settings" in unreadable["shared_preload_libraries"]
    assert "pg_read_all_stats" in t["skipped"]["wait events of other sessions"]
    lines = server.statements_of(("nomon",), since)
    assert lines and [ln for ln in lines if SUPERUSER_ONLY.search(ln)] == []


def test_every_statement_pglab_sends_a_managed_target_passes_the_guard() -> None:
    """Every statement the study sends a target it did not start passes the guard (PostgreSQL's grammar, an
    allow-list); what needs a superuser is refused inside pglab, before a connection is opened."""
    own = [targets.PREFLIGHT_SQL, targets.CONNECTION_SQL, targets.SETTINGS_SQL, "select version()",
           privileges.ROLE_SQL, *privileges.probe_statements(), waits.QUERY]
    assert [(sql, sql_guard.problems(sql)) for sql in own if sql_guard.problems(sql)] == []
    for sql in ("CHECKPOINT", "alter system set work_mem = '1GB'", "select pg_stat_statements_reset()",
                "select query from pg_stat_statements", "select pg_stat_reset()", "create extension pg_stat_statements",
                "select pg_ls_logdir()", "select pg_read_file('postgresql.conf')", "select pg_reload_conf()"):
        with pytest.raises(PglabError, match="pglab did not start it, so it sends only reads there"):
            sql_guard.refuse_unless_allowed("managed", sql)


def _connections(log_lines: list[str], role: str) -> tuple[int, int]:
    """(connections opened, most open at once) by ``role``, from log_connections / log_disconnections."""
    opened = peak = now = 0
    for ln in log_lines:
        if f"connection authorized: user={role} " in ln:
            opened, now = opened + 1, now + 1
            peak = max(peak, now)
        elif "disconnection:" in ln and f"user={role} " in ln:
            now -= 1
    return opened, peak


def _prepare(server: Managed, threads: int, tables: int) -> subprocess.CompletedProcess[str]:
    """sysbench prepare whose every connection takes 1 s to set up (post_auth_delay, which any role may ask
    for at connection start), as a connection to a managed service across a network takes long: then its
    connections overlap as they would there, every time, instead of by a race on this loaded machine."""
    argv = sysbench.sysbench_argv("oltp_write_only", "prepare", "benchdb", tables=tables, table_size=100,
                                  threads=threads)
    return subprocess.run(argv, env={**server.env(), "PGOPTIONS": "-c post_auth_delay=1"}, capture_output=True,
                          text=True, timeout=120)


def _cleanup(server: Managed, tables: int) -> None:
    argv = sysbench.sysbench_argv("oltp_write_only", "cleanup", "benchdb", tables=tables, table_size=100, threads=1)
    subprocess.run(argv, env=server.env(), capture_output=True, text=True, timeout=120, check=True)


def test_the_connection_preflight_counts_what_sysbench_prepare_really_opens(server: Managed,
                                                                            tmp_path: Path) -> None:
    """sysbench prepare opens one connection per thread plus one per table (to read the database's
    capabilities), up to two per thread at once. The old rule (threads + pglab's 3) passed where the
    server refused; the preflight now refuses first, with the numbers, and its number is enough."""
    threads, tables = 6, 12
    free = threads + 3  # what the old rule asked for: it passed
    server.hold(MAX_CONNECTIONS - RESERVED - free)
    try:
        since = server.log.stat().st_size
        res = _prepare(server, threads, tables)
        refused = [ln for ln in (res.stdout + res.stderr).splitlines() if "FATAL" in ln]
        assert any("remaining connection slots are reserved" in ln for ln in refused), res.stdout[-2000:]
        _cleanup(server, tables)
        before = workspaces()
        with pytest.raises(PreflightError) as exc:
            collect.collect(tiny(targets=[server.target()], workloads=["sysbench"], sysbench_threads=threads,
                                 sysbench_tables=tables), data_root=tmp_path, progress=False)
        msg = str(exc.value)
        assert "target bench: needs 15 connections" in msg and "sysbench prepare" in msg, msg
        assert f"only {free} are free" in msg and f"{MAX_CONNECTIONS - RESERVED - free} in use" in msg, msg
        assert workspaces() == before and not (tmp_path / "runs").exists()
        # with the 12 free the preflight counts (15 less pglab's own 3), prepare is never refused
        server.hold(MAX_CONNECTIONS - RESERVED - 2 * threads)
        since = server.log.stat().st_size
        res = _prepare(server, threads, tables)
        assert res.returncode == 0 and "FATAL" not in res.stdout + res.stderr, res.stdout[-2000:]
        opened, peak = _connections(server.statements_of(("bench",), since), "bench")
        assert opened == threads + tables and threads < peak <= 2 * threads, (opened, peak)
    finally:
        server.hold(0)
        with contextlib.suppress(subprocess.CalledProcessError):
            _cleanup(server, tables)


# sysbench 1.0.20's stdout for `prepare --threads 4 --tables 4` against PostgreSQL 15 with 5 free slots (captured
# here): two of its capability connections were refused, two tables never got their rows, and it exited 0.
PREPARE_REFUSED = """sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Initializing worker threads...

Creating table 'sbtest3'...Creating table 'sbtest2'...

Creating table 'sbtest4'...
Creating table 'sbtest1'...
Inserting 1000 records into 'sbtest4'
Inserting 1000 records into 'sbtest2'
Inserting 1000 records into 'sbtest3'
Inserting 1000 records into 'sbtest1'
FATAL: Connection to database failed: connection to server at "127.0.0.1", port 54871 failed: FATAL:  remaining \
connection slots are reserved for non-replication superuser connections

FATAL: failed to get database capabilities!
FATAL: `sysbench.cmdline.call_command' function failed: /usr/share/sysbench/oltp_common.lua:210: \
db_bulk_insert_init() failed
FATAL: Connection to database failed: connection to server at "127.0.0.1", port 54871 failed: FATAL:  remaining \
connection slots are reserved for non-replication superuser connections

FATAL: failed to get database capabilities!
FATAL: `sysbench.cmdline.call_command' function failed: /usr/share/sysbench/oltp_common.lua:210: \
db_bulk_insert_init() failed
Creating a secondary index on 'sbtest2'...
Creating a secondary index on 'sbtest4'...
"""


def test_a_sysbench_command_that_exits_0_after_refused_connections_fails_its_point() -> None:
    """Before, such a prepare counted as done and the run after it crashed ("sysbench run exited 139")."""
    why = sysbench.failure("prepare", Result("local", "sysbench ... prepare", 0, PREPARE_REFUSED, "", 1.0))
    assert why is not None and why.startswith("sysbench prepare exited 0 but reported FATAL: Connection to database")
    assert "remaining connection slots are reserved" in why
    ok = (REPO / "tests/data/sysbench/1.0/oltp_write_only.txt").read_text()  # a real run without errors
    assert sysbench.failure("run", Result("local", "sysbench ... run", 0, ok, "", 1.0)) is None
    assert sysbench.failure("run", Result("local", "sysbench ... run", 139, ok, "", 1.0)) == "sysbench run exited 139"


# -- the passfile and the service file: one clear line, nothing started ------------------------------------------
BAD_FILES = {  # case -> (how to make it, what the message says)
    "missing": (lambda p: None, "does not exist"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "binary": (lambda p: p.write_bytes(bytes(range(256)) * 4), "is a binary file"),
    "empty": (lambda p: p.write_bytes(b""), "is empty"),
}


@pytest.mark.parametrize("which", ["passfile", "servicefile"])
@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_passfile_or_service_file_is_one_clear_line(server: Managed, tmp_path: Path, which: str,
                                                          case: str) -> None:
    make, says = BAD_FILES[case]
    path = tmp_path / which
    make(path)
    if which == "passfile":
        target = server.target(passfile=str(path))
    else:
        target = {k: v for k, v in server.target().items() if k != "dsn"}
        target.update(service="managed", servicefile=str(path), dbname="benchdb")
    before = workspaces()
    with pytest.raises(FileError) as exc:
        collect.collect(tiny(targets=[target]), data_root=tmp_path / "data", progress=False)
    assert str(exc.value).startswith(f"{path}: {says}") and which in str(exc.value), str(exc.value)
    assert "\n" not in str(exc.value)
    assert workspaces() == before and not (tmp_path / "data").exists()


def test_an_unreadable_passfile_is_one_clear_line(tmp_path: Path) -> None:
    """As a user who may not read it (root reads every file: pglab's check runs with postgres's uid here), and
    in a folder that user may not enter (Path.exists raised there: a traceback)."""
    where = Path(tempfile.mkdtemp(prefix="mtp-", dir="/tmp"))
    closed = where / "closed"
    try:
        where.chmod(0o755)
        closed.mkdir(mode=0o700)
        for secret in (where / "pgpass", closed / "pgpass"):
            secret.write_text("127.0.0.1:1:x:y:z\n")
            secret.chmod(0o600)
        what = collect.FILE_KINDS["passfile"].format(target="bench")
        os.seteuid(pwd.getpwnam("postgres").pw_uid)
        try:
            for secret in (where / "pgpass", closed / "pgpass"):
                with pytest.raises(FileError) as exc:
                    collect.client_file(LocalHost(), str(secret), what)
                assert str(exc.value) == f"{secret}: cannot be read: Permission denied (expected {what})"
        finally:
            os.seteuid(0)
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.mark.ssh
def test_a_bad_passfile_on_a_client_host_over_ssh_is_one_clear_line(inventory: Inventory) -> None:
    """The client host is reached over SSH (its login user is postgres): the same checks, the same words."""
    host = inventory.connect("ssh")
    where = Path(tempfile.mkdtemp(prefix="mts-", dir="/tmp"))
    try:
        where.chmod(0o755)
        (where / "directory").mkdir()
        (where / "binary").write_bytes(bytes(range(256)) * 4)
        (where / "empty").write_bytes(b"")
        (where / "unreadable").write_text("127.0.0.1:1:x:y:z\n")
        (where / "unreadable").chmod(0o600)
        (where / "good").write_text("127.0.0.1:1:x:y:z\n")
        (where / "good").chmod(0o644)
        what = collect.FILE_KINDS["passfile"].format(target="bench")
        for case in ("missing", "directory", "binary", "empty", "unreadable"):
            with pytest.raises(FileError) as exc:
                collect.client_file(host, str(where / case), what)
            says = {**{k: v[1] for k, v in BAD_FILES.items()}, "unreadable": "cannot be read: Permission denied"}[case]
            assert str(exc.value) == f"{where / case}: {says} on host ssh (expected {what})"
        collect.client_file(host, str(where / "good"), what)  # a readable text file passes
    finally:
        host.close()
        shutil.rmtree(where, ignore_errors=True)
