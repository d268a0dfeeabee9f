"""Collect: named targets under the article's procedure, in blocks, from one client host.

Targets (``params``): ``provision`` nodes pglab starts on inventory hosts (the default run: ``stock``
and ``tuned`` on this machine), and ``dsn`` / ``service`` targets, servers somebody else runs (RDS,
Aurora, Cloud SQL, Azure, a server a test started). Every program that reaches a target (pgbench,
sysbench, psql) runs on ``client_host`` with that target's libpq environment; a dsn target's password
comes from the passfile the user names, never from a parameter, a command line or pglab.

Procedure per point (``sweep``: a block runs every target once per workload, the baseline twice):

* ``pgbench``: ``pgbench -i --fillfactor=F --scale=S`` (raw ``init_*`` files: its phase times), then
  ``pgbench --protocol=prepared -P p --time=T --client=C --jobs=J`` (the article's run).
* ``sysbench``: ``cleanup`` (leftovers of a killed run), ``prepare``, ``run`` (oltp_write_only, N tables
  x M rows, uniform, report interval), ``cleanup``; raw ``prepare_*``, main and ``cleanup_*`` files.

Before any load: the targets are described over SQL (version, non-default settings) and each must
admit the workload's connections plus pglab's own (the article lost a run to "sorry, too many clients
already"). After the blocks, the pgbench tables are dropped from dsn targets (``pgbench -i -I d``).
"""

from __future__ import annotations

import contextlib
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglab.errors import PreflightError, ProcessError
from pglab.hosts.base import Host, Result
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import Node, Workspace
from pglab.nodes.target import _ENV, ServerTarget, Target
from pglab.nodes.topology import Client
from pglab.runs import preflight, sweep
from pglab.runs.cleanup import Session
from pglab.runs.params import validate
from pglab.runs.resume import measured_run
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.cloud_providers import STUDY
from pglab.studies.cloud_providers.params import OWN_CONNECTIONS, Params, TargetSpec
from pglab.workloads import cpu, pgbench, sysbench, waits

DEFAULT_MAX_CONNECTIONS = 100  # PostgreSQL's defaults, for a provisioned node that sets neither
DEFAULT_SUPERUSER_RESERVED = 3
# One statement, read by psql on the client host: what the connection preflight and the manifest need.
PREFLIGHT_SQL = ("select current_setting('max_connections'), current_setting('superuser_reserved_connections'), "
                 "coalesce(nullif(current_setting('reserved_connections', true), ''), '0'), "
                 "(select count(*) from pg_stat_activity where backend_type = 'client backend'), "
                 "has_schema_privilege('public', 'CREATE'), current_user, current_database(), "
                 "current_setting('server_version'), current_setting('server_version_num')")
SETTINGS_SQL = ("select name, setting, coalesce(unit, ''), source from pg_settings "
                "where source not in ('default', 'override', 'client', 'session') order by name")


class ManagedTarget(ServerTarget):
    """A server pglab did not start, by connection string or service name.

    Unlike ``ServerTarget`` it never falls back to pglab's own passfile: the password is in the
    passfile the user names (PGPASSFILE), or libpq's default one, or the service file's."""

    def __init__(self, name: str, params: dict[str, str], *, service: str | None = None,
                 servicefile: str | None = None, passfile: str | None = None):
        super().__init__(name, params)
        self.service, self.servicefile, self.passfile = service, servicefile, passfile

    @classmethod
    def of(cls, spec: TargetSpec) -> ManagedTarget:
        params = ServerTarget.from_dsn(spec.name, spec.dsn).params if spec.dsn else {}
        return cls(spec.name, params, service=spec.service, servicefile=spec.servicefile, passfile=spec.passfile)

    def env(self) -> dict[str, str]:
        """The libpq environment of a client program (paths and names only, never a secret)."""
        env = {_ENV[k]: v for k, v in self.params.items()}
        if self.service:
            env["PGSERVICE"] = self.service
        if self.servicefile:
            env["PGSERVICEFILE"] = self.servicefile
        if self.passfile:
            env["PGPASSFILE"] = self.passfile
        env.setdefault("PGCONNECT_TIMEOUT", "10")
        return env

    def libpq_env(self, client: Workspace) -> dict[str, str]:
        return self.env()

    def describe(self) -> dict[str, Any]:
        out = {"name": self.name, **{k: v for k, v in self.params.items() if k != "passfile"}}
        if self.service:
            out["service"] = self.service
        out["password_from"] = ("passfile named in params" if self.passfile else
                                "the service file or libpq's default passfile")
        return out


