"""Collect: primary + one synchronous standby; blocks of every level at each client count (``pglab.runs.sweep``).

Primary, standby and clients may be on any inventory hosts (``primary_host``, ``standby_host``,
``client_host``); the topology comes from ``pglab.nodes.topology``.

Every point's raw output is written before anything is parsed; analysis lives in ``analyze``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import effects
from pglab.analysis.window import measured_points, measured_window
from pglab.errors import ProcessError
from pglab.hosts.inventory import Inventory
from pglab.nodes import emulation, topology
from pglab.nodes.node import Node
from pglab.runs import preflight, record, tools
from pglab.runs.opening import Plan, study_run
from pglab.runs.session import Session
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.synchronous_commit import STUDY
from pglab.studies.synchronous_commit import claims as sc_claims
from pglab.studies.synchronous_commit.claims import open_levels
from pglab.studies.synchronous_commit.params import Params
from pglab.workloads import adaptive, calibrate, observed, pgbench
from pglab.workloads.observed import Watch

DB = "bench"


def write_groups(p: Params) -> list[Group]:
    """One group of write blocks per client count, and per emulated flush level when there is a ladder
    (``emulate.flush_latency_ms``; factor ``flush_ms``, 0 for this machine's own disk). A calibrated flush is no
    ladder: its latency is found after the plan (``Params.flush_calibrated``)."""
    if not p.flush_levels() or p.flush_calibrated():
        return [Group(f"c{c:03d}", {"kind": "write", "clients": c}) for c in p.clients]
    return [Group(f"c{c:03d}-f{i}", {"kind": "write", "clients": c, "flush": emulation.label(lv),
                                     "flush_ms": round(emulation.latency_ms(lv), 3)})
            for i, lv in enumerate(p.flush_levels()) for c in p.clients]


def write_block(p: Params, block: int, levels: set[str]) -> list[Planned]:
    """Block ``block`` of the write groups with the baseline (twice) and ``levels`` only, in the seeded order of
    a planned block (``pglab.workloads.adaptive`` adds it after the first look)."""
    groups = write_groups(p)
    keep = [lv for lv in p.levels if lv in levels or lv == p.baseline]
    return plan_blocks(keep, p.baseline, groups, block, p.seed + block, prefix="write", start=block)


def interim_per_block(run_dir: Path, baseline: str) -> pd.DataFrame:
    """block x level: the geometric mean over client counts of tps(level) / tps(baseline), and of the baseline's
    second copy over its first (column ``A/A``); each point's tps in its measured window as the analysis reads
    it (``measured_points``), steal-flagged points left out (``effects.block_ratios``); with a flush ladder, at
    the level the claims are judged at (the run's ``judged_flush``), as the analysis judges them."""
    pts = pd.DataFrame(measured_points(run_dir, "write-*", ("clients", "flush_ms")),
                       columns=["block", "clients", "flush_ms", "config", "copy", "steal_flag", "tps"])
    if pts.flush_ms.notna().any():
        judged = record.parameters(record.read(run_dir, STUDY), Params).judged_flush()
        pts = pts[pts.flush_ms == round(emulation.latency_ms(judged), 3)] if judged is not None else pts
    pts = pts.drop(columns="flush_ms")
    if pts.empty:
        return pd.DataFrame()
    # at the client counts the claims are judged at, as the analysis summarises them (sc_claims.judged_ratios)
    return effects.per_block(sc_claims.judged_ratios(effects.block_ratios(pts, baseline, by=["clients"], value="tps")))


def plan(p: Params) -> list[Planned]:
    """Write blocks (every level at one client count, ``on`` twice), then standby-read blocks (idle
    twice, loaded), each in a seeded random order (``pglab.runs.sweep``)."""
    groups = write_groups(p)
    points = plan_blocks(p.levels, p.baseline, groups, p.blocks, p.seed, prefix="write")
    if p.standby_read_blocks:
        reads = Group("reads", {"kind": "read", "level": p.standby_read_level, "clients": 1})
        points += plan_blocks(["idle", "loaded"], "idle", [reads], p.standby_read_blocks, p.seed + 1, prefix="read")
    return points


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "pg_test_fsync"))
    for h in hosts.values():
        h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    # +3: the standby's walsender, our control session and the wait-event sampler
    problems += preflight.connection_problems(max_conn, max(max(p.clients), p.loaded_clients) + 3)
    preflight.require(problems)


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    with study_run(STUDY, Params, params, check, lambda p, _: Plan(plan(p), p.baseline), data_root=data_root,
                   profile=profile, inventory=inventory, resume=resume) as run:
        p, s, store = run.p, run.s, run.store
        primary, standby = _topology(s, p, store)
        clients = _clients(s, p, primary, standby)
        cores = int(store.manifest["hosts"][clients[primary.name].host.name].get("cores", 2))
        _initialise(s, primary, store, p, clients[primary.name], cores)

        def measure(pl: Planned, point: Point, watch: Watch) -> str | None:
            return _measure(s, pl, point, primary, standby, p, cores, clients, watch)

        observed.run(run, measure, desc=STUDY, progress=progress)
        if p.max_blocks and p.max_blocks > p.blocks:
            adaptive.extend(run, measure, first=p.blocks, max_blocks=p.max_blocks, budget_s=p.budget_s,
                            still_open=lambda: open_levels(interim_per_block(store.dir, p.baseline), p.baseline),
                            block=lambda n, levels: write_block(p, n, levels), desc=STUDY, progress=progress)
    return store.dir


