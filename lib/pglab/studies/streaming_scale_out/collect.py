"""Collect: a primary and streaming standbys; TSBS cpu-only inserts in every mode, then reads over 1..5 nodes.

Topology (``pglab.nodes.topology.streaming``): the primary on ``primary_host``, standby ``sb1``... on
``standby_hosts`` (default: the primary's host), each with a physical replication slot so that a standby
stopped for the ``none`` mode catches up afterwards. The loader and the query clients run on
``client_host`` (default: the primary's host).

Insert points: the mode is put in effect and proved (a new session's ``SHOW synchronous_commit``, each
standby's ``sync_state``), the ``cpu`` table is made afresh in the point's layout, then the loader
(``python -m pglab.workloads.tsbs load``, a program on the client's host, like pgbench) writes the same
seeded rows in batches of ``batch``, one transaction each, from ``clients`` connections. The standbys'
replay lag is sampled during the load; a standby that must confirm commits and stops streaming fails the
point and ends the run (every commit would wait for it). After the load every node must hold the same
rows.

Read points: the data loaded once per layout, replay caught up, then every query type's result compared
between the primary and each standby; a read point runs ``read_clients`` pgbench clients (TSBS query
scripts) spread round-robin over 1, 3 or 5 nodes, all at once.
"""

from __future__ import annotations

import contextlib
import csv
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pglab.errors import ProcessError
from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory
from pglab.nodes import topology
from pglab.nodes.node import Node
from pglab.runs import preflight, sweep
from pglab.runs.cleanup import Session
from pglab.runs.params import validate
from pglab.runs.resume import measured_run
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Abort, Group, Planned, plan_blocks
from pglab.studies.streaming_scale_out import STUDY
from pglab.studies.streaming_scale_out.params import LEVEL, SYNC_MODES, Params
from pglab.workloads import cpu, pgbench, tsbs, waits

DB = "tsbs"
START = datetime(2016, 1, 1, tzinfo=UTC)  # TSBS's default start of the simulated time
HYPERTABLE = "hypertable"


def layouts(p: Params, timescale: str | None) -> list[str]:
    """The layouts of the run: the parameter's, and TimescaleDB's hypertable where it is installed."""
    return [*p.layouts, *([HYPERTABLE] if p.timescale and timescale else [])]


def plan(p: Params, timescale: str | None = None) -> list[Planned]:
    """Insert blocks (every mode once per layout, ``none`` twice), then read blocks per layout (every node
    count once per query type, one node twice), each in a seeded random order (``pglab.runs.sweep``)."""
    out: list[Planned] = []
    lays = layouts(p, timescale)
    groups = [Group(lay, {"kind": "insert", "layout": lay}) for lay in lays]
    out += plan_blocks(p.modes, p.baseline, groups, p.blocks, p.seed, prefix="insert")
    if p.read_nodes:
        nodes = [f"n{n}" for n in sorted(p.read_nodes)]
        reads = [lay for lay in lays if p.read_layouts is None or lay in p.read_layouts]
        for i, lay in enumerate(reads):  # one layout's data at a time: its read blocks together
            qgroups = [Group(f"{lay}-{q}", {"kind": "read", "layout": lay, "query_type": q}) for q in p.query_types]
            out += plan_blocks(nodes, "n1", qgroups, p.read_blocks, p.seed + 1 + i, prefix="read")
    return out


def timescale_installed(host: Host, bindir: str) -> str | None:
    """TimescaleDB's default version when its extension files are on ``host`` (before any server starts)."""
    res = host.run([f"{bindir}/pg_config", "--sharedir"], check=False)
    if res.exit_code != 0:
        return None
    return control_version(host.run(["cat", f"{res.stdout.strip()}/extension/timescaledb.control"],
                                     check=False).stdout)


