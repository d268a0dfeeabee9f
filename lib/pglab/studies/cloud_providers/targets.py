"""The cloud_providers targets as the run reaches them: provisioned nodes and servers somebody else runs.

A ``dsn`` / ``service`` target's password comes from the passfile the user names, never from a
parameter, a command line or pglab (``ManagedTarget``). Every statement pglab sends a target runs in
psql on the client host with that target's libpq environment, as the workload's programs reach it.
Before any load each target is described (version, non-default settings) and must admit the
workload's connections plus pglab's own (the article lost a run to "sorry, too many clients already").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from pglab.errors import PreflightError, ProcessError
from pglab.hosts.base import Host
from pglab.nodes import privileges, sql_guard
from pglab.nodes.node import Node
from pglab.nodes.target import _ENV, ServerTarget, Target
from pglab.nodes.topology import Client
from pglab.nodes.workspace import Workspace
from pglab.runs import preflight, tools
from pglab.runs.session import Session
from pglab.runs.store import RunStore
from pglab.studies.cloud_providers.params import OWN_CONNECTIONS, Params, TargetSpec
from pglab.workloads import sysbench, waits

# One statement, read by psql on the client host: what the connection preflight and the manifest need.
# Sessions in use are counted by their rows: without pg_read_all_stats (pg_monitor) another role's row shows
# no backend_type, state or query, but it is there, with its database (an auxiliary process has none).
HIDDEN = "backend_type is null and datid is not null"
PREFLIGHT_SQL = ("select current_setting('max_connections'), current_setting('superuser_reserved_connections'), "
                 "coalesce(nullif(current_setting('reserved_connections', true), ''), '0'), "
                 f"(select count(*) from pg_stat_activity where backend_type = 'client backend' or ({HIDDEN})), "
                 "has_schema_privilege('public', 'CREATE'), current_user, current_database(), "
                 "current_setting('server_version'), current_setting('server_version_num'), "
                 f"(select count(*) from pg_stat_activity where {HIDDEN}), "
                 "pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')")
# What the client's own connection used, as the server saw it: TLS (pg_stat_ssl shows every role its
# own backend) and the address and port it reached (a service target names neither in the params)
CONNECTION_SQL = ("select coalesce((select ssl::text || '\t' || coalesce(version, '') from pg_stat_ssl "
                  "where pid = pg_backend_pid()), 'false\t'), coalesce(host(inet_server_addr()), 'unix socket'), "
                  "coalesce(inet_server_port()::text, '')")
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
            out["servicefile"] = self.servicefile or "libpq's default (~/.pg_service.conf, PGSYSCONFDIR)"
        out["password_from"] = ("passfile named in params" if self.passfile else
                                "the service file or libpq's default passfile")
        return out


class SamplerEndpoint:
    """What ``waits.WaitSampler`` needs of a dsn target (only when the client host is this machine,
    which then reaches the target as the client programs do)."""

    def __init__(self, name: str, host: Host, target: ManagedTarget, dbname: str):
        sql_guard.refuse_unless_allowed(name, waits.QUERY)  # the one statement the sampler sends
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
        if self.node is None:  # somebody else's server: only the reads pglab needs are ever sent
            sql_guard.refuse_unless_allowed(self.name, sql)
        return psql_rows(self.client.host, self.client.bin("psql"), self.env(), self.dbname, sql, timeout)

    def unreadable_settings(self) -> dict[str, str]:
        """The restricted settings the role may not read, with the server's reason (one psql session that
        goes on after each refused statement)."""
        argv = [self.client.bin("psql"), "-X", "-A", "-t", "-F", "\t"]
        for statement in privileges.probe_statements():
            sql_guard.refuse_unless_allowed(self.name, statement)
            argv += ["-c", statement]
        res = self.client.host.run([*argv, self.dbname], env=self.env(), timeout=60, check=False)
        if res.exit_code not in (0, 1) or not (res.stdout.strip() or "ERROR:" in res.stderr):  # 2: no connection
            raise ProcessError(self.client.host.name, res.command, res.exit_code, res.stdout, res.stderr)
        return privileges.unreadable_from(res.stdout, res.stderr)


def psql_rows(host: Host, psql: str, env: dict[str, str], dbname: str, sql: str,
              timeout: float = 60) -> list[list[str]]:
    """Rows of one statement, run by psql on the client host with the target's libpq environment."""
    res = host.run([psql, "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql, dbname], env=env,
                   timeout=timeout, check=False)
    if res.exit_code != 0:
        raise ProcessError(host.name, res.command, res.exit_code, res.stdout, res.stderr)
    return [line.split("\t") for line in res.stdout.splitlines() if line]


def sized_settings(mem_total_kb: int, fractions: dict[str, float]) -> dict[str, str]:
    """Memory settings as shares of the host's memory, in MB (``shared_buffers: 0.25`` -> ``6026MB``)."""
    return {k: f"{max(1, int(mem_total_kb * f / 1024))}MB" for k, f in fractions.items()}


def connection_problem(name: str, p: Params, max_connections: int, superuser_reserved: int, reserved: int,
                       in_use: int, hidden: int = 0, role: str = "") -> str | None:
    """The article's "sorry, too many clients already", said before the load with the numbers."""
    need = p.connections_needed()
    free = max_connections - superuser_reserved - reserved - in_use
    if need <= free:
        return None
    parts = [f"max_connections {max_connections}", f"superuser_reserved_connections {superuser_reserved}"]
    if reserved:
        parts.append(f"reserved_connections {reserved}")
    parts.append(f"{in_use} in use" + (f" ({hidden} of them other roles' sessions whose details role {role} cannot "
                                       "see, counted by their rows)" if hidden else ""))
    loads = p.connection_loads()
    largest = max(loads, key=lambda k: loads[k])
    others = "; ".join(f"{k}: {v}" for k, v in loads.items() if k != largest)
    return (f"target {name}: needs {need} connections ({largest} holds up to {loads[largest]} at once, the most of "
            "its workloads" + (f" [{others}]" if others else "") + f", plus {OWN_CONNECTIONS} of pglab's own) but only "
            f"{free} are free: {' - '.join(parts)} = {free}. Raise max_connections on {name} to at least "
            f"{max_connections + need - free} (its settings, or the provider's parameter group / database flags), "
            "or lower clients, sysbench_threads or sysbench_tables; otherwise the server refuses connections "
            "('sorry, too many clients already' or 'remaining connection slots are reserved')")


def target_problems(name: str, p: Params, row: list[str]) -> list[str]:
    """Problems a target's PREFLIGHT_SQL row shows (the caller's own session is not counted in use)."""
    max_conn, su_res, res, in_use = (int(x) for x in row[:4])
    out = []
    msg = connection_problem(name, p, max_conn, su_res, res, max(0, in_use - 1), int(row[9]), row[5])
    if msg:
        out.append(msg)
    if row[4] != "t":
        out.append(f"target {name}: role {row[5]} may not create tables in schema public of database {row[6]} "
                   "(grant it CREATE there, or name a database where it may)")
    return out


def session_warning(name: str, row: list[str]) -> str | None:
    """Said when the role cannot see other sessions' details (a PREFLIGHT_SQL row): what was counted instead."""
    if row[10] == "t":
        return None
    hidden = f"{row[9]} session{'' if row[9] == '1' else 's'} of other roles"
    return (f"target {name}: role {row[5]} cannot see other sessions' details (it has not the privileges of "
            f"pg_monitor or pg_read_all_stats): {hidden} counted as in use by their rows in pg_stat_activity "
            "(their state and query are hidden; an autovacuum or parallel worker among them takes no connection "
            "slot, so the count may be high), and wait events are sampled for this role's own sessions only. "
            f"GRANT pg_monitor TO {row[5]} to see them")


def open_targets(s: Session, p: Params, store: RunStore, client: Client) -> dict[str, Handle]:
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
            node.query(sql.SQL("create database {}").format(sql.Identifier(t.database)).as_string(None))
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
                                 "disposable": t.disposable, "started_by_pglab": False}
            print(f"pglab: target {t.name} ({t.describe()}) was not started by pglab: measured as it is, its "
                  "settings read, never changed", file=sys.stderr)
        described[t.name].update(label=t.describe(), provider=t.provider, database=t.database)
        out[t.name] = h
    store.manifest["targets"] = described
    store.save()
    return out


