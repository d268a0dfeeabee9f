"""What the lag sampler costs: provider pgbench tps with the sampler on and off, on a real replication pair.

Why: while pgbench runs, ``run_and_catch_up`` can sample ``System.lag()`` into a CSV (one query on
the provider every ``lag_interval_s``). The logical_replication study does so at 0.5 s; that must
not lower the throughput it reports. This script sets up a provider and a subscriber (built-in
logical replication by default, or streaming), then alternates runs with the sampler on (a CSV every
``--interval`` s) and off (``lag_csv=None``), in alternating order (A B, B A, ...), and prints the
median per-pair ratio on / off with its 95% interval (goal: the interval's low end > 0.98, i.e. a 2%
loss excluded) and the samples each run took.

Setup and the reset before every run follow ``studies/logical_replication/collect.py`` (``Pair.setup``
and ``Pair.reset``); the pgbench command is the study's (``-n -P 1``). The system is torn down and
both nodes stopped on exit, Ctrl-C included.

Run from the project root::

    .venv/bin/python bench/lag_sampler_overhead.py                     # builtin, 12 pairs of 10 s, 4 clients
    .venv/bin/python bench/lag_sampler_overhead.py --rounds 36 --until-resolved  # look every 6 pairs
    .venv/bin/python bench/lag_sampler_overhead.py --system streaming --rounds 2 --seconds 5
    .venv/bin/python bench/lag_sampler_overhead.py --tiny              # seconds: does the script still work?

Exit code 0 whatever the ratio (it is a benchmark); non-zero if a pgbench run fails or the subscriber
does not catch up.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from common import (
    DB,
    SETTINGS,
    RunFailed,
    Stopping,
    add_stopping_args,
    order,
    report,
    reset_tables,
    run_main,
    say,
    steal_during,
    steal_words,
)
from pglab.hosts.base import Background
from pglab.hosts.inventory import load_inventory
from pglab.nodes.node import Node
from pglab.parsers.pgbench import parse_summary
from pglab.replication.base import System, add_history_key
from pglab.replication.builtin import BuiltinLogical
from pglab.replication.streaming import Streaming
from pglab.runs.session import Session, session
from pglab.runs.store import RunStore
from pglab.workloads import pgbench
from pglab.workloads.catchup import run_and_catch_up
from tiny import parse

CATCHUP_TIMEOUT_S = 120
SYSTEMS: dict[str, type[System]] = {"builtin": BuiltinLogical, "streaming": Streaming}


@dataclass
class Run:
    tps: float
    samples: int
    catchup_s: float | None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=sorted(SYSTEMS), default="builtin", help="replication system; default builtin")
    ap.add_argument("--rounds", type=int, default=12,
                    help="pairs of runs (on, off); the maximum with --until-resolved; default 12")
    ap.add_argument("--seconds", type=int, default=10, help="pgbench -T of every run; default 10")
    ap.add_argument("--clients", type=int, default=4, help="pgbench -c; default 4")
    ap.add_argument("--jobs", type=int, default=None, help="pgbench -j; default min(clients, cores)")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s; default 10")
    ap.add_argument("--interval", type=float, default=0.5, help="lag sampler interval (s) when on; default 0.5")
    add_stopping_args(ap, "pairs")
    return parse(ap, argv, rounds=1, seconds=1, clients=2, scale=1, interval=0.2)


def setup(s: Session, name: str, scale: int) -> System:
    """As ``Pair.setup``: two nodes, pgbench -i and the history key on the provider, prepare, start."""
    provider = s.deploy.node("provider", "local", SETTINGS)
    subscriber = s.deploy.node("subscriber", "local", SETTINGS)
    for node in (provider, subscriber):
        node.start()
        node.query(f"create database {DB}")
    say(f"provider on port {provider.port}, subscriber on port {subscriber.port} in {provider.ws.base}")
    say(f"pgbench -i -s {scale} on the provider ...")
    provider.host.run([provider.bin("pgbench"), "-i", "-s", str(scale), DB], env=provider.pg_env(), timeout=1800)
    add_history_key(provider, DB)
    system = SYSTEMS[name](provider, subscriber, dbname=DB, on_process=s.track_background)
    say(f"{name}: prepare and initial copy ...")
    system.prepare()
    system.start()
    check = system.verify()
    if not check.consistent:
        raise RunFailed(f"tables differ after the initial copy: {', '.join(check.mismatched)}")
    return system


def reset(system: System) -> float:
    """As ``Pair.reset``: empty history, vacuumed small tables, a checkpoint, the subscriber caught up."""
    reset_tables(system.provider)
    return system.wait_caught_up(CATCHUP_TIMEOUT_S)


def run_once(s: Session, system: System, store: RunStore, point_id: str, argv: list[str], seconds: int,
             interval: float | None) -> Run:
    """One measured run as the study's ``_measure``; ``interval`` None means the sampler is off."""
    point = store.point(point_id, kind="run")
    provider = system.provider

    def start() -> Background:
        return s.track_background(pgbench.start(provider, point, argv, prefix=""))  # Ctrl-C stops it

    proc, timing = run_and_catch_up(
        system, start, lag_csv=point.dir / "lag.csv" if interval else None, lag_interval_s=interval or 0,
        poll_s=0.05, run_timeout_s=seconds + 60, catchup_timeout_s=CATCHUP_TIMEOUT_S, token=f"bench {point_id}")
    result = pgbench.collect(proc, point, "", timeout=30)
    s.untrack_background(proc)
    point.meta["timing"] = timing.as_dict()
    point.finish("ok" if result.exit_code == 0 and timing.caught_up else "failed")
    if result.exit_code != 0:
        raise RunFailed(f"{point_id}: pgbench exited {result.exit_code}\n{result.stderr.strip()[-2000:]}")
    if not timing.caught_up:
        raise RunFailed(f"{point_id}: the subscriber did not catch up within {CATCHUP_TIMEOUT_S} s")
    tps = float(parse_summary(result.stdout, result.stderr)["tps"])
    return Run(tps, timing.lag_samples, timing.catchup_s)


