"""The streaming_scale_out topology and what is in effect on it: the mode, the streaming standbys, the table.

The primary on ``primary_host``, standby ``sb1``... on ``standby_hosts`` (default: the primary's host),
each with a physical replication slot so that a standby detached for the ``none`` mode catches up
afterwards. A mode is put in effect and proved: a new session's ``SHOW synchronous_commit``, each
standby's ``sync_state``.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pglab.errors import ProcessError
from pglab.nodes import topology
from pglab.nodes.node import Node
from pglab.runs import tools
from pglab.runs.session import Session
from pglab.runs.store import RunStore
from pglab.runs.sweep import Abort
from pglab.studies.streaming_scale_out.params import LEVEL, SYNC_MODES, Params
from pglab.workloads import tsbs

DB = "tsbs"
START = datetime(2016, 1, 1, tzinfo=UTC)  # TSBS's default start of the simulated time
HYPERTABLE = "hypertable"


@dataclass
class State:
    """The run's topology and what is in effect now (mode, streaming standbys, the loaded layout)."""

    s: Session
    p: Params
    topo: topology.Streaming
    client: topology.Client
    timescale: str | None
    mode: str | None = None
    streaming: set[str] = field(default_factory=set)  # attached to the primary; the others run detached
    loaded: str | None = None  # layout whose full data set is loaded and analysed (for reads)

    @property
    def primary(self) -> Node:
        return self.topo.primary

    def insert_standbys(self) -> list[Node]:
        return self.topo.standbys[: self.p.standbys]


def deploy(s: Session, p: Params, store: RunStore, timescale: str | None) -> State:
    """The primary and the insert standbys (with slots), the database, the tags; TimescaleDB if installed."""
    settings: dict[str, Any] = {"max_connections": p.max_connections(), "max_wal_senders": 10,
                                "max_replication_slots": 10, "hot_standby_feedback": "on",
                                # a re-attached standby's walreceiver starts within this (default 5 s)
                                "wal_retrieve_retry_interval": "100ms", **p.server_settings}
    if timescale:
        settings["shared_preload_libraries"] = "timescaledb"
    topo = topology.streaming(s.deploy, p.primary_host, [(f"sb{i + 1}", p.standby_host(i)) for i in range(p.standbys)],
                              settings=settings)
    primary = topo.primary
    primary.query(f"create database {DB}")
    client = s.deploy.client(p.client_host) if p.client_host else topology.Client.on_node_host(primary)
    st = State(s, p, topo, client, timescale, streaming={sb.name for sb in topo.standbys})
    for sb in topo.standbys:
        slot(primary, sb)
    with primary.connect(DB) as conn:
        available = tsbs.timescale_available(conn)
        if timescale:
            conn.execute("create extension if not exists timescaledb")
        tsbs.load_tags(conn, p.devices, p.seed)
    store.manifest["timescaledb"]["available_on_primary"] = available
    tools.record(store, tools.versions(primary.host, primary.bin, ("postgres", "pgbench", "pg_basebackup")),
                 {"tsbs_loader": f"pglab.workloads.tsbs ({sys.executable})"})
    store.manifest["topology"] = {**topo.describe(), **s.deploy.where(), "clients": {"all": client.describe()}}
    store.manifest["data"] = {"devices": p.devices, "duration_s": p.duration_s, "interval_s": p.interval_s,
                              "rows": p.rows, "metrics": p.rows * 10, "start": START.isoformat(), "seed": p.seed}
    store.save()
    return st


def slot(primary: Node, sb: Node) -> None:
    """A physical slot per standby: WAL is kept while it is detached (mode ``none``) until it catches up."""
    primary.query("select pg_create_physical_replication_slot(%s, true)", (sb.name,))
    sb.configure({"primary_slot_name": sb.name}, reload=True)


def ensure_standbys(st: State, n: int) -> None:
    """At least ``n`` standbys exist and stream (the read phase may need more than the inserts)."""
    while len(st.topo.standbys) < n:
        i = len(st.topo.standbys)
        sb = st.s.deploy.standby(st.primary, f"sb{i + 1}", st.p.standby_host(i))
        st.topo.standbys.append(sb)
        sb.start()
        slot(st.primary, sb)
        st.streaming.add(sb.name)
        if st.s.store:
            st.s.store.manifest["topology"] = {**st.s.store.manifest["topology"], **st.topo.describe()}
            st.s.store.save()