def describe(handles: dict[str, Handle], store: RunStore, p: Params, client: Client) -> None:
    """Tools, placement, and each target's version and non-default settings (over SQL, as the client sees it)."""
    nodes = [h.node for h in handles.values() if h.node is not None]
    tools.record(store, tools.versions(client.host, client.bindir, ("pgbench", "psql")),
                 {"sysbench": sysbench.version(client)} if "sysbench" in p.workloads else {},
                 tools.versions(nodes[0].host, nodes[0].bin, ("postgres",)) if nodes else {})
    for name, h in handles.items():
        row = h.psql(PREFLIGHT_SQL)[0]
        settings = {r[0]: {"setting": r[1], "unit": r[2], "source": r[3]} for r in h.psql(SETTINGS_SQL)}
        ssl, ssl_version, address, port = h.psql(CONNECTION_SQL)[0]
        t = store.manifest["targets"][name]
        t.update(version=h.psql("select version()")[0][0], server_version=row[7], server_version_num=int(row[8]),
                 user=row[5], non_default_settings=settings,
                 client_connection={"tls": ssl == "true", "tls_version": ssl_version, "server_address": address,
                                    "server_port": port})
        if h.node is None:  # least privilege: what the role may do, what pglab left alone, what it could not read
            priv = privileges.Privileges.from_row(row[5], h.psql(privileges.ROLE_SQL)[0])
            t.update(privileges=priv.describe(), skipped=priv.skipped(waits_sampled=h.sampled is not None),
                     unreadable_settings=h.unreadable_settings())
    store.manifest["topology"] = {
        "client": client.describe(),
        "targets": {n: {"kind": h.spec.kind, "host": h.node.host.name if h.node else None,
                        "label": h.spec.describe(), "os_hosts": [x.name for x in h.os_hosts],
                        "waits_sampled": h.sampled is not None} for n, h in handles.items()},
        **(_where(handles))}
    # TLS as the client's connections really were: true only when every target's was encrypted
    store.manifest["topology"]["tls"] = all(t["client_connection"]["tls"] for t in store.manifest["targets"].values())
    store.save()


def _where(handles: dict[str, Handle]) -> dict[str, Any]:
    nodes = [h.node for h in handles.values() if h.node is not None]
    return {"tls": False, "hosts": {n.host.name: n.host.data_address for n in nodes}}


def check_connections(handles: dict[str, Handle], store: RunStore, p: Params) -> None:
    """Every target admits the load plus pglab's own sessions, read live just before the first load."""
    problems, seen = [], {}
    for name, h in handles.items():
        row = h.psql(PREFLIGHT_SQL)[0]
        seen[name] = {"max_connections": int(row[0]), "superuser_reserved_connections": int(row[1]),
                      "reserved_connections": int(row[2]), "in_use": max(0, int(row[3]) - 1),
                      "hidden_sessions": int(row[9]), "sees_other_sessions": row[10] == "t",
                      "needed": p.connections_needed(), "loads": p.connection_loads()}
        warning = session_warning(name, row)
        if warning:
            seen[name]["warning"] = warning
        problems += target_problems(name, p, row)
    store.manifest["connections"] = seen
    store.save()
    preflight.require(problems)