def control_version(control: str) -> str | None:
    """``default_version`` of an extension control file's text (None when empty: not installed)."""
    for line in control.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "default_version":
            return value.strip().strip("'\"") or None
    return None


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError (``pglab check``)."""
    examine(p, inventory)


def examine(p: Params, inventory: Inventory) -> dict[str, Any]:
    """``check``, and what was found of TimescaleDB on the nodes' hosts (the plan depends on it)."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "pg_config"))
    found: dict[str, str | None] = {}
    try:
        client = hosts.get(p.client_host or p.primary_host)
        if client is not None and not client.exists(sys.executable):
            problems.append(f"client host {client.name}: no {sys.executable} (the TSBS loader runs there as "
                            "`python -m pglab.workloads.tsbs`; use a host that has pglab, such as local or a lab host)")
        for name in dict.fromkeys([p.primary_host, *(p.standby_host(i) for i in range(p.standby_count))]):
            if name in hosts:
                found[name] = timescale_installed(hosts[name], inventory.entry(name).bindir)
    finally:
        for h in hosts.values():
            h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    problems += preflight.connection_problems(max_conn, max(p.clients, p.read_clients) + p.standby_count + 3)
    preflight.require(problems)
    versions = set(found.values())
    version = versions.pop() if len(versions) == 1 else None
    why = ("installed on every node's host" if version else
           "not installed on " + ", ".join(h for h, v in found.items() if not v) if None in found.values() else
           f"different versions on the nodes' hosts: {found}")
    return {"available": bool(version), "version": version, "wanted": p.timescale, "per_host": found,
            "note": f"TimescaleDB {why}" + ("" if version else
                                            "; the chunked layout is measured with native partitions (layout "
                                            "partitioned), never labelled as TimescaleDB")}


@dataclass
class State:
    """The run's topology and what is in effect now (mode, running standbys, the loaded layout)."""

    s: Session
    p: Params
    topo: topology.Streaming
    client: topology.Client
    timescale: str | None
    mode: str | None = None
    running: set[str] = field(default_factory=set)
    loaded: str | None = None  # layout whose full data set is loaded and analysed (for reads)

    @property
    def primary(self) -> Node:
        return self.topo.primary

    def insert_standbys(self) -> list[Node]:
        return self.topo.standbys[: self.p.standbys]


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    p = params if isinstance(params, Params) else validate(Params, params, f"{STUDY} parameters")
    inventory = inventory or Inventory()
    ts = examine(p, inventory)
    points = plan(p, ts["version"])
    with measured_run(STUDY, p, points, p.baseline, data_root=data_root, profile=profile, inventory=inventory,
                      resume=resume, tls=p.tls) as (store, s):
        store.manifest["timescaledb"] = ts
        st = _topology(s, p, store, ts["version"] if p.timescale else None)
        hosts = [s.host(h) for h in p.hosts]
        with waits.sampler(p.wait_sample_ms) as sampler:  # the loader's backends: SyncRep is the sync modes' cost

            def measure(pl: Planned, point: Point) -> str | None:
                def watch() -> AbstractContextManager:
                    return waits.recording(sampler, point, {"primary": st.primary})

                with cpu.during(hosts, point):
                    return _measure(st, pl, point, watch)

            sweep.run(store, points, measure, desc=STUDY, progress=progress)
    return store.dir


def _topology(s: Session, p: Params, store: RunStore, timescale: str | None) -> State:
    """The primary and the insert standbys (with slots), the database, the tags; TimescaleDB if installed."""
    s.deploy.open(p.hosts)
    settings: dict[str, Any] = {"max_connections": p.max_connections(), "max_wal_senders": 10,
                                "max_replication_slots": 10, "hot_standby_feedback": "on", **p.server_settings}
    if timescale:
        settings["shared_preload_libraries"] = "timescaledb"
    topo = topology.streaming(s.deploy, p.primary_host, [(f"sb{i + 1}", p.standby_host(i)) for i in range(p.standbys)],
                              settings=settings)
    primary = topo.primary
    primary.query(f"create database {DB}")
    client = s.deploy.client(p.client_host) if p.client_host else topology.Client.on_node_host(primary)
    st = State(s, p, topo, client, timescale, running={sb.name for sb in topo.standbys})
    for sb in topo.standbys:
        _slot(primary, sb)
    with primary.connect(DB) as conn:
        available = tsbs.timescale_available(conn)
        if timescale:
            conn.execute("create extension if not exists timescaledb")
        tsbs.load_tags(conn, p.devices, p.seed)
    store.manifest["timescaledb"]["available_on_primary"] = available
    store.manifest["tools"] = {prog: primary.host.run([primary.bin(prog), "--version"]).stdout.strip()
                               for prog in ("postgres", "pgbench", "pg_basebackup")}
    store.manifest["tools"]["tsbs_loader"] = f"pglab.workloads.tsbs ({sys.executable})"
    store.manifest["topology"] = {**topo.describe(), **s.deploy.where(), "clients": {"all": client.describe()}}
    store.manifest["data"] = {"devices": p.devices, "duration_s": p.duration_s, "interval_s": p.interval_s,
                              "rows": p.rows, "metrics": p.rows * 10, "start": START.isoformat(), "seed": p.seed}
    store.save()
    return st


