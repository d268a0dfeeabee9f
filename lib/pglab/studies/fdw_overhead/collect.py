"""Collect: a source instance with the pgbench tables, foreign tables to it, blocks of every target.

Topology (``pglab.nodes.topology``): the ``source`` instance on ``source_host`` holds database ``source``
(the pgbench tables) and ``fdw_local`` (foreign tables to ``source``, same instance); the ``external``
instance on ``external_host`` holds ``fdw_external`` and ``fdw_ext_ro`` (foreign tables to ``source``,
the latter with ``updatable 'false'``). postgres_fdw authenticates like every libpq program pglab
starts: the server process's PGPASSFILE, so no password is in a user mapping, a command or a log.

Before the blocks, set-up points prove what the study relies on: every target reaches the same rows
(counts and checksums through the foreign tables), FDW_ext_ro refuses an UPDATE, the remote SQL
postgres_fdw sends for each pgbench statement (EXPLAIN VERBOSE), and how many statements reach the
source per transaction (its pg_stat_statements over a short run). Every block point checks that its
pgbench session runs under REPEATABLE READ.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pglab.errors import ProcessError
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import SUPERUSER, Node
from pglab.nodes.topology import Client
from pglab.runs import preflight, sweep
from pglab.runs.cleanup import Session
from pglab.runs.params import validate
from pglab.runs.resume import measured_run
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.fdw_overhead import STUDY
from pglab.studies.fdw_overhead.params import Params
from pglab.workloads import cpu, pgbench, waits

SOURCE_DB = "source"
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
DATABASES = {"local": SOURCE_DB, "FDW_local": "fdw_local", "FDW_external": "fdw_external", "FDW_ext_ro": "fdw_ext_ro"}
ISOLATION = "repeatable read"  # postgres_fdw's remote transactions; the local baseline must match
FDW_SERVER = "source_srv"
SCRIPTS = {"RW": "tpcb-like", "RO": "select-only"}  # pgbench --show-script names of -b default and -S


@dataclass(frozen=True)
class Variant:
    """One setting of the swept options: pgbench -M and postgres_fdw's server options."""

    protocol: str
    fetch_size: int | None
    remote_estimate: bool

    def label(self, p: Params) -> str:
        """Part of group names only for the options that are swept (``-Mprepared-fs1000-ure1``)."""
        parts = []
        if len(p.protocols) > 1:
            parts.append(f"M{self.protocol}")
        if len(p.fetch_sizes) > 1:
            parts.append(f"fs{self.fetch_size or 'default'}")
        if len(p.remote_estimates) > 1:
            parts.append(f"ure{int(self.remote_estimate)}")
        return "-".join(parts)


def variants(p: Params) -> list[Variant]:
    return [Variant(*v) for v in itertools.product(p.protocols, p.fetch_sizes, p.remote_estimates)]


def groups(p: Params) -> list[Group]:
    """One group per workload, client count and variant; RW leaves out read-only targets."""
    out = []
    for v in variants(p):
        label = v.label(p)
        for kind, counts, configs in (("RW", p.rw_clients, tuple(p.rw_targets)), ("RO", p.ro_clients, None)):
            for c in counts:
                name = "-".join(x for x in (kind.lower(), f"c{c:03d}", label) if x)
                out.append(Group(name, {"kind": kind, "clients": c, "protocol": v.protocol,
                                        "fetch_size": v.fetch_size, "use_remote_estimate": v.remote_estimate,
                                        "variant": label or "default"}, configs))
    return out


def plan(p: Params) -> list[Planned]:
    """Blocks: every target once per group (workload x clients x variant), ``local`` twice, seeded order."""
    return plan_blocks(p.targets, p.baseline, groups(p), p.blocks, p.seed)


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "psql"))
    for h in hosts.values():
        h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    # each client may hold a postgres_fdw connection into the source as well; +3: control and sampler
    problems += preflight.connection_problems(max_conn, 2 * p.max_clients + 3)
    preflight.require(problems)


