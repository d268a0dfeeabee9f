"""What pglab's way of running pgbench costs: the same command bare and through pglab, on one node.

Why: every tps figure a study reports comes from pgbench started by ``pglab.pgbench.start`` (a
``setsid sh -c`` wrapper writing to files) and watched by ``run_and_catch_up`` (a Python loop polling
the exit 20 times a second). That must not cost throughput. This script runs the exact same pgbench
argv both ways, interleaved on the same node, alternating which goes first, and prints the ratio of the medians
pglab / bare with its 95% interval (goal: the interval's low end > 0.98, i.e. a 2% loss excluded).

- bare:  ``subprocess.run(argv)`` with ``node.pg_env()`` merged into the environment,
- pglab: ``pgbench.start`` + ``run_and_catch_up`` (a no-op replication system: nothing to wait for,
  no lag sampler) + ``pgbench.collect``, exactly as the logical_replication study calls them.

Every run starts from the same state (history truncated, small tables vacuumed, a checkpoint). A
warm-up run (not counted) comes first. The node is stopped and its workspace removed on exit,
Ctrl-C included.

Run from the project root::

    .venv/bin/python bench/harness_overhead.py                       # 12 pairs of 10 s, 4 clients, scale 10
    .venv/bin/python bench/harness_overhead.py --rounds 36 --until-resolved  # look every 6 pairs, stop when resolved
    .venv/bin/python bench/harness_overhead.py --rounds 2 --seconds 5
    .venv/bin/python bench/harness_overhead.py --tiny                # seconds: does the script still work?

Exit code 0 whatever the ratio (it is a benchmark); non-zero if a pgbench run fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable

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
from pglab.replication.base import System
from pglab.runs.session import Session, session
from pglab.runs.store import RunStore
from pglab.workloads import pgbench
from pglab.workloads.catchup import run_and_catch_up
from tiny import parse


class NoReplication(System):
    """A System with nothing to replicate: ``run_and_catch_up`` returns as soon as pgbench has exited."""

    name = "none"

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        pass

    def caught_up(self) -> bool:
        return True

    def mark(self, token: str, timeout: float | None = None) -> None:
        pass

    def applied(self, token: str) -> bool:
        return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12,
                    help="pairs of runs (bare, pglab); the maximum with --until-resolved; default 12")
    ap.add_argument("--seconds", type=int, default=10, help="pgbench -T of every run; default 10")
    ap.add_argument("--clients", type=int, default=4, help="pgbench -c; default 4")
    ap.add_argument("--jobs", type=int, default=None, help="pgbench -j; default min(clients, cores)")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s; default 10")
    ap.add_argument("--warmup", type=int, default=5, help="seconds of an uncounted first run (0: none); default 5")
    add_stopping_args(ap, "pairs")
    return parse(ap, argv, rounds=1, seconds=1, clients=2, scale=1, warmup=0)


def initialise(node: Node, scale: int) -> None:
    """``pgbench -i -s scale`` on a fresh database (what the studies' setup does, without a store)."""
    node.query(f"create database {DB}")
    node.host.run([node.bin("pgbench"), "-i", "-s", str(scale), DB], env=node.pg_env(), timeout=1800)


def tps_of(label: str, code: int, stdout: str, stderr: str) -> float:
    if code != 0:
        raise RunFailed(f"{label}: pgbench exited {code}\n{stderr.strip()[-2000:]}")
    return float(parse_summary(stdout, stderr)["tps"])


def run_bare(node: Node, argv: list[str], seconds: int) -> float:
    """The command as a user would type it: same argv, same environment, no pglab in between."""
    env = {**os.environ, **node.pg_env()}
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 60)
    return tps_of("bare", res.returncode, res.stdout, res.stderr)


def run_pglab(s: Session, node: Node, store: RunStore, point_id: str, argv: list[str], seconds: int) -> float:
    """The command as the logical_replication study runs it: start, poll, collect, raw files recorded."""
    point = store.point(point_id, kind="run")
    system = NoReplication(node, node, dbname=DB)

    def start() -> Background:
        return s.track_background(pgbench.start(node, point, argv, prefix=""))  # Ctrl-C stops it

    proc, _ = run_and_catch_up(system, start, lag_csv=None, lag_interval_s=0, poll_s=0.05,
                               run_timeout_s=seconds + 60, catchup_timeout_s=30, token=f"bench {point_id}")
    result = pgbench.collect(proc, point, "", timeout=30)
    s.untrack_background(proc)
    point.finish("ok" if result.exit_code == 0 else "failed")
    return tps_of("pglab", result.exit_code, result.stdout, result.stderr)


def measure(runners: dict[str, Callable[[str], float]], node: Node, stop: Stopping) -> bool:
    """Interleaved A B B A ...: drift (caches, WAL, temperature) hits both sides alike; pairs until ``stop``."""
    tps: dict[str, list[float]] = {name: [] for name in runners}
    steals: list[float | None] = []
    r = 0
    while stop.more([p / b for p, b in zip(tps["pglab"], tps["bare"], strict=True)]):
        r += 1
        for name in order(list(runners), r):
            run = runners[name]
            reset_tables(node)
            value, steal = steal_during(lambda: run(f"r{r}-{name}"))  # noqa: B023 (called at once)
            tps[name].append(value)
            steals.append(steal)
            say(f"round {r}/{stop.n_max} {name:>5}: {value:10.1f} tps{steal_words(steal)}")
    return report(tps, "pglab", "bare", stop, steals)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    jobs = args.jobs or min(args.clients, os.cpu_count() or 1)

    def body(store: RunStore) -> None:
        with session(load_inventory(None)) as s:
            node = s.deploy.node("bench", "local", SETTINGS).start()
            say(f"node on port {node.port} in {node.ws.base}; pgbench -i -s {args.scale} ...")
            initialise(node, args.scale)
            cmd = pgbench.pgbench_argv(node, DB, clients=args.clients, jobs=jobs, duration_s=args.seconds,
                                       no_vacuum=True)
            say(f"command: {' '.join(cmd)}")
            say(f"up to {args.rounds} rounds of bare and pglab (order alternates), {args.seconds} s each")
            if args.warmup:
                reset_tables(node)
                warm = pgbench.pgbench_argv(node, DB, clients=args.clients, jobs=jobs, duration_s=args.warmup,
                                            no_vacuum=True)
                say(f"warm-up ({args.warmup} s, not counted): {run_bare(node, warm, args.warmup):.1f} tps")
            runners: dict[str, Callable[[str], float]] = {
                "bare": lambda _id: run_bare(node, cmd, args.seconds),
                "pglab": lambda pid: run_pglab(s, node, store, pid, cmd, args.seconds),
            }
            measure(runners, node, Stopping(args.rounds, args.until_resolved, args.look_every, args.budget_s))

    return run_main("harness_overhead", args, body)


if __name__ == "__main__":
    sys.exit(main())
