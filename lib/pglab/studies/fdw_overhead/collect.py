"""Collect: a source instance with the pgbench tables, foreign tables to it, blocks of every target.

Topology (``pglab.nodes.topology``): the ``source`` instance on ``source_host`` holds database ``source``
(the pgbench tables) and ``fdw_local`` (foreign tables to ``source``, same instance); the ``external``
instance on ``external_host`` holds ``fdw_external`` and ``fdw_ext_ro`` (foreign tables to ``source``,
the latter with ``updatable 'false'``). postgres_fdw authenticates like every libpq program pglab
starts: the server process's PGPASSFILE, so no password is in a user mapping, a command or a log.

Before the blocks, set-up points prove what the study relies on: every target reaches the same rows
(counts and checksums through the foreign tables), FDW_ext_ro refuses an UPDATE, the remote SQL
postgres_fdw sends for each pgbench statement (EXPLAIN VERBOSE), and how many statements reach the
source per transaction (its pg_stat_statements over a short run). Every block point checks that its
pgbench session runs under REPEATABLE READ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pglab import emulated
from pglab.analysis import effects
from pglab.analysis.window import measured_points, measured_window
from pglab.hosts.inventory import Inventory
from pglab.nodes.topology import Client
from pglab.runs import preflight
from pglab.runs.opening import Plan, study_run
from pglab.runs.session import Session
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.fdw_overhead import STUDY
from pglab.studies.fdw_overhead.checks import checks, explain, round_trips
from pglab.studies.fdw_overhead.claims import CALIBRATION, RO_CLIENTS, open_pairs
from pglab.studies.fdw_overhead.params import Params
from pglab.studies.fdw_overhead.targets import (
    DATABASES,
    ISOLATION,
    Targets,
    clients,
    deploy,
    initialise,
    isolation_in_effect,
)
from pglab.workloads import adaptive, calibrate, observed, pgbench
from pglab.workloads.observed import Watch


@dataclass(frozen=True)
class Variant:
    """One setting of the swept options: pgbench -M and postgres_fdw's server options."""

    protocol: str
    fetch_size: int | None
    remote_estimate: bool

    def label(self, p: Params) -> str:
        """Part of group names only for the options that are swept (``-Mprepared-fs1000-ure1``)."""
        parts = []
        if len(p.protocols) > 1:
            parts.append(f"M{self.protocol}")
        if len(p.fetch_sizes) > 1:
            parts.append(f"fs{self.fetch_size or 'default'}")
        if len(p.remote_estimates) > 1:
            parts.append(f"ure{int(self.remote_estimate)}")
        return "-".join(parts)


def variants(p: Params) -> list[Variant]:
    return [Variant(*v) for v in itertools.product(p.protocols, p.fetch_sizes, p.remote_estimates)]


def groups(p: Params) -> list[Group]:
    """One group per workload, client count and variant; RW leaves out read-only targets."""
    out = []
    for v in variants(p):
        label = v.label(p)
        for kind, counts, configs in (("RW", p.rw_clients, tuple(p.rw_targets)), ("RO", p.ro_clients, None)):
            for c in counts:
                name = "-".join(x for x in (kind.lower(), f"c{c:03d}", label) if x)
                out.append(Group(name, {"kind": kind, "clients": c, "protocol": v.protocol,
                                        "fetch_size": v.fetch_size, "use_remote_estimate": v.remote_estimate,
                                        "variant": label or "default"}, configs))
    return out


def plan(p: Params) -> list[Planned]:
    """Blocks: every target once per group (workload x clients x variant), ``local`` twice, seeded order."""
    return plan_blocks(p.targets, p.baseline, groups(p), p.blocks, p.seed)


def added_block(p: Params, block: int, pairs: set[str]) -> list[Planned]:
    """Block ``block`` with the baseline (twice) and the open ``workload:target`` pairs only (``RO:FDW_ext_ro``),
    at the client counts the claims are judged at (RO: 1 client when it is run; RW: every count) and in the
    main variant, in the seeded order of a planned block (``pglab.workloads.adaptive`` adds it after the first
    look)."""
    main = variants(p)[0].label(p) or "default"
    kept = []
    for g in groups(p):
        f = g.factors
        judged = f["kind"] == "RW" or RO_CLIENTS not in p.ro_clients or f["clients"] == RO_CLIENTS
        keep = tuple(t for t in (g.configs or p.targets) if t == p.baseline or f"{f['kind']}:{t}" in pairs)
        if f["variant"] == main and judged and len(keep) > 1:
            kept.append(Group(g.name, f, keep))
    return plan_blocks(p.targets, p.baseline, kept, block, p.seed + block, start=block)