class SamplerEndpoint:
    """What ``waits.WaitSampler`` needs of a dsn target (only when the client host is this machine,
    which then reaches the target as the client programs do)."""

    def __init__(self, name: str, host: Host, target: ManagedTarget, dbname: str):
        self.name, self.host, self.target, self.dbname = name, host, target, dbname

    @property
    def port(self) -> int:
        return int(self.target.params.get("port", "5432").split(",")[0])

    def conninfo(self, dbname: str = "postgres", statement_timeout_s: float | None = None,
                 connect_timeout: int = 10) -> dict[str, Any]:
        info: dict[str, Any] = {**self.target.params, "dbname": self.dbname, "connect_timeout": connect_timeout}
        if self.target.passfile:
            info["passfile"] = self.target.passfile
        if statement_timeout_s:
            info["options"] = f"-c statement_timeout={int(statement_timeout_s * 1000)}"
        return info


@dataclass
class Handle:
    """One target as the run reaches it: its spec, what client programs connect to, its node if any."""

    spec: TargetSpec
    target: Target
    client: Client
    node: Node | None = None
    os_hosts: list[Host] = field(default_factory=list)
    sampled: Any = None  # what the wait sampler connects to; None = not sampled

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dbname(self) -> str:
        return self.spec.database

    def env(self) -> dict[str, str]:
        return {**self.client.env(self.target), "PGDATABASE": self.dbname}

    def psql(self, sql: str, timeout: float = 60) -> list[list[str]]:
        return psql_rows(self.client.host, self.client.bin("psql"), self.env(), self.dbname, sql, timeout)


