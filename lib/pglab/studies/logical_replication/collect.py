"""Collect: per replication system, one provider/subscriber pair reused across its points.

A point is (system, clients, repetition): reset the data, ``pgbench -T`` on the provider while the
lag is sampled, then the wait until the subscriber has applied everything (catch-up), then a count
and checksum of every table on both sides. Raw output is written before anything is parsed.

Systems run one after another (a block each, in a seeded order): running them side by side would
let one system's daemons and apply work slow another's measurement on a shared machine. A point
whose subscriber does not catch up, or whose tables differ, is kept with its status and the pair is
rebuilt for the next point; a system that cannot be set up or is not installed is recorded with its
reason and the sweep goes on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from pglab import preflight, topology
from pglab.cleanup import Session, session
from pglab.errors import ProcessError
from pglab.hosts import Host
from pglab.inventory import Inventory
from pglab.node import Node
from pglab.params import validate
from pglab.progress import Progress
from pglab.progress import bar as progress_bar
from pglab.replication.base import System, add_history_key
from pglab.replication.builtin import BuiltinLogical
from pglab.replication.londiste import Londiste
from pglab.replication.measure import run_and_catch_up
from pglab.replication.pglogical import Pglogical
from pglab.replication.slony import Slony
from pglab.replication.streaming import Streaming
from pglab.store import Point, RunStore, archive_dir
from pglab.studies.logical_replication import STUDY
from pglab.studies.logical_replication.params import Params
from pglab.topology import Client
from pglab.workloads import cpu, pgbench

DB = "bench"
CLASSES: dict[str, type[System]] = {"streaming": Streaming, "builtin": BuiltinLogical, "pglogical": Pglogical,
                                    "slony": Slony, "londiste": Londiste}
# Errors that end one point or one system's setup, not the study (KeyboardInterrupt always ends it).
POINT_ERRORS = (ProcessError, psycopg.Error)
# A test hook: called once the workload has started (e.g. to break the subscriber mid-run).
RunHook = Callable[[System, "Planned"], None]


@dataclass(frozen=True)
class Planned:
    system: str
    clients: int
    rep: int

    @property
    def id(self) -> str:
        return f"{self.system}-c{self.clients:03d}-r{self.rep}"


def plan(p: Params, systems: list[str]) -> list[tuple[str, list[Planned]]]:
    """Systems in a seeded order, each with its points in a seeded order (drift does not follow a factor)."""
    rng = random.Random(p.seed)
    order = list(systems)
    rng.shuffle(order)
    blocks = []
    for name in order:
        points = [Planned(name, c, rep) for rep in range(1, p.repetitions + 1) for c in p.clients]
        rng.shuffle(points)
        blocks.append((name, points))
    return blocks


def check(p: Params, inventory: Inventory) -> dict[str, str]:
    """Everything known before a server starts (raises PreflightError); returns {skipped system: reason}."""
    problems, hosts = preflight.host_problems(inventory, p.hosts)
    skipped: dict[str, str] = {}
    try:
        for host_name in (p.provider_host, p.subscriber_host):  # daemons run on both
            if host_name not in hosts:
                continue
            bindir = inventory.entry(host_name).bindir
            for name in p.systems:
                reason = CLASSES[name].unavailable(hosts[host_name], bindir)
                if reason and name not in skipped:
                    skipped[name] = reason
    finally:
        for h in hosts.values():
            h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    problems += preflight.connection_problems(max_conn, max(p.clients) + 10)  # + walsenders, daemons, ours
    if not problems and len(skipped) == len(p.systems):
        problems.append("none of the systems can run here: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    preflight.require(problems)
    return skipped


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, on_run: RunHook | None = None) -> Path:
    """Run the study; returns the raw run folder (``data_root``/runs/logical_replication/<run-id>)."""
    p = params if isinstance(params, Params) else validate(Params, params, f"{STUDY} parameters")
    inventory = inventory or Inventory()
    skipped = check(p, inventory)
    store = RunStore(archive_dir(data_root, STUDY), STUDY, profile, p.model_dump())
    started = time.monotonic()
    clock = {"measure_s": 0.0, "setup_s": 0.0, "reset_s": 0.0, "verify_s": 0.0}
    store.manifest["systems"] = {name: {"status": "skipped", "reason": why} for name, why in skipped.items()}
    with session(inventory, store, tls=p.tls) as s:
        s.deploy.open(p.hosts)  # every host first: pg_hba admits exactly their data addresses
        host = s.host(p.provider_host)
        store.manifest["tools"] = _tools(host, inventory.entry(p.provider_host).bindir, p.systems)
        client = s.deploy.client(p.client_host) if p.client_host else None
        store.manifest["topology"] = {
            "provider_host": p.provider_host, "subscriber_host": p.subscriber_host,
            "client": client.describe() if client else {"host": p.provider_host, "address": "socket"},
            **s.deploy.where()}
        blocks = plan(p, [name for name in p.systems if name not in skipped])
        store.manifest["points"]["total"] = sum(len(points) for _, points in blocks)
        store.save()
        with progress_bar(store.manifest["points"]["total"], STUDY, unit="point", disable=not progress) as bar:
            for name, points in blocks:
                _system_block(s, store, p, name, points, bar, clock, on_run, client)
        wall = time.monotonic() - started
        store.manifest["time_s"] = {k: round(v, 1) for k, v in {**clock, "wall_s": wall}.items()}
        store.manifest["measurement_share"] = round(clock["measure_s"] / wall, 3)
    return store.dir


def _tools(host: Host, bindir: str, systems: list[str]) -> dict[str, str]:
    """Server and client versions, and the Debian package of every system (pyperf-style capture)."""
    tools = {prog: host.run([f"{bindir}/{prog}", "--version"]).stdout.strip() for prog in ("postgres", "pgbench")}
    packages = [pkg for name in systems for pkg in CLASSES[name].debian_packages]
    if packages:
        res = host.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *packages], check=False)
        for line in res.stdout.splitlines():
            pkg, _, version = line.partition(" ")
            tools[pkg] = version
    return tools


class Pair:
    """One system's provider and subscriber, set up once and reused until a point breaks them."""

    def __init__(self, s: Session, store: RunStore, p: Params, name: str, generation: int):
        self.s, self.store, self.p, self.name, self.generation = s, store, p, name, generation
        self.system: System | None = None
        self.nodes: list[Node] = []
        self.cores = int(store.manifest["hosts"].get(p.client_host or p.provider_host, {}).get("cores", 2))

    def setup(self) -> dict[str, Any]:
        """Fresh nodes, pgbench -i on the provider, the history key, then the system's prepare and start."""
        p, s = self.p, self.s
        suffix = "" if self.generation == 1 else f"_{self.generation}"
        settings = {"max_connections": p.max_connections(), **p.server_settings}
        provider, subscriber = topology.logical_pair(s.deploy, (f"{self.name}_provider{suffix}", p.provider_host),
                                                     (f"{self.name}_subscriber{suffix}", p.subscriber_host), settings)
        self.nodes = [provider, subscriber]
        for node in self.nodes:
            node.query(f"create database {DB}")
        point = self.store.point(f"setup-{self.name}{suffix}", kind="setup", system=self.name,
                                 generation=self.generation)
        t0 = time.monotonic()
        try:
            res = pgbench.initialise(provider, point, DB, p.scale)
            if res.exit_code != 0:
                raise ProcessError(provider.host.name, res.command, res.exit_code, res.stdout, res.stderr)
            add_history_key(provider, DB)
            self.system = CLASSES[self.name](provider, subscriber, dbname=DB, options=self.p.options(self.name),
                                             on_process=s.track_background)
            self.system.prepare()
            self.system.start()
            for node in self.nodes:  # streaming turned the subscriber into a standby: the manifest must say so
                self.store.update_node(node.describe())
            check = self.system.verify()
            point.write_json("consistency.json", asdict(check))
            if not check.consistent:
                raise ProcessError(provider.host.name, f"{self.name}: initial copy", None, "",
                                   f"tables differ after the initial copy: {', '.join(check.mismatched)}")
        except BaseException as exc:
            point.meta["setup_s"] = round(time.monotonic() - t0, 3)
            point.finish("failed", _describe(exc))
            raise
        point.meta.update(setup_s=round(time.monotonic() - t0, 3), daemons=self.system.daemons())
        point.write_json("settings.json", self.settings())
        point.finish("ok")
        return point.meta

    @property
    def provider(self) -> Node:
        return self.nodes[0]

    @property
    def subscriber(self) -> Node:
        return self.nodes[1]

    def settings(self) -> dict[str, Any]:
        return {"provider": self.provider.snapshot_settings(DB), "subscriber": self.subscriber.snapshot_settings(DB)}

    def reset(self) -> float:
        """Same starting point for every run: empty history, vacuumed small tables, a checkpoint, caught up.

        What ``pgbench`` itself does before a run without -n, but done here so that its replication is
        not part of the measured window. Returns the seconds the subscriber took to apply it.
        """
        provider = self.provider
        provider.query("truncate pgbench_history", dbname=DB)
        provider.query("vacuum pgbench_branches, pgbench_tellers", dbname=DB)
        provider.query("checkpoint", dbname=DB)
        assert self.system is not None
        return self.system.wait_caught_up(self.p.catchup_timeout_s, poll_s=self.p.catchup_poll_s)

    def close(self, keep_data: bool) -> None:
        """Stop the system's daemons and both nodes; their data dirs go unless kept as evidence.

        Only the most recent broken pair keeps its data dirs (at paper scale one pair is ~150 GB);
        every pair's server logs and every point's raw files are kept regardless.
        """
        try:
            if self.system is not None:
                daemons = list(self.system.processes)
                self.system.teardown()  # stops them; the Session keeps them listed until it has
                for proc in daemons:
                    self.s.untrack_background(proc)
        finally:
            for node in reversed(self.nodes):
                node.stop()
            evidence = self.store.manifest.setdefault("evidence", {"kept_data_dirs": [], "removed_data_dirs": []})
            if keep_data:  # the previous broken pair's data dirs make room for this one's
                for old in evidence["kept_data_dirs"]:
                    self.s.host(old["host"]).remove_tree(old["data_dir"])
                    evidence["removed_data_dirs"].append(old)
                evidence["kept_data_dirs"] = [{"host": n.host.name, "data_dir": n.data_dir} for n in self.nodes]
            else:
                for node in self.nodes:
                    node.host.remove_tree(node.data_dir)
            self.store.save()


