"""The fdw_overhead set-up points: what the study relies on, proven before the first block.

Every target reaches the same rows (counts and checksums through the foreign tables), FDW_ext_ro
refuses an UPDATE, each session runs under REPEATABLE READ (``checks``); the remote SQL postgres_fdw
sends for each pgbench statement (``explain``); how many statements reach the source per transaction
(``round_trips``).
"""

from __future__ import annotations

import re
from typing import Any

from pglab.errors import ProcessError
from pglab.nodes.topology import Client
from pglab.runs.store import RunStore
from pglab.studies.fdw_overhead.params import Params
from pglab.studies.fdw_overhead.targets import DATABASES, ISOLATION, SOURCE_DB, Targets, isolation_in_effect, psql
from pglab.workloads import pgbench

SCRIPTS = {"RW": "tpcb-like", "RO": "select-only"}  # pgbench --show-script names of -b default and -S


CHECK_SQL = ("select (select count(*) from pgbench_accounts), (select sum(abalance) from pgbench_accounts), "
             "(select count(*) from pgbench_branches), (select sum(bbalance) from pgbench_branches), "
             "(select count(*) from pgbench_tellers), (select sum(tbalance) from pgbench_tellers), "
             "(select count(*) from pgbench_history), "
             "(select sum(hashint8(aid::bigint * 4294967296 + abalance)) from pgbench_accounts)")
# the last sum pairs each aid with its balance; it has no text (whose collation postgres_fdw will not ship), so
# every aggregate runs on the source and a check through a foreign target costs 0.4 s, not 2.7 s at scale 10


def checks(t: Targets, clients: dict[str, Client], store: RunStore, p: Params) -> None:
    """Same rows through every target; FDW_ext_ro refuses an UPDATE; REPEATABLE READ in each session.

    A failed check stops the run before any block: numbers from a broken set-up would mean nothing."""
    point = store.point("checks", unique=True, kind="checks")
    out: dict[str, Any] = {"rows": {}, "isolation": {}, "ext_ro_update": None}
    for target in p.targets:
        out["rows"][target] = [str(v) for v in t.node(target).query(CHECK_SQL, dbname=DATABASES[target])[0]]
        out["isolation"][target] = isolation_in_effect(t, target, clients[target])
    if "FDW_ext_ro" in p.targets:
        code, _, err = psql(t, "FDW_ext_ro", clients["FDW_ext_ro"],
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


def explain(t: Targets, clients: dict[str, Client], store: RunStore) -> None:
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


def round_trips(t: Targets, clients: dict[str, Client], store: RunStore, p: Params) -> None:
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
