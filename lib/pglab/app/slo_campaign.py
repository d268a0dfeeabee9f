"""``pglab slo STUDY --p99 MS``: the highest rate each of a study's configurations sustains at a latency target,
searched in every run of a campaign (docs/measurement.md, "The rate at a latency target").

A campaign is ``--runs`` runs, each on fresh servers, each probing and gating the machine as a study's run does
(``pglab.runs.machine``), each searching every configuration in its own seeded random order (so no
configuration always runs first on a warm or a cold server). Raw first: every trial's pgbench output and
per-transaction logs are in the run's point folders, and each search's result in ``search-<config>.json``,
before the analysis (``pglab.analysis.slo_runs``) reads them back into tables, intervals over runs, figures
and a page. Everything goes into a new folder ``yours/slo/<study>/<stamp>/``: no earlier campaign is touched.

Which studies (``pglab.app.slo_targets``): synchronous_commit (its levels on a primary with one synchronous
standby) and fdw_overhead (local and its three foreign targets), TPC-B-like writes in both. logical_replication
is not wired yet (docs/measurement.md says so).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pglab.app.slo import closed_loop_peak, find_rate
from pglab.app.slo_targets import HOST, TARGETS, Target
from pglab.errors import PglabError, UserError, first_line
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import Node
from pglab.runs import machine
from pglab.runs.progress import bar
from pglab.runs.session import session
from pglab.runs.store import Point, RunStore

# the search stops (no rate sustained) below peak/16: two halvings under its start at a quarter of the peak. Lower,
# a trial needs 299 transactions to bound p99 and grows as 1/rate (minutes a trial), and a target missed at a
# sixteenth of the peak is missed for the disk's or the machine's stalls, not for a queue a lower rate would drain
MIN_RATE_DIVISOR = 16


@dataclass(frozen=True)
class Preset:
    """How long and how fine a campaign's searches are (``--profile``)."""

    runs: int
    scale: int
    clients: int
    short_s: float
    full_s: float
    peak_s: int
    max_trials: int
    warmup_s: float = 1.0
    drain_s: float = 1.0


PRESETS = {
    "smoke": Preset(runs=1, scale=1, clients=2, short_s=1, full_s=2, peak_s=2, max_trials=8, warmup_s=0.5,
                    drain_s=0.5),
    "quick": Preset(runs=3, scale=10, clients=4, short_s=3, full_s=8, peak_s=5, max_trials=16),
    "standard": Preset(runs=5, scale=10, clients=4, short_s=5, full_s=20, peak_s=10, max_trials=16),
}


def check(study: str, target_ms: float, configs: list[str] | None, profile: str, runs: int | None,
          max_trials: int | None = None) -> Target:
    """Everything the campaign is asked, refused with one line (UserError) before anything starts."""
    if study not in TARGETS:
        raise UserError(f"pglab slo {study}: not wired for this study (only: {', '.join(TARGETS)}); "
                        "logical_replication is planned")
    if not 0 < target_ms <= 60_000:  # NaN fails the comparison too
        raise UserError(f"--p99 {target_ms:g}: a target in milliseconds above 0 and at most 60000")
    if profile not in PRESETS:
        raise UserError(f"--profile {profile}: one of {', '.join(PRESETS)}")
    if runs is not None and not 1 <= runs <= 50:
        raise UserError(f"--runs {runs}: between 1 and 50")
    if max_trials is not None and not 3 <= max_trials <= 200:
        raise UserError(f"--max-trials {max_trials}: between 3 and 200")
    t = TARGETS[study]
    for c in configs or []:
        if c not in t.allowed:
            raise UserError(f"--configs: {c!r} is not a configuration of {study} (one of {', '.join(t.allowed)})")
    if configs is not None and len(set(configs)) != len(configs):
        raise UserError("--configs: a configuration named twice")
    return t


