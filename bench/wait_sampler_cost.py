"""What the wait-event sampler costs: pgbench tps with and without it, in blocks, beside the A/A noise floor.

Why: every point of every study samples each node's ``pg_stat_activity`` about every 100 ms
(``pglab.workloads.waits``). That must not change what it observes. This script runs, on one local node, blocks
of three pgbench runs in a seeded random order: without the sampler, without it again (A/A), and with
it. Within each block the two others are divided by the first run without; the script prints the
per-block ratios, the median ratio with its 95% interval (``pglab.analysis.stats.median_interval``), whether
that interval excludes a 2% loss (its low end > 0.98), the noise floor, and the sampler's own CPU time as a
share of the machine's CPU time over the sampled runs. ``--until-resolved`` adds blocks (looks every 6,
Bonferroni over the looks planned up to ``--blocks``) until the interval lies above or below 0.98.

Goals: the sampler's effect is within the noise floor (its interval includes 1, or its median is
within the floor of 1), and pglab's sampler CPU is at most 0.5% of the machine's CPU time.

Run from the project root::

    .venv/bin/python bench/wait_sampler_cost.py                   # 12 blocks of 3 x 5 s, 4 clients
    .venv/bin/python bench/wait_sampler_cost.py --blocks 36 --until-resolved
    .venv/bin/python bench/wait_sampler_cost.py --blocks 10 --seconds 10
    .venv/bin/python bench/wait_sampler_cost.py --tiny            # seconds: does the script still work?

Exit code 1 when a goal is missed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np
import pandas as pd
from common import (
    DB,
    SETTINGS,
    RunFailed,
    Stopping,
    add_stopping_args,
    reset_tables,
    run_main,
    say,
    steal_during,
    steal_words,
)
from pglab.analysis import effects
from pglab.analysis.stats import median_interval
from pglab.hosts.base import Result
from pglab.hosts.inventory import load_inventory
from pglab.nodes.node import Node
from pglab.parsers.pgbench import parse_summary
from pglab.runs.session import session
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, plan_blocks
from pglab.workloads import pgbench, waits
from tiny import parse

CPU_GOAL = 0.005


def run(node: Node, point: Point, argv: list[str], seconds: int, sampler: waits.WaitSampler | None) -> Result:
    """One pgbench run, recorded by the wait-event sampler when there is one."""
    if sampler is None:
        return pgbench.run(node, point, argv, timeout=seconds + 60)
    with sampler.recording(point, {"bench": node}):
        return pgbench.run(node, point, argv, timeout=seconds + 60)


def measure(node: Node, store: RunStore, sampler: waits.WaitSampler, argv: list[str], args: argparse.Namespace,
            stop: Stopping) -> tuple[pd.DataFrame, list[float | None], float, float]:
    """Blocks until ``stop``: the block ratios, each run's steal, the sampler's CPU seconds and the seconds sampled."""
    plan = plan_blocks(["without", "with"], "without", [Group("g")], args.blocks, args.seed)
    rows: list[dict] = []
    steals: list[float | None] = []
    cpu_s, wall_s, r = 0.0, 0.0, pd.DataFrame(columns=["config", "ratio"])
    for _, block in itertools.groupby(plan, key=lambda pl: pl.block):
        if not stop.more(r[r.config == "with"].ratio.tolist()):
            break
        for pl in block:
            reset_tables(node)
            point = store.point(pl.id, **pl.factors())
            used = sampler if pl.config == "with" else None
            res, steal = steal_during(lambda: run(node, point, argv, args.seconds, used))  # noqa: B023
            if used:
                cpu_s += point.meta["waits"]["sampler_cpu_s"]
                wall_s += args.seconds
            if res.exit_code != 0:
                raise RunFailed(f"{pl.id}: pgbench exited {res.exit_code}")
            tps = float(parse_summary(res.stdout, res.stderr)["tps"])
            rows.append({**pl.factors(), "value": tps})
            steals.append(steal)
            say(f"{pl.id:>24}: {tps:9.1f} tps{steal_words(steal)}")
        r = effects.block_ratios(pd.DataFrame(rows), "without")
    return r, steals, cpu_s, wall_s


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=12,
                    help="blocks of (without, without again, with); the maximum with --until-resolved; default 12")
    ap.add_argument("--seconds", type=int, default=5, help="pgbench -T of every run; default 5")
    ap.add_argument("--clients", type=int, default=4, help="pgbench -c; default 4")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s; default 10")
    ap.add_argument("--interval-ms", type=int, default=100, help="sampling period; default 100")
    ap.add_argument("--seed", type=int, default=1)
    add_stopping_args(ap, "blocks")
    return parse(ap, argv, blocks=2, seconds=1, clients=2, scale=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    jobs = min(args.clients, os.cpu_count() or 1)
    verdict: dict[str, bool] = {}

    def body(store: RunStore) -> None:
        with session(load_inventory(None)) as s, waits.WaitSampler(args.interval_ms / 1000) as sampler:
            node = s.deploy.node("bench", "local", SETTINGS).start()
            node.query(f"create database {DB}")
            node.host.run([node.bin("pgbench"), "-i", "-s", str(args.scale), DB], env=node.pg_env(), timeout=1800)
            argv_ = pgbench.pgbench_argv(node, DB, clients=args.clients, jobs=jobs, duration_s=args.seconds,
                                         no_vacuum=True)
            say(f"command: {' '.join(argv_)}; up to {args.blocks} blocks of 3 runs in a seeded order")
            stop = Stopping(args.blocks, args.until_resolved, args.look_every, args.budget_s, "blocks")
            r, steals, cpu_s, wall_s = measure(node, store, sampler, argv_, args, stop)
            with_ = r[r.config == "with"].ratio.to_numpy()
            noise = effects.noise_floor(r[r.config == effects.AA].ratio)
            say("per-block A/A: " + ", ".join(f"{v:.3f}" for v in r[r.config == effects.AA].ratio))
            stop.verdict(list(with_), "with/without", steals)
            med, lo, hi, _ = median_interval(with_, stop.confidence)
            say(f"noise floor (95th percentile of |A/A - 1|): +-{100 * noise:.1f}%")
            within = (lo <= 1 <= hi) or abs(med - 1) <= noise
            share = cpu_s / ((os.cpu_count() or 1) * wall_s) if wall_s else float("nan")
            say(f"effect within the noise floor: {'PASS' if within else 'FAIL'}")
            say(f"sampler CPU: {cpu_s:.3f} s over {wall_s:.0f} s sampled = {100 * share:.3f}% of the machine's CPU "
                f"(goal <= {100 * CPU_GOAL:.1f}%): {'PASS' if share <= CPU_GOAL else 'FAIL'}")
            verdict.update(ok=bool(within and share <= CPU_GOAL and not np.isnan(share)))

    code = run_main("wait_sampler_cost", args, body)
    return code if code else (0 if verdict.get("ok") else 1)


if __name__ == "__main__":
    sys.exit(main())