class Targets:
    """The two instances, their databases and foreign servers, and the current postgres_fdw options."""

    def __init__(self, source: Node, external: Node | None, p: Params):
        self.source, self.external, self.p = source, external, p
        self.options: dict[str, tuple[int | None, bool]] = {}  # foreign db -> (fetch_size, use_remote_estimate)

    def node(self, target: str) -> Node:
        if target in ("local", "FDW_local"):
            return self.source
        assert self.external is not None
        return self.external

    def foreign(self) -> list[str]:
        return [t for t in self.p.targets if t != "local"]

    def set_options(self, fetch_size: int | None, remote_estimate: bool) -> None:
        """Put the swept postgres_fdw server options in effect in every foreign database (new sessions see them)."""
        for t in self.foreign():
            db = DATABASES[t]
            if self.options.get(db) == (fetch_size, remote_estimate):
                continue
            node = self.node(t)
            have = {r[0].split("=", 1)[0] for r in node.query(
                "select unnest(srvoptions) from pg_foreign_server where srvname = %s", (FDW_SERVER,), dbname=db)}
            wanted = {"fetch_size": str(fetch_size) if fetch_size else None,
                      "use_remote_estimate": "true" if remote_estimate else None}
            acts = []
            for k, v in wanted.items():
                if v is None and k in have:
                    acts.append(f"DROP {k}")
                elif v is not None:
                    acts.append(f"{'SET' if k in have else 'ADD'} {k} '{v}'")
            if acts:
                node.query(f"ALTER SERVER {FDW_SERVER} OPTIONS ({', '.join(acts)})", dbname=db)
            self.options[db] = (fetch_size, remote_estimate)


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    p = params if isinstance(params, Params) else validate(Params, params, f"{STUDY} parameters")
    inventory = inventory or Inventory()
    check(p, inventory)
    points = plan(p)
    with measured_run(STUDY, p, points, p.baseline, data_root=data_root, profile=profile, inventory=inventory,
                      resume=resume, tls=p.tls) as (store, s):
        targets = _topology(s, p, store)
        clients = _clients(s, p, targets)
        cores = int(store.manifest["hosts"][next(iter(clients.values())).host.name].get("cores", 2))
        _initialise(targets, store, p)
        _checks(targets, clients, store, p)
        if p.explain:
            _explain(targets, clients, store)
        if p.round_trip_transactions:
            _round_trips(targets, clients, store, p)
        hosts = [s.host(h) for h in p.hosts]
        nodes = {"source": targets.source, **({"external": targets.external} if targets.external else {})}
        with waits.sampler(p.wait_sample_ms) as sampler:

            def measure(pl: Planned, point: Point) -> str | None:
                def watch() -> AbstractContextManager:  # wait events over the workload's measured window
                    return waits.recording(sampler, point, nodes, delay_s=p.warmup_s)

                with cpu.during(hosts, point):
                    return _measure(pl, point, targets, clients, p, cores, watch)

            sweep.run(store, points, measure, desc=STUDY, progress=progress)
    return store.dir


def _topology(s: Session, p: Params, store: RunStore) -> Targets:
    """Both instances (the second only when a target needs it), pg_stat_statements loaded but idle."""
    s.deploy.open(p.hosts)  # every host first: pg_hba admits exactly their data addresses
    settings = {"max_connections": p.max_connections(), "shared_preload_libraries": "pg_stat_statements",
                "pg_stat_statements.track": "none", **p.server_settings}  # tracking only for the round-trip count
    source = s.deploy.node("source", p.source_host, settings)
    source.start()
    external = None
    if p.external:
        external = s.deploy.node("external", p.external_host_name, settings)
        external.start()
    store.manifest["tools"] = {
        prog: source.host.run([source.bin(prog), "--version"]).stdout.strip() for prog in ("postgres", "pgbench")}
    store.manifest["topology"] = {"source": source.describe(),
                                  **({"external": external.describe()} if external else {}), **s.deploy.where()}
    store.save()
    return Targets(source, external, p)