def _slot(primary: Node, sb: Node) -> None:
    """A physical slot per standby: WAL is kept while it is stopped (mode ``none``) until it catches up."""
    primary.query("select pg_create_physical_replication_slot(%s, true)", (sb.name,))
    sb.configure({"primary_slot_name": sb.name}, reload=True)


def _ensure_standbys(st: State, n: int) -> None:
    """At least ``n`` standbys exist and stream (the read phase may need more than the inserts)."""
    while len(st.topo.standbys) < n:
        i = len(st.topo.standbys)
        sb = st.s.deploy.standby(st.primary, f"sb{i + 1}", st.p.standby_host(i))
        st.topo.standbys.append(sb)
        sb.start()
        _slot(st.primary, sb)
        st.running.add(sb.name)
        if st.s.store:
            st.s.store.manifest["topology"] = {**st.s.store.manifest["topology"], **st.topo.describe()}
            st.s.store.save()


def set_mode(st: State, mode: str, timeout: float = 60) -> dict[str, Any]:
    """Put ``mode`` in effect on the insert standbys and prove it (SHOW in a new session, sync_state)."""
    p, primary = st.p, st.primary
    wanted = [] if mode == "none" else st.insert_standbys()
    extra = [sb for sb in st.topo.standbys if sb not in wanted]
    for sb in extra:  # none: no standby at all; otherwise only the insert standbys replicate
        if sb.name in st.running:
            sb.stop()
            st.running.discard(sb.name)
    for sb in wanted:
        if sb.name not in st.running:
            sb.start()
            st.running.add(sb.name)
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
    for sb in wanted:
        primary.wait_for_replay(sb, timeout=600)  # a restarted standby first replays what it missed
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
            "standbys_running": sorted(st.running),
            "set_local": "synchronous_commit = local" if mode == "per_transaction" else None}


def _fresh_table(st: State, layout: str) -> None:
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


def _counts(st: State, nodes: list[Node]) -> dict[str, list[Any]]:
    sql = "select count(*), count(distinct tags_id), min(time)::text, max(time)::text, sum(usage_user)::text from cpu"
    return {n.name: [str(v) for v in n.query(sql, dbname=DB)[0]] for n in nodes}