def _topology(s: Session, p: Params, store: RunStore) -> tuple[Node, Node]:
    settings = {"max_connections": p.max_connections(), **p.server_settings}
    topo = topology.streaming(s.deploy, p.primary_host, [(p.standby_name, p.standby_host)], method="FIRST",
                              count=1, settings=settings)
    primary, standby = topo.primary, topo.standbys[0]
    primary.query(f"create database {DB}")
    tools.record(store, tools.versions(primary.host, primary.bin, ("postgres", "pgbench", "pg_basebackup")))
    store.manifest["topology"] = {**topo.describe(), **s.deploy.where()}
    store.save()
    return primary, standby


def _clients(s: Session, p: Params, *nodes: Node) -> dict[str, topology.Client]:
    """Where each node's pgbench runs (by node name): ``client_host`` for all, or each node's own host."""
    out = {n.name: s.deploy.client(p.client_host) if p.client_host else topology.Client.on_node_host(n)
           for n in nodes}
    if s.store:
        s.store.manifest["topology"]["clients"] = {name: c.describe() for name, c in out.items()}
        s.store.save()
    return out


def _initialise(s: Session, primary: Node, store: RunStore, p: Params, client: topology.Client, cores: int) -> None:
    point = store.point("init", unique=True, kind="init")
    with s.deploy.flushing(0):  # on the primary's host, not measured: at the disk's own speed
        res = pgbench.initialise(primary, point, DB, p.scale)
    if res.exit_code != 0:
        point.finish("failed", "pgbench -i failed")
        raise ProcessError(primary.host.name, res.command, res.exit_code, res.stdout, res.stderr)
    point.finish("ok")
    if p.emulate and p.emulate.cpu_share == "calibrate":  # before pg_test_fsync: slow motion changes the flush
        _calibrate(s, primary, store, p, client, cores)
    if p.fsync_test_seconds:
        point = store.point("fsync", unique=True, kind="fsync")
        target = f"{primary.ws.base}/fsync-test.tmp"
        if primary.flush:  # the disk the claims are judged on: the emulated one at the judged level
            s.deploy.set_flush(flush_now(s, p))
            point.meta["flush"] = emulation.label(flush_now(s, p))
        seconds = p.fsync_test_seconds
        res = primary.host.run([primary.bin("pg_test_fsync"), "-s", str(seconds), "-f", target], as_user=primary.user,
                               timeout=60 + (20 + 300 * bool(primary.flush)) * seconds, check=False,
                               env=primary.flush.env() if primary.flush else None)
        primary.host.run(["rm", "-f", target])
        point.record(res)
        point.finish("ok" if res.exit_code == 0 else "failed")


def _calibrate(s: Session, primary: Node, store: RunStore, p: Params, client: topology.Client, cores: int) -> None:
    """The CPU share that gives the article's ``off`` at 10 clients, then (with one flush level) the disks' flush
    latency that gives its ``local`` at 10 clients (``sc_claims.CALIBRATION``), searched before any block from the
    judged flush level (``pglab.workloads.calibrate``); every step's pgbench output kept."""
    if p.flush_levels():
        s.deploy.set_flush(p.judged_flush())
    points = []
    for knob, (level, clients, article) in sc_claims.CALIBRATION.items():
        if knob == "flush" and not p.flush_calibrated():
            continue

        def measure(tag: str, level: str = level, clients: int = clients) -> float:
            set_level(primary, level, p.standby_name)
            argv = pgbench.pgbench_argv(client, DB, clients=clients, jobs=min(clients, cores),
                                        duration_s=calibrate.SECONDS, progress_s=1)
            return calibrate.pgbench_step(store, primary, client, argv, tag, calibrate.SECONDS + p.client_timeout_s,
                                          lambda text: measured_window(text, calibrate.WARMUP_S)["tps"], level=level,
                                          clients=clients)
        start = emulation.latency_ms(p.judged_flush()) if p.flush_levels() else 0.0
        points.append(calibrate.Point(f"{level} @ {clients} clients", knob, article, measure, start_ms=start))
    record = calibrate.calibrate(s.deploy, points)
    store.manifest.setdefault("emulation", {})["calibration"] = record  # the whole record again at the end
    store.save()


