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

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pglab.hosts import build_copy
from pglab.hosts.inventory import Inventory
from pglab.nodes.topology import Client
from pglab.replication.base import System
from pglab.runs import preflight, tools
from pglab.runs.opening import Plan, study_run
from pglab.runs.store import Point
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.logical_replication import STUDY
from pglab.studies.logical_replication.claims import interim_per_block, open_systems
from pglab.studies.logical_replication.pairs import CLASSES, DB, POINT_ERRORS, Pair, Pairs, describe
from pglab.studies.logical_replication.params import Params
from pglab.workloads import adaptive, observed, pgbench
from pglab.workloads.catchup import run_and_catch_up
from pglab.workloads.observed import Watch

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


def added_block(p: Params, baseline: str, block: int, systems: set[str]) -> list[Planned]:
    """Block ``block`` with the baseline (twice) and ``systems`` only, at every client count, in the seeded
    order of a planned block (``pglab.workloads.adaptive`` adds it after the first look)."""
    groups = [Group(f"c{c:03d}", {"kind": "run", "clients": c}) for c in p.clients]
    keep = [name for name in p.systems if name in systems or name == baseline]
    return plan_blocks(keep, baseline, groups, block, p.seed + block, start=block)


def check(p: Params, inventory: Inventory) -> dict[str, str]:
    """Everything known before a server starts (raises PreflightError); returns {skipped system: reason}."""
    problems, hosts = preflight.host_problems(inventory, p.hosts)
    skipped: dict[str, str] = {}
    named = preflight.builds_named(p)
    sides = ((p.provider_host, named.get("postgres")),
             (p.subscriber_host, named.get("subscriber_postgres") or named.get("postgres")))
    ids = [b.id if b else "the hosts' own" for _, b in sides]
    try:
        for host_name, build in sides:  # daemons run on both
            if host_name not in hosts:
                continue
            entry = inventory.entry(host_name)
            bindir = build_copy.bindir_on(build, entry) if build else entry.bindir
            for name in p.systems:
                if ids[0] != ids[1] and name != "builtin":
                    reason = (f"not available across two builds ({ids[0]} -> {ids[1]}): only built-in logical "
                              "replication runs between majors here (streaming copies one build's data directory; "
                              "pglogical, Slony-I and Londiste are Debian's, for its 15 only)")
                elif build and build.family != "debian" and CLASSES[name].debian_packages:
                    reason = f"not available on PostgreSQL {build.id}: {name} is packaged by Debian, for its own " \
                             "PostgreSQL 15 only"
                else:
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
        named = preflight.builds_named(p)
        entry, build, sub = s.deploy.inventory.entry(host.name), named.get("postgres"), named.get("subscriber_postgres")
        own = entry.bindir
        tools.record(store, tools.versions(host, own, ("pgbench",)),
                     tools.versions(host, build_copy.bindir_on(build, entry) if build else own, ("postgres",)),
                     {"postgres (subscriber)": tools.versions(host, build_copy.bindir_on(sub, entry),
                                                              ("postgres",))["postgres"]}
                     if sub else {},
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
                # warmup_s: the cut the analysis takes from -P 1 progress (format 1 runs lacked it: runs.formats)
                point.meta.update(system=planned.config, run_seconds=p.run_seconds, warmup_s=p.warmup_s,
                                  generation=pair.generation)
                return None

            def measure(planned: Planned, point: Point, watch: Watch) -> str | None:
                pair = pairs.pairs[planned.config]
                assert pair is not None
                if not _measure(pair, point, planned, p, clock, on_run, client, watch):
                    pairs.broken(planned.config)
                return point.meta.get("error") if point.meta.get("status") not in ("ok", "running") else None

            # the sampler closes at its end, before the pairs' servers stop
            observed.run(run, measure, desc=STUDY, progress=progress, ready=ready, errors=POINT_ERRORS)
            if p.max_blocks and p.max_blocks > p.blocks:  # the first look: is pglogical vs streaming still open?
                base = store.manifest["plan"]["baseline"]
                adaptive.extend(run, measure, first=p.blocks, max_blocks=p.max_blocks, budget_s=p.budget_s,
                                still_open=lambda: open_systems(interim_per_block(store.dir, base), base),
                                block=lambda n, systems: added_block(p, base, n, systems), desc=STUDY,
                                progress=progress, ready=ready, errors=POINT_ERRORS)
            pairs.close_all(check=True)
        finally:
            pairs.close_all()
        wall = time.monotonic() - run.started
        store.manifest["time_s"] = {k: round(v, 1) for k, v in {**clock, "wall_s": wall}.items()}
    return store.dir


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
        point.finish("failed", describe(exc))
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