def interim_ratios(run_dir: Path, p: Params) -> pd.DataFrame:
    """The block ratios of the main variant so far, each point's tps in its measured window as the analysis
    reads it (``measured_points``): what the first look decides from."""
    by = ["group", "kind", "clients", "variant"]
    pts = pd.DataFrame(measured_points(run_dir, "b[0-9]*-*", tuple(by)),
                       columns=["block", "config", "copy", "steal_flag", "tps", *by])
    pts = pts[pts.variant == (variants(p)[0].label(p) or "default")].assign(inv_tps=lambda d: 1.0 / d.tps)
    return effects.block_ratios(pts, p.baseline, by=by, value="inv_tps")


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "psql"))
    for h in hosts.values():
        h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    # each client may hold a postgres_fdw connection into the source as well; +3: control and sampler
    problems += preflight.connection_problems(max_conn, 2 * p.max_clients + 3)
    preflight.require(problems)


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    with study_run(STUDY, Params, params, check, lambda p, _: Plan(plan(p), p.baseline), data_root=data_root,
                   profile=profile, inventory=inventory, resume=resume) as run:
        p, store = run.p, run.store
        targets = deploy(run.s, p, store)
        where = clients(run.s, p, targets)
        cores = int(store.manifest["hosts"][next(iter(where.values())).host.name].get("cores", 2))
        with run.s.deploy.flushing(0):  # the set-up measures nothing: at the disk's own speed, not the emulated one
            initialise(targets, store, p)
            checks(targets, where, store, p)
            if p.explain:
                explain(targets, where, store)
            if p.round_trip_transactions:
                round_trips(targets, where, store, p)

        if p.emulate and p.emulate.cpu_share == "calibrate":  # the article's local transactions, matched first
            _calibrate(run.s, p, targets, where, store, cores)

        def measure(pl: Planned, point: Point, watch: Watch) -> str | None:
            return _measure(pl, point, targets, where, p, cores, watch)

        observed.run(run, measure, desc=STUDY, progress=progress)
        if p.max_blocks and p.max_blocks > p.blocks:
            adaptive.extend(run, measure, first=p.blocks, max_blocks=p.max_blocks, budget_s=p.budget_s,
                            still_open=lambda: open_pairs(interim_ratios(store.dir, p),
                                                          {"RW": p.rw_clients, "RO": p.ro_clients}),
                            block=lambda n, pairs: added_block(p, n, pairs), desc=STUDY, progress=progress)
    return store.dir


def _calibrate(s: Session, p: Params, t: Targets, where: dict[str, Client], store: RunStore, cores: int) -> None:
    """The CPU share that gives the article's local RO at 1 client, then the flush latency that gives its local RW
    (``fdw_claims.CALIBRATION``), searched before any block (``pglab.workloads.calibrate``)."""
    node, client = t.node("local"), where["local"]
    points = []
    for kind, (knob, article) in CALIBRATION.items():
        def measure(tag: str, kind: str = kind) -> float:
            argv = pgbench.pgbench_argv(client, DATABASES["local"], clients=1, jobs=1,
                                        duration_s=calibrate.SECONDS, select_only=kind == "RO", no_vacuum=True,
                                        progress_s=1)
            return calibrate.pgbench_step(store, node, client, argv, tag, calibrate.SECONDS + p.client_timeout_s,
                                          lambda text: measured_window(text, calibrate.WARMUP_S)["tps"],
                                          workload=kind, target="local", clients=1)
        start = emulated.latency_ms(p.emulate.flush_latency_ms[0]) if p.emulate and p.emulate.flush_latency_ms else 0
        points.append(calibrate.Point(f"{kind} local @ 1 client", knob, article, measure, start_ms=start))
    store.manifest.setdefault("emulation", {})["calibration"] = calibrate.calibrate(s.deploy, points)
    store.save()


def _measure(pl: Planned, point: Point, t: Targets, clients: dict[str, Client], p: Params, cores: int,
             watch: Watch) -> str | None:
    """One point; None when it measured, else why not. Wait events over the workload's measured window."""
    f = pl.group.factors
    target, kind, c = pl.config, str(f["kind"]), int(f["clients"])
    t.set_options(f["fetch_size"], bool(f["use_remote_estimate"]))
    node, client = t.node(target), clients[target]
    iso = isolation_in_effect(t, target, client)
    point.meta.update(transaction_isolation=iso, warmup_s=p.warmup_s, database=DATABASES[target],
                      instance=node.name)
    if iso != ISOLATION:
        return f"transaction_isolation is {iso!r} in the benchmark session, not {ISOLATION!r}"
    log, remote = pgbench.txlog_args(point, node, client) if p.transaction_log else ([], "")
    argv = pgbench.pgbench_argv(client, DATABASES[target], clients=c, jobs=p.jobs or min(c, cores),
                                duration_s=p.seconds, select_only=kind == "RO", no_vacuum=True, progress_s=1,
                                protocol=str(f["protocol"]), extra=[f"--max-tries={p.max_tries}", *log])
    with watch(t.nodes(), p.warmup_s):
        code = pgbench.run(node, point, argv, timeout=p.seconds + p.client_timeout_s, client=client).exit_code
    if remote:
        point.meta["txlogs"] = pgbench.fetch_txlogs(point, node, remote, client)
    return None if code == 0 else f"pgbench exited {code}"
