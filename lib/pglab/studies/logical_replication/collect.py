"""Collect: blocks of every replication system at one client count; each system's pair kept across blocks.

A point is (block, clients, system): reset the data, ``pgbench -T`` on the provider while the
lag is sampled, then the wait until the subscriber has applied everything (catch-up), then a count
and checksum of every table on both sides. Raw output is written before anything is parsed.

Every system's provider/subscriber pair is set up before the first block and kept (``pglab.runs.sweep``
runs the blocks, each system once and streaming twice, A/A, in a seeded order): only the measured
system has a workload, the others' daemons idle (recorded in the manifest's plan). A point
whose subscriber does not catch up, or whose tables differ, is kept with its status and the pair is
rebuilt for the next point; a system that cannot be set up or is not installed is recorded with its
reason and the sweep goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psycopg

from pglab.errors import ProcessError
from pglab.hosts.inventory import Inventory
from pglab.nodes import topology
from pglab.nodes.node import Node
from pglab.nodes.topology import Client
from pglab.replication.base import System, add_history_key
from pglab.replication.builtin import BuiltinLogical
from pglab.replication.londiste import Londiste
from pglab.replication.pglogical import Pglogical
from pglab.replication.slony import Slony
from pglab.replication.streaming import Streaming
from pglab.runs import preflight, tools
from pglab.runs.opening import Plan, study_run
from pglab.runs.session import Session
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.logical_replication import STUDY
from pglab.studies.logical_replication.params import Params
from pglab.workloads import observed, pgbench
from pglab.workloads.catchup import run_and_catch_up
from pglab.workloads.observed import Watch

DB = "bench"
CLASSES: dict[str, type[System]] = {"streaming": Streaming, "builtin": BuiltinLogical, "pglogical": Pglogical,
                                    "slony": Slony, "londiste": Londiste}
# Errors that end one point or one system's setup, not the study (KeyboardInterrupt always ends it).
POINT_ERRORS = (ProcessError, psycopg.Error)
# slowest set-up first, so that the last pair to start is a short one
SETUP_ORDER = ("londiste", "slony", "pglogical", "builtin", "streaming")
SETUP_WORKERS = 3  # pairs set up at once: 27 s for five on 2 cores, 65 s one after the other
# A test hook: called once the workload has started (e.g. to break the subscriber mid-run).
RunHook = Callable[[System, "Planned"], None]


def plan(p: Params, systems: list[str]) -> list[Planned]:
    """Blocks of every system (the baseline twice) at one client count, in a seeded order (``pglab.runs.sweep``).

    Each system's provider/subscriber pair is set up once and kept across blocks (setting up Londiste or
    Slony takes 10-20 s); the manifest's plan says so.
    """
    groups = [Group(f"c{c:03d}", {"kind": "run", "clients": c}) for c in p.clients]
    baseline = p.baseline if p.baseline in systems else systems[0]
    return plan_blocks(systems, baseline, groups, p.blocks, p.seed)


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


def _plan(p: Params, skipped: dict[str, str]) -> Plan:
    """The systems that can run here, in blocks; each one's pair kept across blocks (the manifest says so)."""
    systems = [name for name in p.systems if name not in skipped]
    points = plan(p, systems)
    return Plan(points, points[0].config if p.baseline not in systems else p.baseline,
                [f"{name} provider/subscriber pair" for name in systems])


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, on_run: RunHook | None = None,
            resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    with study_run(STUDY, Params, params, check, _plan, data_root=data_root, profile=profile, inventory=inventory,
                   resume=resume) as run:
        p, s, store, skipped = run.p, run.s, run.store, run.found
        clock = {"measure_s": 0.0, "setup_s": 0.0, "reset_s": 0.0, "verify_s": 0.0}
        store.manifest["systems"] = {name: {"status": "skipped", "reason": why} for name, why in skipped.items()}
        host = s.host(p.provider_host)  # server and client versions, and every system's Debian package
        tools.record(store, tools.versions(host, s.deploy.inventory.entry(host.name).bindir, ("postgres", "pgbench")),
                     tools.debian_versions(host, [pkg for name in p.systems for pkg in CLASSES[name].debian_packages]))
        client = s.deploy.client(p.client_host) if p.client_host else None
        store.manifest["topology"] = {
            "provider_host": p.provider_host, "subscriber_host": p.subscriber_host,
            "client": client.describe() if client else {"host": p.provider_host, "address": "socket"},
            **s.deploy.where()}
        store.save()
        pairs = Pairs(s, store, p, clock)
        try:
            # every pair before the first block: blocks then compare like with like
            pairs.setup_all([name for name in p.systems if name not in skipped])

            def ready(planned: Planned, point: Point) -> str | None:  # a broken pair is rebuilt here, unobserved
                pair = pairs.get(planned.config)
                if pair is None:
                    why = store.manifest["systems"][planned.config]["reason"]
                    return f"{planned.config} could not be set up: {why}"
                point.meta.update(system=planned.config, run_seconds=p.run_seconds, generation=pair.generation)
                return None

            def measure(planned: Planned, point: Point, watch: Watch) -> str | None:
                pair = pairs.pairs[planned.config]
                assert pair is not None
                if not _measure(pair, point, planned, p, clock, on_run, client, watch):
                    pairs.broken(planned.config)
                return point.meta.get("error") if point.meta.get("status") not in ("ok", "running") else None

            # the sampler closes at its end, before the pairs' servers stop
            observed.run(run, measure, desc=STUDY, progress=progress, ready=ready, errors=POINT_ERRORS)
            pairs.close_all(check=True)
        finally:
            pairs.close_all()
        wall = time.monotonic() - run.started
        store.manifest["time_s"] = {k: round(v, 1) for k, v in {**clock, "wall_s": wall}.items()}
    return store.dir