def new_campaign(root: Path, study: str, record: dict[str, Any]) -> Path:
    """A folder of its own (UTC stamp and a random suffix: never an earlier campaign's), with ``campaign.json``."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    d = root / study / f"{stamp}-{uuid.uuid4().hex[:6]}"
    (d / "runs").mkdir(parents=True, exist_ok=False)
    (d / "campaign.json").write_text(json.dumps(record, indent=1) + "\n")
    return d


def run_campaign(study: str, target_ms: float, *, root: Path, profile: str = "quick", runs: int | None = None,
                 configs: list[str] | None = None, seed: int = 0, max_trials: int | None = None,
                 progress: bool = True) -> Path:
    """Every run of the campaign, then nothing else: the caller analyses the folder it returns."""
    t = check(study, target_ms, configs, profile, runs, max_trials)
    pre = PRESETS[profile] if max_trials is None else replace(PRESETS[profile], max_trials=max_trials)
    configs = list(configs or t.configs)
    baseline = t.baseline if t.baseline in configs else configs[0]
    n_runs = runs or pre.runs
    record = {"study": study, "target_ms": target_ms, "profile": profile, "preset": asdict(pre), "runs": n_runs,
              "configs": configs, "baseline": baseline, "seed": seed, "select_only": t.select_only,
              "workload": "pgbench -S" if t.select_only else "pgbench TPC-B-like"}
    inventory = Inventory()
    before = machine.probe(inventory, [HOST], wait=True)  # a busy machine is refused before a folder exists
    reasons = machine.gate(before)
    campaign = new_campaign(root, study, record)
    failed = []
    for k in range(n_runs):
        if k:
            before = machine.probe(inventory, [HOST], wait=True)
            reasons = machine.gate(before)
        try:
            _one_run(t, pre, configs, target_ms, campaign, seed + k, inventory, before, reasons, progress,
                     f"run {k + 1}/{n_runs}")
        except (PglabError, OSError) as exc:  # the run's folder says how it ended; the next run is another chance
            failed.append(k + 1)
            print(f"pglab: slo run {k + 1}/{n_runs} failed: {first_line(str(exc), 300)}", file=sys.stderr)
    if len(failed) == n_runs:
        raise UserError(f"pglab slo: every run of the campaign failed (the first line of each above); its raw files "
                        f"are kept in {campaign}")
    return campaign


def _one_run(t: Target, pre: Preset, configs: list[str], target_ms: float, campaign: Path, seed: int,
             inventory: Inventory, before: dict[str, Any], reasons: list[str], progress: bool, label: str) -> None:
    params = {"target_ms": target_ms, "configs": configs, "seed": seed, **asdict(pre)}
    store = RunStore(campaign / "runs", f"slo-{t.study}", "slo", params)
    machine.opened(store, before, reasons)
    store.save()
    order = list(configs)
    random.Random(seed).shuffle(order)
    with session(inventory, store) as s:
        s.deploy.open([HOST])
        servers = t.setup(s, store, pre.scale, pre.clients)
        for n, config in enumerate(order):
            node, db = t.apply(servers, config)
            peak = closed_loop_peak(node, store.point(f"peak-{config}", kind="slo-peak", config=config), db,
                                    clients=pre.clients, seconds=pre.peak_s, select_only=t.select_only, extra=t.extra)
            _search(node, db, store, t, pre, config, n, peak, target_ms, seed, progress, label)
    machine.closed(store, inventory, [HOST])
    store.save()


def _search(node: Node, db: str, store: RunStore, t: Target, pre: Preset, config: str, order: int, peak: float,
            target_ms: float, seed: int, progress: bool, label: str) -> None:
    points: list[str] = []
    shown = bar(pre.max_trials, f"slo {label} {config}", unit="trial", disable=not progress)

    def new_point(n: int, rate: float) -> Point:
        p = store.point(f"{config}-t{n:02d}", kind="slo-trial", config=config, rate=rate)
        points.append(p.dir.name)
        return p

    def on_trial(n: int, rate: float, seconds: float, v: Any) -> None:
        shown.set_postfix_str(f"{rate:,.0f}/s {seconds:g} s {'good' if v.good else 'bad'}")
        shown.update(1)

    try:
        result = find_rate(node, new_point, peak=peak, target_ms=target_ms, dbname=db, clients=pre.clients,
                           select_only=t.select_only, short_s=pre.short_s, full_s=pre.full_s, warmup_s=pre.warmup_s,
                           drain_s=pre.drain_s, max_trials=pre.max_trials, seed=seed, on_trial=on_trial, extra=t.extra,
                           min_rate=peak / MIN_RATE_DIVISOR)
    finally:
        shown.close()
    trials = [{"point": p, "phase": tr.phase, "rate": tr.rate, "duration_s": tr.duration_s, "good": tr.good}
              for p, tr in zip(points, result.trials, strict=True)]
    out = {"config": config, "order": order, "target_ms": target_ms, "peak_tps": round(peak, 1),
           "peak_clients": pre.clients, "rate": result.rate, "confirmed": result.confirmed,
           "bracket": list(result.bracket), "trials_used": result.trials_used, "why": result.why, "trials": trials}
    (store.dir / f"search-{config}.json").write_text(json.dumps(out, indent=1) + "\n")