def _clients(s: Session, p: Params, t: Targets) -> dict[str, Client]:
    """Where each target's pgbench runs: ``client_host`` for all, or the target instance's own host."""
    out = {tg: s.deploy.client(p.client_host) if p.client_host else Client.on_node_host(t.node(tg))
           for tg in p.targets}
    if s.store:
        s.store.manifest["topology"]["clients"] = {tg: c.describe() for tg, c in out.items()}
        s.store.manifest["topology"]["databases"] = {tg: {"instance": t.node(tg).name, "database": DATABASES[tg]}
                                                     for tg in p.targets}
        s.store.save()
    return out


def server_options(source: Node, via: Node) -> tuple[dict[str, str], str]:
    """The foreign server's options for reaching the source from ``via``'s host (its socket when on the
    same host, else TCP to its data address), and the user mapping's user. No password: the backend's
    libpq reads the server process's PGPASSFILE, like every libpq program pglab starts."""
    kv = dict(part.split("=", 1) for part in source.dsn(SOURCE_DB, from_host=via.host).split())
    user = kv.pop("user", SUPERUSER)
    return kv, user


def setup_sql(target: str, options: dict[str, str], user: str) -> list[str]:
    """The article's set-up of one foreign database, statement by statement (recorded in the raw run)."""
    opts = ", ".join(f"{k} '{v}'" for k, v in options.items())
    sql = ["CREATE EXTENSION postgres_fdw",
           f"CREATE SERVER {FDW_SERVER} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({opts})",
           f"CREATE USER MAPPING FOR CURRENT_USER SERVER {FDW_SERVER} OPTIONS (user '{user}')",
           f"IMPORT FOREIGN SCHEMA public LIMIT TO ({', '.join(TABLES)}) FROM SERVER {FDW_SERVER} INTO public"]
    if target == "FDW_ext_ro":
        sql += [f"ALTER FOREIGN TABLE {tb} OPTIONS (ADD updatable 'false')" for tb in TABLES]
    return sql


def _initialise(t: Targets, store: RunStore, p: Params) -> None:
    """pgbench -i on the source; the foreign databases; REPEATABLE READ as every database's default."""
    point = store.point("init", unique=True, kind="init")
    t.source.query(f"create database {SOURCE_DB}")
    t.source.query("create extension pg_stat_statements")  # in postgres: read there, never counted in source
    res = pgbench.initialise(t.source, point, SOURCE_DB, p.scale)
    if res.exit_code != 0:
        point.finish("failed", "pgbench -i failed")
        raise ProcessError(t.source.host.name, res.command, res.exit_code, res.stdout, res.stderr)
    done: dict[str, list[str]] = {}
    for target in t.foreign():
        node, db = t.node(target), DATABASES[target]
        node.query(f"create database {db}")
        options, user = server_options(t.source, node)
        done[target] = setup_sql(target, options, user)
        for stmt in done[target]:
            node.query(stmt, dbname=db)
    for target in p.targets:
        t.node(target).query(f"alter database {DATABASES[target]} set default_transaction_isolation = '{ISOLATION}'")
    point.write_json("fdw_setup.json", done)
    point.finish("ok")