def psql_rows(host: Host, psql: str, env: dict[str, str], dbname: str, sql: str,
              timeout: float = 60) -> list[list[str]]:
    """Rows of one statement, run by psql on the client host with the target's libpq environment."""
    res = host.run([psql, "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql, dbname], env=env,
                   timeout=timeout, check=False)
    if res.exit_code != 0:
        raise ProcessError(host.name, res.command, res.exit_code, res.stdout, res.stderr)
    return [line.split("\t") for line in res.stdout.splitlines() if line]


def groups(p: Params) -> list[Group]:
    """One group per workload: a block runs every target once for each."""
    return [Group(w, {"kind": w}) for w in p.workloads]


def plan(p: Params) -> list[Planned]:
    """Blocks: every target once per workload, the baseline twice (A/A), in a seeded order."""
    return plan_blocks(p.names, p.base, groups(p), p.blocks, p.seed)


def sized_settings(mem_total_kb: int, fractions: dict[str, float]) -> dict[str, str]:
    """Memory settings as shares of the host's memory, in MB (``shared_buffers: 0.25`` -> ``6026MB``)."""
    return {k: f"{max(1, int(mem_total_kb * f / 1024))}MB" for k, f in fractions.items()}


def connection_problem(name: str, p: Params, max_connections: int, superuser_reserved: int, reserved: int,
                       in_use: int) -> str | None:
    """The article's "sorry, too many clients already", said before the load with the numbers."""
    need = p.connections_needed()
    free = max_connections - superuser_reserved - reserved - in_use
    if need <= free:
        return None
    parts = [f"max_connections {max_connections}", f"superuser_reserved_connections {superuser_reserved}"]
    if reserved:
        parts.append(f"reserved_connections {reserved}")
    parts.append(f"{in_use} in use")
    loads = [f"pgbench --client {p.clients}" if "pgbench" in p.workloads else "",
             f"sysbench --threads {p.sysbench_threads}" if "sysbench" in p.workloads else ""]
    return (f"target {name}: needs {need} connections ({' / '.join(x for x in loads if x)}, the larger, plus "
            f"{OWN_CONNECTIONS} of pglab's own) but only {free} are free: {' - '.join(parts)} = {free}. "
            f"Raise max_connections on {name} to at least {max_connections + need - free} (its settings, or the "
            "provider's parameter group / database flags), or lower clients and sysbench_threads; otherwise "
            "the run fails with 'sorry, too many clients already'")


def _target_problems(name: str, p: Params, row: list[str]) -> list[str]:
    """Problems a target's PREFLIGHT_SQL row shows (the caller's own session is not counted in use)."""
    max_conn, su_res, res, in_use = (int(x) for x in row[:4])
    out = []
    msg = connection_problem(name, p, max_conn, su_res, res, max(0, in_use - 1))
    if msg:
        out.append(msg)
    if row[4] != "t":
        out.append(f"target {name}: role {row[5]} may not create tables in schema public of database {row[6]} "
                   "(grant it CREATE there, or name a database where it may)")
    return out


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts (dsn targets are asked over SQL);
    raises PreflightError with every problem."""
    problems: list[str] = []
    if os.environ.get("PGPASSWORD"):
        problems.append("PGPASSWORD is set in the environment: pglab takes passwords only from a passfile "
                        "(every process would inherit it); unset it and name a passfile per target")
    server_hosts = [t.provision.host for t in p.targets if t.provision]
    os_hosts = [t.os_host for t in p.targets if t.os_host]
    client_programs = ("pgbench", "psql")
    seen: set[str] = set()
    opened: dict[str, Host] = {}
    for names, programs in ((server_hosts, (*preflight.SERVER_PROGRAMS, "psql")), ([p.client_host], client_programs),
                            (os_hosts, ())):
        probs, hosts = preflight.host_problems(inventory, names, programs)
        problems += [x for x in probs if x not in seen]
        seen.update(probs)
        opened.update(hosts)
    try:
        client = opened.get(p.client_host)
        if client is not None:
            problems += _client_problems(p, inventory, client)
    finally:
        for h in opened.values():
            h.close()
    for t in p.targets:
        if t.provision:
            s = t.provision.settings
            msg = connection_problem(t.name, p, int(s.get("max_connections", DEFAULT_MAX_CONNECTIONS)),
                                     int(s.get("superuser_reserved_connections", DEFAULT_SUPERUSER_RESERVED)),
                                     int(s.get("reserved_connections", 0)), 0)
            if msg:
                problems.append(msg)
    preflight.require(problems)


def _client_problems(p: Params, inventory: Inventory, host: Host) -> list[str]:
    """On the client host: sysbench, each dsn target's passfile and service file, and the targets themselves."""
    problems = []
    if "sysbench" in p.workloads and not host.which(sysbench.PROGRAM):
        problems.append(f"host {host.name}: sysbench is not installed (Debian: apt-get install sysbench, 1.0.20 "
                        "has the pgsql driver)")
    psql = f"{inventory.entry(p.client_host).bindir}/psql"
    for t in p.targets:
        if t.provision:
            continue
        files_ok = True
        for what, path in (("passfile", t.passfile), ("servicefile", t.servicefile)):
            if not path:
                continue
            st = host.run(["stat", "-c", "%a", path], check=False)
            if st.exit_code != 0:
                problems.append(f"target {t.name}: {what} {path} does not exist on the client host {host.name}")
                files_ok = False
            elif what == "passfile" and int(st.stdout.strip() or "0", 8) & 0o077:
                problems.append(f"target {t.name}: passfile {path} is readable by group or others (mode "
                                f"{st.stdout.strip()}): libpq ignores it; chmod 600 it")
                files_ok = False
        if not files_ok:
            continue
        try:
            rows = psql_rows(host, psql, {**ManagedTarget.of(t).env(), "PGDATABASE": t.database}, t.database,
                             PREFLIGHT_SQL, timeout=30)
        except ProcessError as exc:
            first = (exc.stderr.strip().splitlines() or [""])[-1]
            problems.append(f"target {t.name}: cannot connect from {host.name} as given: {first}")
            continue
        problems += _target_problems(t.name, p, rows[0])
    return problems


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    p = params if isinstance(params, Params) else validate(Params, params, f"{STUDY} parameters")
    inventory = inventory or Inventory()
    check(p, inventory)
    points = plan(p)
    with measured_run(STUDY, p, points, p.base, data_root=data_root, profile=profile, inventory=inventory,
                      resume=resume) as (store, s):
        s.deploy.open(p.hosts)
        client = s.deploy.client(p.client_host)
        handles = _targets(s, p, store, client)
        _describe(handles, store, p, client)
        _preflight(handles, store, p)
        cores = int(store.manifest["hosts"].get(p.client_host, {}).get("cores", 2) or 2)
        with waits.sampler(p.wait_sample_ms) as sampler:

            def measure(pl: Planned, point: Point) -> str | None:
                h = handles[pl.config]
                with cpu.during([client.host, *h.os_hosts], point):
                    return _measure(pl, point, h, p, cores, sampler)

            sweep.run(store, points, measure, desc=STUDY, progress=progress)
        _teardown(handles, store, p)
    return store.dir


def _targets(s: Session, p: Params, store: RunStore, client: Client) -> dict[str, Handle]:
    """Provisioned nodes started (memory settings sized from their host), dsn targets wrapped."""
    out: dict[str, Handle] = {}
    described: dict[str, Any] = {}
    for t in p.targets:
        if t.provision:
            host = s.deploy.host(t.provision.host)
            mem_kb = int(store.manifest.get("hosts", {}).get(host.name, {}).get("mem_total_kb") or
                         host.facts().get("mem_total_kb") or 0)
            sized = sized_settings(mem_kb, dict(t.provision.memory_fractions)) if mem_kb else {}
            if t.provision.memory_fractions and not mem_kb:
                raise PreflightError([f"target {t.name}: the memory of host {host.name} could not be read"])
            node = s.deploy.node(t.name, host.name, {**sized, **t.provision.settings})
            node.start()
            node.query(f'create database "{t.database}"')
            h = Handle(t, node, client, node, [host], node)
            described[t.name] = {"kind": "provision", "host": host.name, "node": node.describe(),
                                 "settings_given": dict(t.provision.settings),
                                 "memory_fractions": dict(t.provision.memory_fractions),
                                 "sized_from_memory": {"mem_total_kb": mem_kb, **sized}}
        else:
            target = ManagedTarget.of(t)
            os_hosts = [s.deploy.host(t.os_host)] if t.os_host else []
            sampled = (SamplerEndpoint(t.name, client.host, target, t.database)
                       if client.host.is_local and not t.service else None)
            h = Handle(t, target, client, None, os_hosts, sampled)
            described[t.name] = {"kind": t.kind, "connection": target.describe(), "os_host": t.os_host,
                                 "disposable": t.disposable}
        described[t.name].update(label=t.describe(), provider=t.provider, database=t.database)
        out[t.name] = h
    store.manifest["targets"] = described
    store.save()
    return out


def _describe(handles: dict[str, Handle], store: RunStore, p: Params, client: Client) -> None:
    """Tools, placement, and each target's version and non-default settings (over SQL, as the client sees it)."""
    host = client.host
    tools = {prog: host.run([client.bin(prog), "--version"], check=False).stdout.strip()
             for prog in ("pgbench", "psql")}
    if "sysbench" in p.workloads:
        tools["sysbench"] = sysbench.version(client)
    for h in handles.values():
        if h.node is not None:
            tools.setdefault("postgres", h.node.host.run([h.node.bin("postgres"), "--version"]).stdout.strip())
    store.manifest["tools"] = tools
    for name, h in handles.items():
        row = h.psql(PREFLIGHT_SQL)[0]
        settings = {r[0]: {"setting": r[1], "unit": r[2], "source": r[3]} for r in h.psql(SETTINGS_SQL)}
        store.manifest["targets"][name].update(version=h.psql("select version()")[0][0], server_version=row[7],
                                               server_version_num=int(row[8]), user=row[5],
                                               non_default_settings=settings)
    store.manifest["topology"] = {
        "client": client.describe(),
        "targets": {n: {"kind": h.spec.kind, "host": h.node.host.name if h.node else None,
                        "label": h.spec.describe(), "os_hosts": [x.name for x in h.os_hosts],
                        "waits_sampled": h.sampled is not None} for n, h in handles.items()},
        **(_where(handles))}
    store.save()


def _where(handles: dict[str, Handle]) -> dict[str, Any]:
    nodes = [h.node for h in handles.values() if h.node is not None]
    return {"tls": False, "hosts": {n.host.name: n.host.data_address for n in nodes}}


def _preflight(handles: dict[str, Handle], store: RunStore, p: Params) -> None:
    """Every target admits the load plus pglab's own sessions, read live just before the first load."""
    problems, seen = [], {}
    for name, h in handles.items():
        row = h.psql(PREFLIGHT_SQL)[0]
        seen[name] = {"max_connections": int(row[0]), "superuser_reserved_connections": int(row[1]),
                      "reserved_connections": int(row[2]), "in_use": max(0, int(row[3]) - 1),
                      "needed": p.connections_needed()}
        problems += _target_problems(name, p, row)
    store.manifest["connections"] = seen
    store.save()
    preflight.require(problems)


def jobs(p: Params, cores: int) -> int:
    """pgbench --jobs: as given (pgbench caps it at --client), else min(clients, client cores)."""
    return p.jobs or min(p.clients, cores)


def init_argv(h: Handle, p: Params) -> list[str]:
    """The article's initialisation: ``pgbench -i --fillfactor=90 --scale=S``."""
    return [h.client.bin("pgbench"), "-i", f"--fillfactor={p.fillfactor}", f"--scale={p.scale}", h.dbname]


def run_argv(h: Handle, p: Params, cores: int) -> list[str]:
    """The article's run: ``pgbench --protocol=prepared -P <interval> --time=T --client=C --jobs=J``."""
    return [h.client.bin("pgbench"), f"--protocol={p.protocol}", "-P", str(p.progress_s), f"--time={p.seconds}",
            f"--client={p.clients}", f"--jobs={jobs(p, cores)}", h.dbname]


def sysbench_argv(h: Handle, p: Params, command: str) -> list[str]:
    threads = p.sysbench_threads if command == "run" else min(p.sysbench_threads, p.sysbench_tables)
    return sysbench.sysbench_argv(p.sysbench_test, command, h.dbname, tables=p.sysbench_tables,
                                  table_size=p.sysbench_table_size, threads=threads, seconds=p.sysbench_seconds,
                                  report_interval=p.sysbench_report_interval)


def _run(h: Handle, point: Point, argv: list[str], timeout: float, prefix: str = "") -> Result:
    """A client program against the target, raw output recorded first (PGDATABASE set for psql-like use)."""
    if argv[0] == sysbench.PROGRAM:
        return sysbench.run(h.target, point, argv, client=h.client, timeout=timeout, prefix=prefix)
    return pgbench.run(h.node or h.target, point, argv, timeout=timeout, prefix=prefix, client=h.client)  # type: ignore[arg-type]


def _measure(pl: Planned, point: Point, h: Handle, p: Params, cores: int,
             sampler: waits.WaitSampler | None) -> str | None:
    """One point; None when it measured, else why not."""
    kind = str(pl.group.factors["kind"])
    point.meta.update(target_kind=h.spec.kind, database=h.dbname, label=h.spec.describe(), provider=h.spec.provider,
                      warmup_s=p.warmup_s if kind == "pgbench" else p.sysbench_warmup_s,
                      clients=p.clients if kind == "pgbench" else p.sysbench_threads,
                      waits_sampled=h.sampled is not None)

    def watch(delay: float) -> AbstractContextManager:
        if h.sampled is None:
            return contextlib.nullcontext()
        return waits.recording(sampler, point, {h.name: h.sampled}, delay_s=delay)

    if kind == "pgbench":
        res = _run(h, point, init_argv(h, p), p.init_timeout_s, prefix="init_")
        if res.exit_code != 0:
            return f"pgbench -i exited {res.exit_code}"
        with watch(p.warmup_s):
            res = _run(h, point, run_argv(h, p, cores), p.seconds + p.client_timeout_s)
        return None if res.exit_code == 0 else f"pgbench exited {res.exit_code}"
    _run(h, point, sysbench_argv(h, p, "cleanup"), p.init_timeout_s, prefix="precleanup_")
    res = _run(h, point, sysbench_argv(h, p, "prepare"), p.init_timeout_s, prefix="prepare_")
    reason = None if res.exit_code == 0 else f"sysbench prepare exited {res.exit_code}"
    if reason is None:
        with watch(p.sysbench_warmup_s):
            res = _run(h, point, sysbench_argv(h, p, "run"), p.sysbench_seconds + p.client_timeout_s)
        reason = None if res.exit_code == 0 else f"sysbench run exited {res.exit_code}"
    res = _run(h, point, sysbench_argv(h, p, "cleanup"), p.init_timeout_s, prefix="cleanup_")
    if reason is None and res.exit_code != 0:
        reason = f"sysbench cleanup exited {res.exit_code} (sbtest tables may be left in {h.dbname})"
    return reason


def _teardown(handles: dict[str, Handle], store: RunStore, p: Params) -> None:
    """Drop the pgbench tables from every dsn target (``pgbench -i -I d``): it is somebody's server."""
    managed = [h for h in handles.values() if h.node is None]
    if not managed or "pgbench" not in p.workloads:
        return
    point = store.point("teardown", unique=True, kind="teardown")
    failed = []
    for h in managed:
        res = _run(h, point, [h.client.bin("pgbench"), "-i", "-I", "d", h.dbname], 120, prefix=f"{h.name}_")
        if res.exit_code != 0:
            failed.append(f"{h.name}: pgbench -i -I d exited {res.exit_code}")
    point.finish("ok" if not failed else "failed", "; ".join(failed) or None)


def command_lines(run_dir: Path) -> list[str]:
    """Every command the run recorded (for audits: no password may be among them)."""
    return [f.read_text().strip() for f in sorted(Path(run_dir).rglob("*command.txt"))]
