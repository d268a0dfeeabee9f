"""The fdw_overhead set-up: the two instances, their databases and foreign servers, where each target's
pgbench runs, and the session every check opens like pgbench's.

``source`` (on ``source_host``) holds database ``source`` (the pgbench tables) and ``fdw_local``; the
``external`` instance (on ``external_host``) holds ``fdw_external`` and ``fdw_ext_ro``. postgres_fdw
authenticates like every libpq program pglab starts: the server process's PGPASSFILE, so no password is
in a user mapping, a command or a log.
"""

from __future__ import annotations

from pglab.errors import ProcessError
from pglab.nodes.node import Node
from pglab.nodes.topology import Client
from pglab.nodes.workspace import SUPERUSER
from pglab.runs import preflight, tools
from pglab.runs.session import Session
from pglab.runs.store import RunStore
from pglab.studies.fdw_overhead.params import Params
from pglab.workloads import pgbench

SOURCE_DB = "source"
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
DATABASES = {"local": SOURCE_DB, "FDW_local": "fdw_local", "FDW_external": "fdw_external", "FDW_ext_ro": "fdw_ext_ro"}
ISOLATION = "repeatable read"  # postgres_fdw's remote transactions; the local baseline must match
FDW_SERVER = "source_srv"


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

    def nodes(self) -> dict[str, Node]:
        """The instances by role: what the wait-event sampler watches."""
        return {"source": self.source, **({"external": self.external} if self.external else {})}

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


def deploy(s: Session, p: Params, store: RunStore) -> Targets:
    """Both instances (the second only when a target needs it), pg_stat_statements loaded but idle."""
    settings = {"max_connections": p.max_connections(), "shared_preload_libraries": "pg_stat_statements",
                "pg_stat_statements.track": "none", **p.server_settings}  # tracking only for the round-trip count
    source = s.deploy.node("source", p.source_host, settings)
    source.start()
    external = None
    if p.external:
        external = s.deploy.node("external", p.external_host_name, settings,
                                 preflight.builds_named(p).get("external_postgres"))
        external.start()
    tools.record(store, tools.versions(source.host, source.bin, ("postgres", "pgbench")),
                 {"postgres (external)": tools.versions(external.host, external.bin, ("postgres",))["postgres"]}
                 if external and external.bindir != source.bindir else {})
    store.manifest["topology"] = {"source": source.describe(),
                                  **({"external": external.describe()} if external else {}), **s.deploy.where()}
    store.save()
    return Targets(source, external, p)


def clients(s: Session, p: Params, t: Targets) -> dict[str, Client]:
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


def initialise(t: Targets, store: RunStore, p: Params) -> None:
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


def psql(t: Targets, target: str, client: Client, sql: str, timeout: float = 60) -> tuple[int, str, str]:
    """One statement in a new session made exactly like pgbench's (same host, same libpq environment)."""
    argv = [client.bin("psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql, DATABASES[target]]
    res = client.host.run(argv, env=pgbench.session_env(t.node(target), None, client), timeout=timeout, check=False)
    return res.exit_code, res.stdout.strip(), res.stderr.strip()


def isolation_in_effect(t: Targets, target: str, client: Client) -> str:
    code, out, err = psql(t, target, client, "show transaction_isolation")
    if code != 0:
        raise ProcessError(client.host.name, "show transaction_isolation", code, out, err)
    return out