def _psql(t: Targets, target: str, client: Client, sql: str, timeout: float = 60) -> tuple[int, str, str]:
    """One statement in a new session made exactly like pgbench's (same host, same libpq environment)."""
    argv = [client.bin("psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql, DATABASES[target]]
    res = client.host.run(argv, env=pgbench.session_env(t.node(target), None, client), timeout=timeout, check=False)
    return res.exit_code, res.stdout.strip(), res.stderr.strip()


def isolation_in_effect(t: Targets, target: str, client: Client) -> str:
    code, out, err = _psql(t, target, client, "show transaction_isolation")
    if code != 0:
        raise ProcessError(client.host.name, "show transaction_isolation", code, out, err)
    return out


CHECK_SQL = ("select (select count(*) from pgbench_accounts), (select sum(abalance) from pgbench_accounts), "
             "(select count(*) from pgbench_branches), (select sum(bbalance) from pgbench_branches), "
             "(select count(*) from pgbench_tellers), (select sum(tbalance) from pgbench_tellers), "
             "(select count(*) from pgbench_history), "
             "(select sum(hashtext(aid::text || ':' || abalance)) from pgbench_accounts)")


def _checks(t: Targets, clients: dict[str, Client], store: RunStore, p: Params) -> None:
    """Same rows through every target; FDW_ext_ro refuses an UPDATE; REPEATABLE READ in each session.

    A failed check stops the run before any block: numbers from a broken set-up would mean nothing."""
    point = store.point("checks", unique=True, kind="checks")
    out: dict[str, Any] = {"rows": {}, "isolation": {}, "ext_ro_update": None}
    for target in p.targets:
        out["rows"][target] = [str(v) for v in t.node(target).query(CHECK_SQL, dbname=DATABASES[target])[0]]
        out["isolation"][target] = isolation_in_effect(t, target, clients[target])
    if "FDW_ext_ro" in p.targets:
        code, _, err = _psql(t, "FDW_ext_ro", clients["FDW_ext_ro"],
                             "update pgbench_branches set bbalance = bbalance where bid = 1")
        out["ext_ro_update"] = {"refused": code != 0, "error": err}
    source_rows = out["rows"].get("local") or [str(v) for v in t.source.query(CHECK_SQL, dbname=SOURCE_DB)[0]]
    problems = [f"{tg} sees {rows}, the source {source_rows}" for tg, rows in out["rows"].items()
                if rows != source_rows]
    problems += [f"{tg}: transaction_isolation {iso!r}, not {ISOLATION!r}" for tg, iso in out["isolation"].items()
                 if iso != ISOLATION]
    if out["ext_ro_update"] is not None and not out["ext_ro_update"]["refused"]:
        problems.append("FDW_ext_ro accepted an UPDATE (updatable 'false' not in effect)")
    out["consistent"] = not problems
    out["problems"] = problems
    point.write_json("checks.json", out)
    point.finish("ok" if not problems else "failed", "; ".join(problems) or None)
    store.manifest["checks"] = {"consistent": not problems, "isolation": out["isolation"],
                                "ext_ro_refuses_update": (out["ext_ro_update"] or {}).get("refused")}
    store.save()
    if problems:
        raise ProcessError(t.source.host.name, "fdw_overhead set-up checks", None, "", "; ".join(problems))


def script_statements(client: Client, workload: str) -> list[str]:
    """The SQL of pgbench's built-in script (``--show-script``), variables set to 1, BEGIN/END left out."""
    res = client.host.run([client.bin("pgbench"), f"--show-script={SCRIPTS[workload]}"], check=False)
    return statements_of(res.stdout + "\n" + res.stderr)


def statements_of(script: str) -> list[str]:
    """The data statements of a ``--show-script`` listing (meta-commands, comments, BEGIN/END dropped)."""
    out = []
    for line in script.splitlines():
        s = line.strip().rstrip(";")
        if s.split(" ", 1)[0].upper() in ("SELECT", "UPDATE", "INSERT", "DELETE"):
            out.append(re.sub(r":[a-z_]+", "1", s))
    return out


def _explain(t: Targets, clients: dict[str, Client], store: RunStore) -> None:
    """What postgres_fdw sends for each pgbench statement: EXPLAIN (VERBOSE) through every foreign target."""
    point = store.point("explain", unique=True, kind="explain")
    first = next(iter(clients.values()))
    scripts = {w: script_statements(first, w) for w in SCRIPTS}
    out: dict[str, Any] = {"scripts": scripts, "targets": {}}
    for target in t.foreign():
        node, db = t.node(target), DATABASES[target]
        per: dict[str, list[dict[str, Any]]] = {}
        for w, stmts in scripts.items():
            per[w] = []
            for stmt in stmts:
                try:
                    plan_lines = [r[0] for r in node.query(f"EXPLAIN (VERBOSE, COSTS OFF) {stmt}", dbname=db)]
                    per[w].append({"statement": stmt, "plan": plan_lines, "remote_sql": remote_sql(plan_lines)})
                except ProcessError:
                    raise
                except Exception as exc:  # noqa: BLE001  (a refused statement is a finding: FDW_ext_ro's UPDATE)
                    per[w].append({"statement": stmt, "error": str(exc).strip().splitlines()[0]})
        out["targets"][target] = per
    point.write_json("explain.json", out)
    point.finish("ok")


def remote_sql(plan_lines: list[str]) -> list[str]:
    return [ln.split("Remote SQL:", 1)[1].strip() for ln in plan_lines if "Remote SQL:" in ln]


STATEMENTS_SQL = ("select s.query, s.calls::bigint from pg_stat_statements s join pg_database d on d.oid = s.dbid "
                  "where d.datname = %s order by s.calls desc, s.query")


def _round_trips(t: Targets, clients: dict[str, Client], store: RunStore, p: Params) -> None:
    """Statements the source executes per transaction of each target (pg_stat_statements, track = top).

    For ``local`` they are pgbench's own; through a foreign target, postgres_fdw's. Each is at least one
    network round trip. Two runs, of N and 2N transactions: their difference divided by N leaves out
    what a session does once (pgbench's start-up queries, postgres_fdw's connection settings). Tracking
    is on only here, so the blocks run without its cost."""
    point = store.point("round_trips", unique=True, kind="round_trips")
    n = p.round_trip_transactions
    t.source.configure({"pg_stat_statements.track": "top"}, reload=True)
    out: dict[str, Any] = {"transactions": [n, 2 * n], "targets": {}}
    try:
        for target in p.targets:
            for w in ("RW", "RO"):
                if w == "RW" and target not in p.rw_targets:
                    continue
                c = clients[target]
                for k in (n, 2 * n):
                    t.source.query("select pg_stat_statements_reset()")
                    argv = pgbench.pgbench_argv(c, DATABASES[target], clients=1, transactions=k,
                                                select_only=w == "RO", no_vacuum=True)
                    res = pgbench.run(t.node(target), point, argv, timeout=p.client_timeout_s,
                                      prefix=f"{target}_{w}_{k}_", client=c)
                    rows = t.source.query(STATEMENTS_SQL, (SOURCE_DB,))
                    out["targets"].setdefault(target, {}).setdefault(w, {})[str(k)] = {
                        "exit_code": res.exit_code, "statements": [{"query": q, "calls": int(v)} for q, v in rows]}
    finally:
        t.source.configure({"pg_stat_statements.track": "none"}, reload=True)
    point.write_json("round_trips.json", out)
    point.finish("ok")


def _measure(pl: Planned, point: Point, t: Targets, clients: dict[str, Client], p: Params, cores: int,
             watch: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> str | None:
    """One point; None when it measured, else why not."""
    f = pl.group.factors
    target, kind, c = pl.config, str(f["kind"]), int(f["clients"])
    t.set_options(f["fetch_size"], bool(f["use_remote_estimate"]))
    node, client = t.node(target), clients[target]
    iso = isolation_in_effect(t, target, client)
    point.meta.update(transaction_isolation=iso, warmup_s=p.warmup_s, database=DATABASES[target],
                      instance=node.name)
    if iso != ISOLATION:
        return f"transaction_isolation is {iso!r} in the benchmark session, not {ISOLATION!r}"
    log, remote = pgbench.txlog_args(point, node, client) if p.transaction_log else ([], "")
    argv = pgbench.pgbench_argv(client, DATABASES[target], clients=c, jobs=p.jobs or min(c, cores),
                                duration_s=p.seconds, select_only=kind == "RO", no_vacuum=True, progress_s=1,
                                protocol=str(f["protocol"]), extra=[f"--max-tries={p.max_tries}", *log])
    with watch():
        code = pgbench.run(node, point, argv, timeout=p.seconds + p.client_timeout_s, client=client).exit_code
    if remote:
        point.meta["txlogs"] = pgbench.fetch_txlogs(point, node, remote, client)
    return None if code == 0 else f"pgbench exited {code}"