def detach(st: State, standbys: list[Node], timeout: float = 30) -> None:
    """Stop ``standbys`` streaming (an empty primary_conninfo, reloaded) and wait until the primary has
    no walsender for them. Stopping them instead cost 1-2 s per ``none`` point and as much to restart;
    detached, they keep running idle and their slots keep the WAL they will replay."""
    gone = [sb for sb in standbys if sb.name in st.streaming]
    for sb in gone:
        sb.configure({"primary_conninfo": ""}, reload=True)
        st.streaming.discard(sb.name)
    names = [sb.name for sb in gone]
    deadline = time.monotonic() + timeout
    while names and st.primary.query("select count(*) from pg_stat_replication where application_name = any(%s)",
                                     (names,))[0][0]:
        if time.monotonic() > deadline:
            raise ProcessError(st.primary.host.name, "detach standbys", None, "",
                               f"{', '.join(names)} still streaming {timeout:.0f} s after primary_conninfo was emptied",
                               timed_out=True)
        time.sleep(0.02)


def attach(st: State, standbys: list[Node]) -> None:
    """Streaming again (``set_mode`` waits for their state and replay)."""
    for sb in standbys:
        if sb.name not in st.streaming:
            sb.configure({"primary_conninfo": st.primary.replication_conninfo(sb.name)}, reload=True)
            st.streaming.add(sb.name)


def set_mode(st: State, mode: str, timeout: float = 60, replay: bool = True) -> dict[str, Any]:
    """Put ``mode`` in effect on the insert standbys and prove it (SHOW in a new session, sync_state).

    Without ``replay`` the caller waits for the standbys' replay itself (an insert point: after the
    table is made afresh, so that the catch-up overlaps it)."""
    p, primary = st.p, st.primary
    wanted = [] if mode == "none" else st.insert_standbys()
    detach(st, [sb for sb in st.topo.standbys if sb not in wanted])  # none: no standby at all; otherwise
    attach(st, wanted)                                                # only the insert standbys replicate
    names = topology.sync_names(p.sync_method, p.sync_count, [sb.name for sb in wanted]) \
        if mode in SYNC_MODES else ""
    primary.configure({"synchronous_standby_names": names, "synchronous_commit": LEVEL[mode]}, reload=True)
    deadline = time.monotonic() + timeout
    while (shown := primary.query_fresh("show synchronous_commit", dbname=DB)[0][0]) != LEVEL[mode] \
            or primary.query_fresh("show synchronous_standby_names")[0][0] != names:
        if time.monotonic() > deadline:
            raise ProcessError(primary.host.name, "show synchronous_commit", None, "",
                               f"still {shown!r} after reload, wanted {LEVEL[mode]!r}", timed_out=True)
        time.sleep(0.05)
    expect = topology.expected_sync_states(p.sync_method if mode in SYNC_MODES else None, p.sync_count,
                                           [sb.name for sb in wanted])
    states = topology.Streaming(primary, wanted, p.sync_method if mode in SYNC_MODES else None, p.sync_count) \
        .wait_sync_states(timeout) if wanted else {}
    for sb in wanted if replay else []:
        primary.wait_for_replay(sb, timeout=600)  # a re-attached standby first replays what it missed
    st.mode = mode
    in_tx = None
    if mode == "per_transaction":  # what the loader's SET LOCAL gives a transaction under this default
        with primary.connect(DB, autocommit=False) as conn:
            conn.execute("set local synchronous_commit = local")
            in_tx = conn.execute("show synchronous_commit").fetchone()[0]
            conn.rollback()
    return {"in_transaction_after_set_local": in_tx, "synchronous_commit_in_effect": shown,
            "synchronous_standby_names": names, "sync_state": states,
            "expected_sync_state": {k: sorted(v) for k, v in expect.items()},
            "standbys_streaming": sorted(st.streaming),
            "set_local": "synchronous_commit = local" if mode == "per_transaction" else None}


def fresh_table(st: State, layout: str) -> None:
    """The cpu table made afresh in ``layout`` (its partitions ahead of the load), then a checkpoint so
    that every point starts from the same state (full-page writes after it alike)."""
    end = START + timedelta(seconds=st.p.duration_s)
    stmts = ["drop table if exists cpu cascade",
             *tsbs.schema_sql(layout, START, end, st.p.chunk_interval_s,
                              st.timescale if layout == HYPERTABLE else None)]
    with st.primary.connect(DB) as conn:
        for sql in stmts:
            conn.execute(sql)
    st.primary.query("checkpoint")
    st.loaded = None


def row_counts(st: State, nodes: list[Node]) -> dict[str, list[Any]]:
    """Every node's count and checksum of the cpu table, asked at once (each node its own backend)."""
    sql = "select count(*), count(distinct tags_id), min(time)::text, max(time)::text, sum(usage_user)::text from cpu"
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        rows = list(pool.map(lambda n: n.query(sql, dbname=DB)[0], nodes))
    return {n.name: [str(v) for v in row] for n, row in zip(nodes, rows, strict=True)}


def ensure_alive(st: State) -> None:
    """A standby that died in an earlier point ends the run, with its name."""
    dead = [sb.name for sb in st.topo.standbys if not sb.is_running()]
    if dead:
        raise Abort(f"standby {', '.join(dead)} is not running any more: the topology is broken")