def measure(s: Session, system: System, store: RunStore, args: argparse.Namespace,
            argv: list[str], stop: Stopping) -> tuple[dict[str, list[Run]], list[float | None]]:
    """Interleaved on, off, off, on ...: drift (caches, WAL, bloat) hits both sides alike; pairs until ``stop``."""
    runs: dict[str, list[Run]] = {"on": [], "off": []}
    steals: list[float | None] = []
    intervals = {"on": args.interval, "off": None}
    r = 0
    while stop.more([a.tps / b.tps for a, b in zip(runs["on"], runs["off"], strict=True)]):
        r += 1
        for name in order(list(intervals), r):
            interval = intervals[name]
            reset(system)
            run, steal = steal_during(
                lambda: run_once(s, system, store, f"r{r}-{name}", argv, args.seconds, interval))  # noqa: B023
            runs[name].append(run)
            steals.append(steal)
            catchup = "-" if run.catchup_s is None else f"{run.catchup_s:.2f} s"
            say(f"round {r}/{stop.n_max} sampler {name:>3}: {run.tps:10.1f} tps  "
                f"{run.samples:3d} lag samples  catch-up {catchup}{steal_words(steal)}")
    return runs, steals


def run_all(s: Session, store: RunStore, args: argparse.Namespace) -> None:
    system = setup(s, args.system, args.scale)
    try:
        provider: Node = system.provider
        jobs = args.jobs or min(args.clients, os.cpu_count() or 1)
        argv = pgbench.pgbench_argv(provider, DB, clients=args.clients, jobs=jobs, duration_s=args.seconds,
                                    no_vacuum=True, progress_s=1)
        say(f"command: {' '.join(argv)}")
        say(f"up to {args.rounds} rounds of sampler on (every {args.interval:g} s) and off (order alternates), "
            f"{args.seconds} s each")
        stop = Stopping(args.rounds, args.until_resolved, args.look_every, args.budget_s)
        runs, steals = measure(s, system, store, args, argv, stop)
        say(f"lag samples per run, sampler on: {', '.join(str(r.samples) for r in runs['on'])}")
        report({f"sampler {k}": [r.tps for r in v] for k, v in runs.items()}, "sampler on", "sampler off", stop, steals)
    finally:
        daemons = list(system.processes)
        system.teardown()
        for proc in daemons:
            s.untrack_background(proc)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body(store: RunStore) -> None:
        with session(load_inventory(None)) as s:
            run_all(s, store, args)

    return run_main("lag_sampler_overhead", args, body)


if __name__ == "__main__":
    sys.exit(main())