class LagSampler:
    """Samples every standby's lag on the primary during a load (its own connection, its own thread);
    notices a standby that must confirm commits and is gone for ``loss_s`` (commits would wait forever)."""

    COLS = ["t_s", "standby", "state", "sync_state", "sent_lag_bytes", "replay_lag_bytes", "write_lag_s",
            "flush_lag_s", "replay_lag_s"]

    def __init__(self, primary: Node, expected: list[str], path: Path, period_s: float, loss_s: float,
                 need: int):
        self.primary, self.expected, self.path = primary, expected, path
        self.period_s, self.loss_s, self.need = period_s, loss_s, need  # need: standbys a commit waits for
        self.lost: str | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        sql = ("select application_name, state, sync_state, pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn), "
               "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), extract(epoch from write_lag), "
               "extract(epoch from flush_lag), extract(epoch from replay_lag) from pg_stat_replication")
        t0 = time.monotonic()
        seen = dict.fromkeys(self.expected, t0)
        try:
            with self.primary.connect() as conn, open(self.path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(self.COLS)
                while not self._stop.is_set():
                    now = time.monotonic()
                    for name, state, sync, sent, replay, wl, fl, rl in conn.execute(sql).fetchall():
                        w.writerow([round(now - t0, 3), name, state, sync, sent, replay, wl, fl, rl])
                        if state == "streaming" and name in seen:
                            seen[name] = now
                    gone = [n for n, t in seen.items() if now - t > self.loss_s]
                    if gone and len(seen) - len(gone) < self.need and self.lost is None:
                        self.lost = ", ".join(gone)  # fewer standbys than a commit waits for: it never returns
                    self._stop.wait(self.period_s)
        except Exception as exc:  # noqa: BLE001  (the load goes on; the point records that sampling broke)
            self.error = f"{type(exc).__name__}: {exc}"


def _loader_argv(st: State, point: Point, out: str, set_local: bool) -> list[str]:
    p = st.p
    argv = [sys.executable, "-m", "pglab.workloads.tsbs", "load", "--devices", str(p.devices),
            "--start", START.isoformat(), "--duration-s", str(p.duration_s), "--interval-s", str(p.interval_s),
            "--batch", str(p.batch), "--clients", str(p.clients), "--seed", str(p.seed), "--table", "cpu",
            "--out", out]
    if set_local:
        argv += ["--set-local", "synchronous_commit=local"]
    return argv


def load(st: State, point: Point, mode: str) -> str | None:
    """One load through the loader program on the client's host, its lag sampled; None when it measured."""
    c, primary = st.client, st.primary
    out = f"{c.ws.base}/tsbs-{point.dir.parent.name}-{point.id}"
    c.host.mkdir(out)
    env = {**pgbench.session_env(primary, None, c), "PGDATABASE": DB}
    argv = _loader_argv(st, point, out, mode == "per_transaction")
    expected = [] if mode == "none" else [sb.name for sb in st.insert_standbys()]
    need = st.p.sync_count if mode in SYNC_MODES and mode != "per_transaction" else 0  # SET LOCAL local: no wait
    bg = st.s.track_background(c.host.start(argv, f"{out}.stdout", f"{out}.stderr", env=env))
    reason = None
    try:
        with LagSampler(primary, expected, point.dir / "lag.csv", st.p.lag_sample_s, st.p.standby_loss_s,
                        need) as lag:
            deadline = time.monotonic() + st.p.client_timeout_s
            while bg.running():
                if lag.lost:
                    reason = (f"standby {lag.lost} stopped streaming during a {mode} load: every commit waits "
                              f"for it, so the load was stopped and the run ends (see lag.csv)")
                    break
                if time.monotonic() > deadline:
                    reason = f"the load ran longer than client_timeout_s={st.p.client_timeout_s}; stopped"
                    break
                time.sleep(0.1)
        if lag.error:
            point.meta["lag_sampler_error"] = lag.error
    finally:
        if bg.running():
            bg.stop()
            _release_waiters(primary)
        code = bg.wait(30)
        st.s.untrack_background(bg)
        point.record(_result(bg, code), "load_")
        for name in ("batches.csv", "summary.json"):
            if c.host.exists(f"{out}/{name}"):
                c.host.get(f"{out}/{name}", point.dir / name, mode=0o644)
        c.host.remove_tree(out)
        c.host.run(["rm", "-f", f"{out}.stdout", f"{out}.stderr"], check=False)
    if reason and "standby" in reason:
        raise Abort(reason)
    if reason:
        return reason
    return None if code == 0 else f"loader exited {code}"


def _result(bg: Any, code: int) -> Any:
    from pglab.hosts.base import Result

    out, err = bg.output()
    return Result(bg.host.name, bg.command, code, out, err, 0.0)


def _release_waiters(primary: Node) -> None:
    """Backends left waiting for a standby that will not confirm: terminate them (their commit is local)."""
    with contextlib.suppress(Exception):
        primary.query("select pg_terminate_backend(pid) from pg_stat_activity where wait_event = 'SyncRep'")


def _measure(st: State, pl: Planned, point: Point,
             watch: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> str | None:
    f = pl.group.factors
    if f["kind"] == "insert":
        return _insert(st, pl, point, str(f["layout"]), watch)
    return _read(st, pl, point, str(f["layout"]), str(f["query_type"]))


def _insert(st: State, pl: Planned, point: Point, layout: str,
            watch: Callable[[], AbstractContextManager]) -> str | None:
    mode = pl.config
    _ensure_alive(st)
    point.meta.update(set_mode(st, mode), mode=mode, layout=layout, rows_expected=st.p.rows,
                      batch=st.p.batch, clients=st.p.clients)
    _fresh_table(st, layout)
    for sb in st.topo.standbys:
        if sb.name in st.running:
            st.primary.wait_for_replay(sb, timeout=600)
    with watch():
        reason = load(st, point, mode)
    if reason:
        return reason
    running = [sb for sb in st.topo.standbys if sb.name in st.running]
    point.meta["replay_after_load_s"] = {sb.name: round(st.primary.wait_for_replay(sb, timeout=600), 3)
                                         for sb in running}
    counts = _counts(st, [st.primary, *running])
    point.write_json("counts.json", counts)
    problems = [f"{n} holds {c}, the primary {counts[st.primary.name]}" for n, c in counts.items()
                if c != counts[st.primary.name]]
    if int(counts[st.primary.name][0]) != st.p.rows:
        problems.append(f"the primary holds {counts[st.primary.name][0]} rows, the load wrote {st.p.rows}")
    if problems:
        point.finish("inconsistent", "; ".join(problems))
    return None


def _ensure_alive(st: State) -> None:
    """A standby that should run and does not (it died in an earlier point) ends the run, with its name."""
    dead = [sb.name for sb in st.topo.standbys if sb.name in st.running and not sb.is_running()]
    if dead:
        raise Abort(f"standby {', '.join(dead)} is not running any more: the topology is broken")


def read_data(st: State, layout: str, store: RunStore) -> None:
    """The full data set in ``layout`` on every node the reads use, analysed and replayed; then every
    query type's result on each standby compared with the primary's (a failed comparison ends the run)."""
    p = st.p
    need = max(p.read_nodes) - 1
    point = store.point(f"readdata-{layout}", unique=True, kind="read_data", layout=layout)
    _ensure_standbys(st, need)
    if st.mode != "async" or any(sb.name not in st.running for sb in st.topo.standbys[:need]):
        for sb in st.topo.standbys[:need]:
            if sb.name not in st.running:
                sb.start()
                st.running.add(sb.name)
        st.primary.configure({"synchronous_standby_names": "", "synchronous_commit": "on"}, reload=True)
        st.mode = "async"
    _fresh_table(st, layout)
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
    results: dict[str, Any] = {"counts": _counts(st, nodes), "queries": {}}
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


def _read(st: State, pl: Planned, point: Point, layout: str, qtype: str) -> str | None:
    p = st.p
    store = st.s.store
    assert store is not None
    if st.loaded != layout:
        read_data(st, layout, store)
    _ensure_alive(st)
    n = int(pl.config.lstrip("n"))
    nodes = [st.primary, *st.topo.standbys[: n - 1]]
    per = spread(p.read_clients, nodes)
    end = START + timedelta(seconds=p.duration_s)
    script = f"{st.client.ws.base}/tsbs-{qtype}.sql"
    st.client.host.write_text(script, tsbs.pgbench_script(qtype, p.devices, START, end), mode=0o644)
    point.meta.update(layout=layout, query_type=qtype, nodes=n, clients_per_node=per, read_clients=p.read_clients,
                      warmup_s=p.warmup_s)
    cores = int(store.manifest["hosts"][st.client.host.name].get("cores", 2))
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
    for node, _ in bgs:
        if logs.get(node.name):
            point.meta.setdefault("txlogs", {})[node.name] = pgbench.fetch_txlogs(point, node, logs[node.name],
                                                                                st.client, prefix=node.name)
    bad = {k: v for k, v in codes.items() if v}
    return None if not bad else f"pgbench exited {bad}"