def _system_block(s: Session, store: RunStore, p: Params, name: str, points: list[Planned], bar: Progress,
                  clock: dict[str, float], on_run: RunHook | None, client: Client | None) -> None:
    info: dict[str, Any] = {"status": "measured", "options": p.options(name), "generations": 0}
    store.manifest["systems"][name] = info
    pair: Pair | None = None
    remaining = list(points)
    interrupted = True
    try:
        while remaining:
            if pair is None:
                pair = Pair(s, store, p, name, info["generations"] + 1)
                info["generations"] += 1
                t0 = time.monotonic()
                try:
                    pair.setup()
                except POINT_ERRORS as exc:
                    clock["setup_s"] += time.monotonic() - t0
                    pair.close(keep_data=True)
                    pair = None
                    info.update(status="setup failed", reason=_describe(exc))
                    for planned in remaining:  # recorded, so that the notebook shows what is missing
                        pt = store.point(planned.id, kind="run", system=name, clients=planned.clients,
                                         rep=planned.rep, run_seconds=p.run_seconds)
                        pt.finish("failed", f"{name} could not be set up: {_describe(exc)}")
                        _count(store, "failed", bar, planned.id)
                    return
                clock["setup_s"] += time.monotonic() - t0
                store.save()
            planned = remaining.pop(0)
            bar.set_postfix_str(planned.id)
            point = store.point(planned.id, kind="run", system=name, clients=planned.clients, rep=planned.rep,
                                run_seconds=p.run_seconds, generation=pair.generation)
            healthy = _measure(pair, point, planned, p, clock, on_run, client)
            _count(store, point.meta["status"], bar, planned.id)
            if not healthy:
                pair.close(keep_data=True)
                pair = None
        interrupted = False
    finally:
        if pair is not None:
            pair.close(keep_data=interrupted)
        store.save()