def flush_now(s: Session, p: Params, label: str | None = None) -> str | float:
    """The flush level a point runs at: ``label``'s (default the judged level's), or the calibrated latency once the
    calibration found one (it replaces the one level the profile named)."""
    ms = (s.deploy.calibration or {}).get("flush_ms")
    if ms:
        return float(ms)
    label = label or emulation.label(p.judged_flush())
    return next(lv for lv in p.flush_levels() if emulation.label(lv) == label)


def set_level(primary: Node, level: str, standby_name: str, timeout: float = 10) -> dict[str, str]:
    """Put ``level`` in effect and prove it: a new session's SHOW, and the standby's sync_state."""
    primary.configure({"synchronous_commit": level}, reload=True)
    deadline = time.monotonic() + timeout
    while True:
        shown = primary.query_fresh("show synchronous_commit", dbname=DB, timeout=timeout)[0][0]
        if shown == level:
            break
        if time.monotonic() > deadline:
            raise ProcessError(primary.host.name, "show synchronous_commit", None, "",
                               f"still {shown!r} after reload, wanted {level!r}", timed_out=True)
        time.sleep(0.05)
    state = primary.wait_for_sync_state(standby_name, ("sync",))
    return {"synchronous_commit_in_effect": shown, "sync_state": state}


def _measure(s: Session, pl: Planned, point: Point, primary: Node, standby: Node, p: Params, cores: int,
             clients: dict[str, topology.Client], watch: Watch) -> str | None:
    """One point; None when it measured, else why not. Wait events over the workload's measured window."""
    nodes = {"primary": primary, "standby": standby}
    kind = pl.group.factors["kind"]
    level = pl.config if kind == "write" else p.standby_read_level
    if p.flush_levels():  # the write group's level; the standby reads at the level the claims are judged at
        level_now = flush_now(s, p, pl.group.factors.get("flush"))
        s.deploy.set_flush(level_now)
        point.meta["flush"] = emulation.label(level_now)
    point.meta.update(set_level(primary, level, p.standby_name), level=level, warmup_s=p.warmup_s)
    point.write_json("settings.json", {"primary": primary.snapshot_settings(DB),
                                       "standby": standby.snapshot_settings(DB)})
    timeout = p.seconds + p.client_timeout_s
    cp, cs = clients[primary.name], clients[standby.name]
    if kind == "write":
        c = int(pl.group.factors["clients"])
        log, remote = pgbench.txlog_args(point, primary, cp) if p.transaction_log else ([], "")
        argv = pgbench.pgbench_argv(cp, DB, clients=c, jobs=p.jobs or min(c, cores), duration_s=p.seconds,
                                    progress_s=1, extra=log)
        with watch(nodes, p.warmup_s):
            code = pgbench.run(primary, point, argv, timeout=timeout, client=cp).exit_code
        if remote:
            point.meta["txlogs"] = pgbench.fetch_txlogs(point, primary, remote, cp)
        return None if code == 0 else f"pgbench exited {code}"
    read = pgbench.pgbench_argv(cs, DB, clients=1, jobs=1, duration_s=p.standby_read_seconds, select_only=True,
                                no_vacuum=True, progress_s=1)
    if pl.config == "idle":
        primary.wait_for_replay(standby)
        with watch(nodes, p.warmup_s):
            code = pgbench.run(standby, point, read, timeout=timeout, client=cs).exit_code
        return None if code == 0 else f"pgbench exited {code}"
    # Loaded: the primary's write load runs across the whole read window, measured per node.
    write = pgbench.pgbench_argv(cp, DB, clients=p.loaded_clients, jobs=min(p.loaded_clients, cores),
                                 duration_s=p.standby_read_seconds + 2, no_vacuum=True, progress_s=1)
    bg = s.track_background(pgbench.start(primary, point, write, prefix="primary_", client=cp))  # listed at once
    try:
        time.sleep(1.0)
        with watch(nodes, p.warmup_s):
            reads = pgbench.run(standby, point, read, timeout=timeout, client=cs).exit_code
        writes = pgbench.collect(bg, point, "primary_", timeout=timeout).exit_code
    finally:
        if bg.exit_code is None:
            bg.stop()
        s.untrack_background(bg)
    if reads or writes:
        return f"pgbench exited {reads} (standby reads), {writes} (primary writes)"
    return None
