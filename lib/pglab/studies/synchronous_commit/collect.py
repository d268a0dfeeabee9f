"""Collect: primary + one synchronous standby, pgbench per level x clients x repetition.

Primary, standby and clients may be on any inventory hosts (``primary_host``, ``standby_host``,
``client_host``); the topology comes from ``pglab.topology``.

Every point's raw output is written before anything is parsed; analysis lives in ``analyze``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pglab import preflight, topology
from pglab.cleanup import Session, session
from pglab.errors import ProcessError
from pglab.inventory import Inventory
from pglab.node import Node
from pglab.params import validate
from pglab.progress import bar as progress_bar
from pglab.store import Point, RunStore, archive_dir
from pglab.studies.synchronous_commit import STUDY
from pglab.studies.synchronous_commit.params import Params
from pglab.workloads import pgbench

DB = "bench"


@dataclass(frozen=True)
class Planned:
    """One point of the sweep; ``kind`` is "write" (primary tps) or "read" (standby tps)."""

    kind: str
    level: str
    rep: int
    clients: int = 0
    primary_load: str = ""

    @property
    def id(self) -> str:
        if self.kind == "write":
            return f"write-{self.level}-c{self.clients:03d}-r{self.rep}"
        return f"read-{self.primary_load}-{self.level}-r{self.rep}"


def plan(p: Params) -> list[Planned]:
    """All points in a seeded random order, so that drift does not line up with one factor."""
    points = [Planned("write", lvl, rep, clients=c)
              for rep in range(1, p.repetitions + 1) for lvl in p.levels for c in p.clients]
    points += [Planned("read", lvl, rep, primary_load=load)
               for rep in range(1, p.standby_read_runs + 1) for lvl in p.levels for load in ("idle", "loaded")]
    random.Random(p.seed).shuffle(points)
    return points


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "pg_test_fsync"))
    for h in hosts.values():
        h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    # +2: the standby's walsender and our own control session
    problems += preflight.connection_problems(max_conn, max(max(p.clients), p.loaded_clients) + 2)
    preflight.require(problems)


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True) -> Path:
    """Run the study; returns the raw run folder (``data_root``/runs/synchronous_commit/<run-id>)."""
    p = params if isinstance(params, Params) else validate(Params, params, f"{STUDY} parameters")
    inventory = inventory or Inventory()
    check(p, inventory)
    store = RunStore(archive_dir(data_root, STUDY), STUDY, profile, p.model_dump())
    started = time.monotonic()
    measured = 0.0
    with session(inventory, store, tls=p.tls) as s:
        primary, standby = _topology(s, p, store)
        clients = _clients(s, p, primary, standby)
        cores = int(store.manifest["hosts"][clients[primary.name].host.name].get("cores", 2))
        _initialise(primary, store, p)
        points = plan(p)
        store.manifest["points"]["total"] = len(points)
        with progress_bar(points, STUDY, unit="point", disable=not progress) as bar:
            for planned in bar:
                bar.set_postfix_str(planned.id)
                point = store.point(planned.id, kind=planned.kind, level=planned.level, rep=planned.rep,
                                    clients=planned.clients or None, primary_load=planned.primary_load or None)
                t0 = time.monotonic()
                try:
                    ok = _measure(s, planned, point, primary, standby, p, cores, clients)
                    point.finish("ok" if ok else "failed", None if ok else "pgbench exited non-zero")
                except Exception as exc:  # noqa: BLE001  (a host that vanished raises SSH and socket errors
                    # too, not only ProcessError: the point fails with what happened, the sweep goes on;
                    # Ctrl-C and SIGTERM are BaseExceptions and still end the run)
                    point.finish("failed", f"{type(exc).__name__}: {exc}"[:2000])
                measured += time.monotonic() - t0
                status = point.meta["status"]
                store.manifest["points"]["ok" if status == "ok" else "failed"] += 1
                store.save()
                bar.done(planned.id, status)
        store.manifest["measurement_share"] = round(measured / (time.monotonic() - started), 3)
    return store.dir


def _topology(s: Session, p: Params, store: RunStore) -> tuple[Node, Node]:
    s.deploy.open(p.hosts)  # every host first: pg_hba admits exactly their data addresses
    settings = {"max_connections": p.max_connections(), **p.server_settings}
    topo = topology.streaming(s.deploy, p.primary_host, [(p.standby_name, p.standby_host)], method="FIRST",
                              count=1, settings=settings)
    primary, standby = topo.primary, topo.standbys[0]
    primary.query(f"create database {DB}")
    store.manifest["tools"] = {
        prog: primary.host.run([primary.bin(prog), "--version"]).stdout.strip()
        for prog in ("postgres", "pgbench", "pg_basebackup")}
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


def _initialise(primary: Node, store: RunStore, p: Params) -> None:
    point = store.point("init", kind="init")
    res = pgbench.initialise(primary, point, DB, p.scale)  # on the primary's host: not measured
    if res.exit_code != 0:
        point.finish("failed", "pgbench -i failed")
        raise ProcessError(primary.host.name, res.command, res.exit_code, res.stdout, res.stderr)
    point.finish("ok")
    if p.fsync_test_seconds:
        point = store.point("fsync", kind="fsync")
        target = f"{primary.ws.base}/fsync-test.tmp"
        res = primary.host.run([primary.bin("pg_test_fsync"), "-s", str(p.fsync_test_seconds), "-f", target],
                               as_user=primary.user, timeout=60 + 20 * p.fsync_test_seconds, check=False)
        primary.host.run(["rm", "-f", target])
        point.record(res)
        point.finish("ok" if res.exit_code == 0 else "failed")


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
             clients: dict[str, topology.Client]) -> bool:
    point.meta.update(set_level(primary, pl.level, p.standby_name))
    point.write_json("settings.json", {"primary": primary.snapshot_settings(DB),
                                       "standby": standby.snapshot_settings(DB)})
    timeout = p.client_timeout_s
    cp, cs = clients[primary.name], clients[standby.name]
    if pl.kind == "write":
        argv = pgbench.pgbench_argv(cp, DB, clients=pl.clients, jobs=p.jobs or min(pl.clients, cores),
                                    transactions=p.transactions_per_client)
        return pgbench.run(primary, point, argv, timeout=timeout, client=cp).exit_code == 0
    read = pgbench.pgbench_argv(cs, DB, clients=1, jobs=1, duration_s=p.standby_read_seconds,
                                select_only=True, no_vacuum=True)
    if pl.primary_load == "idle":
        primary.wait_for_replay(standby)
        return pgbench.run(standby, point, read, timeout=timeout, client=cs).exit_code == 0
    # Loaded: the primary's write load runs across the whole read window, measured per node.
    write = pgbench.pgbench_argv(cp, DB, clients=p.loaded_clients, jobs=min(p.loaded_clients, cores),
                                 duration_s=p.standby_read_seconds + 2, no_vacuum=True)
    bg = s.track_background(pgbench.start(primary, point, write, prefix="primary_", client=cp))  # listed at once
    try:
        time.sleep(1.0)
        reads_ok = pgbench.run(standby, point, read, timeout=timeout, client=cs).exit_code == 0
        writes_ok = pgbench.collect(bg, point, "primary_", timeout=timeout).exit_code == 0
    finally:
        if bg.exit_code is None:
            bg.stop()
        s.untrack_background(bg)
    return reads_ok and writes_ok