def _count(store: RunStore, status: str, bar: Progress, point_id: str) -> None:
    counts = store.manifest["points"]
    counts[status] = counts.get(status, 0) + 1
    store.save()
    bar.done(point_id, status)


def _measure(pair: Pair, point: Point, planned: Planned, p: Params, clock: dict[str, float],
             on_run: RunHook | None, client: Client | None = None) -> bool:
    """One point; returns False when the pair cannot be trusted for the next point (rebuild it)."""
    system = pair.system
    assert system is not None
    provider = pair.provider
    try:
        t0 = time.monotonic()
        point.meta["reset_catchup_s"] = round(pair.reset(), 4)
        clock["reset_s"] += time.monotonic() - t0
        point.write_json("settings.json", pair.settings())
        jobs = p.jobs or min(planned.clients, pair.cores)
        argv = pgbench.pgbench_argv(client or provider, DB, clients=planned.clients, jobs=jobs,
                                    duration_s=p.run_seconds, no_vacuum=True, progress_s=1)

        def start() -> Any:
            proc = pair.s.track_background(  # in the manifest at once
                pgbench.start(provider, point, argv, prefix="", client=client))
            if on_run:
                on_run(system, planned)
            return proc

        cpu_before = cpu.sample(provider.host)
        proc, timing = run_and_catch_up(
            system, start, lag_csv=point.dir / "lag.csv" if p.lag_interval_s else None,
            lag_interval_s=p.lag_interval_s, poll_s=p.catchup_poll_s,
            run_timeout_s=p.run_seconds + p.client_timeout_s, catchup_timeout_s=p.catchup_timeout_s,
            token=f"pglab {point.id}")
        point.meta["cpu"] = cpu.shares(cpu_before, cpu.sample(provider.host))  # run and catch-up
        clock["measure_s"] += timing.run_s + max(timing.catchup_s or 0.0, timing.confirmed_s or 0.0)
        try:
            result = pgbench.collect(proc, point, "", timeout=30)
        finally:
            pair.s.untrack_background(proc)
        point.meta["timing"] = timing.as_dict()
        t0 = time.monotonic()
        check = system.verify()
        clock["verify_s"] += time.monotonic() - t0
        point.write_json("consistency.json", asdict(check))
        point.meta.update(consistent=check.consistent, mismatched=check.mismatched)
    except POINT_ERRORS as exc:
        point.finish("failed", _describe(exc))
        return False
    if not timing.caught_up:
        point.finish("failed", f"not caught up within catchup_timeout_s={p.catchup_timeout_s:g} s "
                               f"(tables {'differ: ' + ', '.join(check.mismatched) if check.mismatched else 'match'})")
        return False
    if not check.consistent:
        point.finish("inconsistent", f"caught up but tables differ: {', '.join(check.mismatched)}")
        return False
    if result.exit_code != 0:
        point.finish("failed", f"pgbench exited {result.exit_code}")
        return True
    point.finish("ok")
    return True


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