class Pairs:
    """Every system's pair, set up once and kept across blocks; rebuilt after a point broke it."""

    def __init__(self, s: Session, store: RunStore, p: Params, clock: dict[str, float]):
        self.s, self.store, self.p, self.clock = s, store, p, clock
        self.pairs: dict[str, Pair | None] = {}
        self.evidence_lock = threading.Lock()  # two pairs whose set-up failed at once keep their evidence in turn

    def get(self, name: str) -> Pair | None:
        """The system's pair, set up if it has none; None once its setup failed (the reason is recorded)."""
        info = self.store.manifest["systems"].setdefault(
            name, {"status": "measured", "options": self.p.options(name), "generations": 0})
        if info.get("status") == "setup failed":
            return None
        if self.pairs.get(name) is None:
            info["generations"] += 1
            pair = Pair(self.s, self.store, self.p, name, info["generations"], self.evidence_lock)
            try:
                pair.setup()
            except POINT_ERRORS as exc:
                pair.close(keep_data=True)
                info.update(status="setup failed", reason=_describe(exc))
                self.store.save()
                return None
            self.pairs[name] = pair
            self.store.save()
        return self.pairs[name]

    def setup_all(self, names: list[str]) -> None:
        """Every system's pair, ``SETUP_WORKERS`` at a time, the slowest first (Londiste's initial copy, Slony's
        subscribe). A failed set-up is recorded in the manifest and leaves the others going."""
        t0 = time.monotonic()
        order = sorted(names, key=lambda n: SETUP_ORDER.index(n) if n in SETUP_ORDER else len(SETUP_ORDER))
        with ThreadPoolExecutor(max(1, min(SETUP_WORKERS, len(order))), thread_name_prefix="setup") as pool:
            for future in [pool.submit(self.get, name) for name in order]:
                future.result()
        self.clock["setup_s"] += time.monotonic() - t0

    def broken(self, name: str) -> None:
        """The last point left the pair untrustworthy: close it (data kept as evidence); the next point rebuilds."""
        pair = self.pairs.pop(name, None)
        if pair is not None:
            pair.close(keep_data=True)

    def close_all(self, check: bool = False) -> None:
        """Every pair, all at once; with ``check`` (the sweep ended) after the whole tables are compared
        once more: each point compared only the rows it touched."""
        pairs = {name: pair for name, pair in self.pairs.items() if pair is not None}
        self.pairs.clear()
        if pairs:
            with ThreadPoolExecutor(len(pairs), thread_name_prefix="close") as pool:
                for future in [pool.submit(self._close, name, pair, check) for name, pair in pairs.items()]:
                    future.result()
        self.store.save()

    def _close(self, name: str, pair: Pair, check: bool) -> None:
        t0 = time.monotonic()
        try:
            if check:
                self.store.manifest["systems"][name]["closing_check"] = pair.closing_check()
        finally:
            pair.close(keep_data=False)
            self.store.manifest["systems"][name]["close_s"] = round(time.monotonic() - t0, 2)


