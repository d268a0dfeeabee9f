"""Read points: the data loaded once per layout and checked on every node, then pgbench on 1, 3 or 5 nodes.

A read point runs ``read_clients`` pgbench clients (TSBS query scripts) spread round-robin over the
primary and the first standbys, all at once; before a layout's first read point its full data set is
loaded, replayed, and every query type's result compared between the primary and each standby.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pglab.nodes import cpu_quota
from pglab.nodes.node import Node
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Abort, Planned
from pglab.studies.streaming_scale_out.deploy import (
    DB,
    START,
    State,
    attach,
    ensure_alive,
    ensure_standbys,
    fresh_table,
    row_counts,
)
from pglab.studies.streaming_scale_out.load import load
from pglab.workloads import pgbench, tsbs


def read_data(st: State, layout: str, store: RunStore) -> None:
    """The full data set in ``layout`` on every node the reads use, analysed and replayed; then every
    query type's result on each standby compared with the primary's (a failed comparison ends the run)."""
    p = st.p
    need = max(p.read_nodes) - 1
    point = store.point(f"readdata-{layout}", unique=True, kind="read_data", layout=layout)
    ensure_standbys(st, need)
    if st.mode != "async" or any(sb.name not in st.streaming for sb in st.topo.standbys[:need]):
        attach(st, st.topo.standbys[:need])
        st.primary.configure({"synchronous_standby_names": "", "synchronous_commit": "on"}, reload=True)
        st.mode = "async"
    fresh_table(st, layout)
    reason = load(st, point, "async")
    if reason:
        point.finish("failed", reason)
        raise Abort(f"loading the read data ({layout}) failed: {reason}")
    st.primary.query("vacuum analyze cpu", dbname=DB)
    st.primary.query("vacuum analyze tags", dbname=DB)
    st.primary.query("checkpoint")
    nodes = [st.primary, *st.topo.standbys[:need]]
    for sb in nodes[1:]:
        st.primary.wait_for_replay(sb, timeout=600)
    end = START + timedelta(seconds=p.duration_s)
    results: dict[str, Any] = {"counts": row_counts(st, nodes), "queries": {}}
    problems = []
    for q in p.query_types:
        with st.primary.connect(DB) as conn:  # parameters whose answer is not empty (high-cpu-1 may be)
            params = tsbs.params_with_rows(conn, q, p.devices, START, end, p.seed)
        sql, args = tsbs.query_sql(q, {k: v for k, v in params.items() if k != "seed"})
        got = {n.name: [[str(v) for v in row] for row in n.query(sql, args, dbname=DB)] for n in nodes}
        same = all(r == got[st.primary.name] for r in got.values())
        results["queries"][q] = {"params": {k: str(v) for k, v in params.items()}, "sql": sql,
                                 "rows": len(got[st.primary.name]), "same_on_every_node": same,
                                 "results": got[st.primary.name][:20]}
        if not same:
            problems.append(f"{q}: a standby's result differs from the primary's")
        if not got[st.primary.name]:
            problems.append(f"{q}: no rows on the primary (its parameters miss the data)")
    point.write_json("read_checks.json", results)
    point.finish("ok" if not problems else "failed", "; ".join(problems) or None)
    store.manifest.setdefault("read_checks", {})[layout] = {
        "same_on_every_node": {q: v["same_on_every_node"] for q, v in results["queries"].items()},
        "nodes": [n.name for n in nodes]}
    store.save()
    if problems:
        raise Abort("; ".join(problems))
    st.loaded = layout


def spread(clients: int, nodes: list[Node]) -> dict[str, int]:
    """Clients round-robin over the nodes: node i gets every client j with j % n == i."""
    out = {n.name: 0 for n in nodes}
    for j in range(clients):
        out[nodes[j % len(nodes)].name] += 1
    return {k: v for k, v in out.items() if v}


def read(st: State, pl: Planned, point: Point, layout: str, qtype: str) -> str | None:
    p = st.p
    store = st.s.store
    assert store is not None
    if st.loaded != layout:
        read_data(st, layout, store)
    ensure_alive(st)
    n = int(pl.config.lstrip("n"))
    nodes = [st.primary, *st.topo.standbys[: n - 1]]
    per = spread(p.read_clients, nodes)
    end = START + timedelta(seconds=p.duration_s)
    script = f"{st.client.ws.base}/tsbs-{qtype}.sql"
    st.client.host.write_text(script, tsbs.pgbench_script(qtype, p.devices, START, end), mode=0o644)
    point.meta.update(layout=layout, query_type=qtype, nodes=n, clients_per_node=per, read_clients=p.read_clients,
                      warmup_s=p.warmup_s)
    cores = int(store.manifest["hosts"][st.client.host.name].get("cores", 2))
    before = cpu_quota.stats({n.name: n.cpu_group for n in nodes})  # a machine per node: its quota's periods
    bgs, logs = [], {}
    try:
        for i, node in enumerate(nodes):
            if node.name not in per:
                continue
            c = per[node.name]
            log, logs[node.name] = pgbench.txlog_args(point, node, st.client, prefix=node.name) \
                if p.transaction_log else ([], "")
            argv = pgbench.pgbench_argv(st.client, DB, clients=c, jobs=min(c, cores), duration_s=p.read_seconds,
                                        no_vacuum=True, progress_s=1,
                                        extra=["-f", script, f"--random-seed={p.seed * 1000 + pl.block * 10 + i}",
                                               *log])
            bgs.append((node, st.s.track_background(pgbench.start(node, point, argv, prefix=f"{node.name}_",
                                                                  client=st.client))))
        codes = {node.name: pgbench.collect(bg, point, f"{node.name}_", timeout=p.read_seconds + p.client_timeout_s)
                 .exit_code for node, bg in bgs}
    finally:
        for _, bg in bgs:
            if bg.exit_code is None:
                bg.stop()
            st.s.untrack_background(bg)
    point.meta["exit_codes"] = codes
    if before:  # how much of its quota each node used up: near all, the node (not the clients) was the limit
        point.meta["cpu_groups"] = cpu_quota.used(before, cpu_quota.stats({n.name: n.cpu_group for n in nodes}))
    for node, _ in bgs:
        if logs.get(node.name):
            point.meta.setdefault("txlogs", {})[node.name] = pgbench.fetch_txlogs(point, node, logs[node.name],
                                                                                st.client, prefix=node.name)
    bad = {k: v for k, v in codes.items() if v}
    return None if not bad else f"pgbench exited {bad}"
