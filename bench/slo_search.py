"""Does the rate found at a latency target hold? The search on a local node, then trials at 1.0x and 1.1x of it.

Why: the search (``pglab.app.slo.find_rate``; docs/measurement.md, "The rate at a latency target") says "this
node sustains R/s at p99 <= T ms". That claim is worth something only if a trial at R is good again nearly
always, and one at 1.1 R is bad nearly always; otherwise the boundary it reports is a coin flip. This script
starts a node, loads pgbench's tables, measures the closed-loop peak, runs the search from a quarter of it,
then ``--reruns`` full-length trials at the found rate and as many at 1.1x, alternating (1.0, 1.1, 1.1, 1.0,
...: drift hits both alike), each judged alone by the same rule, and prints the pass shares. Goals: at least
95% pass at 1.0x and at least 95% fail at 1.1x. With 10 trials each a share is known to about +-15%: a
measurement, not a proof.

Run from the project root::

    .venv/bin/python bench/slo_search.py                   # p99 <= 20 ms, scale 10, 5 s / 20 s trials, 10 reruns
    .venv/bin/python bench/slo_search.py --target-ms 5 --reruns 20
    .venv/bin/python bench/slo_search.py --tiny            # seconds: does the script still work?

Exit code 0 when both goals are met, 1 when one is not (figures printed either way) or a trial fails.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from common import DB, RunFailed, run_main, say
from pglab.app.slo import closed_loop_peak, find_rate, rerun
from pglab.hosts.inventory import load_inventory
from pglab.runs.session import session
from pglab.runs.store import Point, RunStore
from pglab.workloads import pgbench
from tiny import parse

GOAL = 0.95


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target-ms", type=float, default=20.0, help="the p99 target (ms); default 20")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s; default 10")
    ap.add_argument("--clients", type=int, default=4, help="pgbench -c of every trial and of the peak; default 4")
    ap.add_argument("--short-s", type=float, default=5, help="the search's short trials (s); default 5")
    ap.add_argument("--full-s", type=float, default=20, help="deciding trials and reruns (s); default 20")
    ap.add_argument("--peak-s", type=int, default=10, help="the closed-loop run for the peak (s); default 10")
    ap.add_argument("--max-trials", type=int, default=16, help="the search's budget of trials; default 16")
    ap.add_argument("--reruns", type=int, default=10, help="trials at 1.0x and at 1.1x each; default 10")
    ap.add_argument("--seed", type=int, default=0, help="the search's seed (its confirmation order); default 0")
    return parse(ap, argv, scale=1, short_s=1, full_s=2, peak_s=2, max_trials=5, reruns=1)


def run_all(store: RunStore, args: argparse.Namespace) -> bool:
    counter = {"n": 0}

    def new_point(prefix: str) -> Any:
        def make(n: int, rate: float) -> Point:
            counter["n"] += 1
            return store.point(f"{prefix}{counter['n']:03d}", kind="slo-trial")
        return make

    with session(load_inventory(None)) as s:
        node = s.deploy.node("primary", "local", {"max_connections": 100})
        node.start()
        node.query(f"create database {DB}")
        say(f"node on port {node.port}; pgbench -i -s {args.scale} ...")
        pgbench.initialise(node, store.point("setup", unique=True), DB, args.scale)
        peak = closed_loop_peak(node, store.point("peak"), DB, clients=args.clients, seconds=args.peak_s)
        say(f"closed-loop peak: {peak:.0f} tps ({args.clients} clients, {args.peak_s} s, pgbench -S)")

        def show(n: int, rate: float, seconds: float, v: Any) -> None:
            bound = "-" if v.p99_upper_ms is None else f"{v.p99_upper_ms:.2f}"
            say(f"  trial {n:2d}: {rate:8.1f}/s {seconds:4.0f} s  {'good' if v.good else 'bad '}  p99 bound {bound} ms"
                f"  late+skipped {v.bad_share:.3%}  {'; '.join(v.reasons)}")

        result = find_rate(node, new_point("search"), peak=peak, target_ms=args.target_ms, dbname=DB,
                           clients=args.clients, short_s=args.short_s, full_s=args.full_s,
                           max_trials=args.max_trials, seed=args.seed, on_trial=show)
        say(f"found {result.rate} /s at p99 <= {args.target_ms:g} ms; bracket {result.bracket}; "
            f"{result.trials_used} trials; confirmed {result.confirmed} ({result.why})")
        if result.rate is None:
            raise RunFailed("no rate was fine")
        passes: dict[float, list[bool]] = {1.0: [], 1.1: []}
        for i in range(args.reruns):
            for factor in ((1.0, 1.1) if i % 2 == 0 else (1.1, 1.0)):
                rate = float(f"{result.rate * factor:.4g}")
                passes[factor] += rerun(node, new_point(f"x{factor:g}-"), rate, args.full_s, 1,
                                        target_ms=args.target_ms, dbname=DB, clients=args.clients)
    at1, at11 = passes[1.0], passes[1.1]
    pass1, fail11 = sum(at1) / len(at1), 1 - sum(at11) / len(at11)
    say(f"at 1.0x ({result.rate:g}/s): {sum(at1)}/{len(at1)} trials pass = {pass1:.0%} (goal >= {GOAL:.0%})")
    say(f"at 1.1x ({result.rate * 1.1:.4g}/s): {len(at11) - sum(at11)}/{len(at11)} trials fail = {fail11:.0%} "
        f"(goal >= {GOAL:.0%})")
    met = pass1 >= GOAL and fail11 >= GOAL
    say("both goals met" if met else "a goal is not met")
    return met


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    met = {"ok": False}

    def body(store: RunStore) -> None:
        met["ok"] = run_all(store, args)

    code = run_main("slo_search", args, body)
    return code if code else (0 if met["ok"] else 1)


if __name__ == "__main__":
    sys.exit(main())