class Pair:
    """One system's provider and subscriber, set up once and reused until a point breaks them."""

    def __init__(self, s: Session, store: RunStore, p: Params, name: str, generation: int, evidence: threading.Lock):
        self.s, self.store, self.p, self.name, self.generation = s, store, p, name, generation
        self.evidence_lock = evidence
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
        point = self.store.point(f"setup-{self.name}{suffix}", unique=True, kind="setup", system=self.name,
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

    def closing_check(self) -> dict[str, Any]:
        """The whole tables compared after the pair's last point, caught up first (``consistent`` False
        makes the analysis call every point of the pair into question)."""
        assert self.system is not None
        t0 = time.monotonic()
        try:
            self.system.wait_caught_up(self.p.catchup_timeout_s, poll_s=self.p.catchup_poll_s)
            check = self.system.verify()
        except POINT_ERRORS as exc:
            return {"consistent": None, "error": _describe(exc)}
        return {"consistent": check.consistent, "mismatched": check.mismatched,
                "seconds": round(time.monotonic() - t0, 2)}

    @property
    def provider(self) -> Node:
        return self.nodes[0]

    @property
    def subscriber(self) -> Node:
        return self.nodes[1]

    def settings(self) -> dict[str, Any]:
        return {"provider": self.provider.snapshot_settings(DB), "subscriber": self.subscriber.snapshot_settings(DB)}

    def clear(self) -> None:
        """Right after a point (its touched rows checked): empty history, vacuumed small tables. Not waited
        for: the system replicates this one truncate while other systems' points run, and ``reset`` waits
        for it before this pair's next point (measured: Londiste's ticker made that wait 1-4 s a point)."""
        self.provider.query("truncate pgbench_history", dbname=DB)
        self.provider.query("vacuum pgbench_branches, pgbench_tellers", dbname=DB)

    def reset(self) -> float:
        """Same starting point for every run: a checkpoint, and the ``clear`` of its last point applied.

        What ``pgbench`` itself does before a run without -n, but done here so that its replication is
        not part of the measured window. Returns the seconds the subscriber still took to catch up.
        """
        self.provider.query("checkpoint", dbname=DB)
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
            if keep_data:
                with self.evidence_lock:  # two pairs whose set-up failed at once
                    self._keep_evidence()
            else:
                for node in self.nodes:
                    node.host.remove_tree(node.data_dir)
            self.store.save()

    def _keep_evidence(self) -> None:
        """This pair's data dirs kept; the previous broken pair's make room for them."""
        evidence = self.store.manifest.setdefault("evidence", {"kept_data_dirs": [], "removed_data_dirs": []})
        for old in evidence["kept_data_dirs"]:
            self.s.host(old["host"]).remove_tree(old["data_dir"])
            evidence["removed_data_dirs"].append(old)
        evidence["kept_data_dirs"] = [{"host": n.host.name, "data_dir": n.data_dir} for n in self.nodes]


def _measure(pair: Pair, point: Point, planned: Planned, p: Params, clock: dict[str, float],
             on_run: RunHook | None, client: Client | None, watch: Watch) -> bool:
    """One point; returns False when the pair cannot be trusted for the next point (rebuild it). Wait
    events over the run (after warm-up) and the catch-up."""
    system = pair.system
    assert system is not None
    provider = pair.provider
    try:
        t0 = time.monotonic()
        point.meta["reset_catchup_s"] = round(pair.reset(), 4)
        clock["reset_s"] += time.monotonic() - t0
        point.write_json("settings.json", pair.settings())
        clients = int(planned.group.factors["clients"])
        jobs = p.jobs or min(clients, pair.cores)
        argv = pgbench.pgbench_argv(client or provider, DB, clients=clients, jobs=jobs,
                                    duration_s=p.run_seconds, no_vacuum=True, progress_s=1)

        def start() -> Any:
            proc = pair.s.track_background(  # in the manifest at once
                pgbench.start(provider, point, argv, prefix="", client=client))
            if on_run:
                on_run(system, planned)
            return proc

        with watch({"provider": pair.provider, "subscriber": pair.subscriber}, p.warmup_s):
            proc, timing = run_and_catch_up(
                system, start, lag_csv=point.dir / "lag.csv" if p.lag_interval_s else None,
                lag_interval_s=p.lag_interval_s, poll_s=p.catchup_poll_s,
                run_timeout_s=p.run_seconds + p.client_timeout_s, catchup_timeout_s=p.catchup_timeout_s,
                token=f"pglab {point.id}")
        clock["measure_s"] += timing.run_s + max(timing.catchup_s or 0.0, timing.confirmed_s or 0.0)
        try:
            result = pgbench.collect(proc, point, "", timeout=30)
        finally:
            pair.s.untrack_background(proc)
        point.meta["timing"] = timing.as_dict()
        t0 = time.monotonic()
        check = system.verify(touched=True)  # the whole tables at set-up and when the pair closes
        clock["verify_s"] += time.monotonic() - t0
        point.write_json("consistency.json", asdict(check))
        point.meta.update(consistent=check.consistent, mismatched=check.mismatched)
        if timing.caught_up and check.consistent:  # else the pair is rebuilt
            pair.clear()
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
