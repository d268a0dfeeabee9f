"""Levers on the noise floor: which of a reset, CPU pinning or leaving the wait sampler out narrows the A/A spread.

Why: every study runs its baseline twice per block (copy 1 and copy 2); the spread of copy 2 / copy 1
(``pglab.analysis.effects.noise_floor``: the 95th percentile of |A/A - 1|) is the smallest effect a run
can tell from none. This script measures, on one local node, the A/A pair under four variants:

* ``plain``: nothing before a run, server and pgbench on every CPU, no sampler;
* ``reset``: the tables reset before each run (``common.reset_tables``: truncate pgbench_history,
  vacuum pgbench_branches and pgbench_tellers, checkpoint);
* ``pinned``: client and server on disjoint CPUs: the postmaster is pinned to CPU 1 just before the run
  (``taskset -a -cp 1``; pgbench's backends, forked then, inherit it; it is given its CPUs back after) and
  pgbench runs under ``taskset -c 0``. Not run on a host without CPUs 0 and 1;
* ``unsampled``: copy 2 runs with the wait sampler (``pglab.workloads.waits``, 100 ms, as the studies),
  copy 1 without: against ``plain`` (both without) it isolates what the sampler does to an A/A pair.
  The lever is leaving the sampler out: it narrows the floor if this pair spreads wider than plain's.

Every block runs the eight runs (four variants x two copies) in a seeded random order, so a drift of the
machine falls on every variant alike. Per variant the script prints the per-block A/A ratios, the noise
floor, the median A/A, the median |log A/A| and the spread (standard deviation of log A/A); then each
lever's spread over plain's, with a 95% interval (F distribution, the variants' blocks taken as
independent) and whether it narrowed it. Runs that lost more than 20% CPU to the hypervisor are left
out, as in the studies (``effects.block_ratios``).

Run from the project root::

    .venv/bin/python bench/noise_levers.py                  # 8 blocks of 8 x 4 s, 4 clients, scale 10
    .venv/bin/python bench/noise_levers.py --blocks 16 --seconds 10
    .venv/bin/python bench/noise_levers.py --tiny           # seconds: does the script still work?

Exit code 0 whatever it finds (no goal); non-zero if a pgbench run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import sys
from collections.abc import Iterator

import numpy as np
import pandas as pd
from common import DB, SETTINGS, RunFailed, reset_tables, run_main, say, steal_during, steal_words
from pglab.analysis import effects
from pglab.hosts.base import Result
from pglab.hosts.inventory import load_inventory
from pglab.nodes.node import Node
from pglab.parsers.pgbench import parse_summary
from pglab.runs.session import session
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned
from pglab.workloads import pgbench, waits
from pglab.workloads.cpu import STEAL_FLAG
from scipy import stats
from tiny import parse

VARIANTS = ("plain", "reset", "pinned", "unsampled")
CONFIG = "baseline"  # every point is a baseline copy: the A/A pair is all this script compares
SERVER_CPUS, CLIENT_CPUS = "1", "0"


def pinning_impossible() -> str | None:
    """Why the pinned variant cannot run here (None when it can): it needs CPUs 0 and 1, and taskset."""
    cores = os.cpu_count() or 1
    if cores < 2 or not {0, 1} <= os.sched_getaffinity(0):
        return f"not possible here ({cores} cores)"
    if shutil.which("taskset") is None:
        return "not possible here (no taskset)"
    return None


class Pinning:
    """The postmaster's CPU set: pinned to ``SERVER_CPUS`` for a pinned run, its own set back after."""

    def __init__(self, node: Node):
        self.node = node
        head = node.host.run(["head", "-n", "1", f"{node.data_dir}/postmaster.pid"], as_user=node.user)
        self.pid = int(head.stdout.split()[0])
        self.free = self.affinity(self.pid)
        self.checked = False

    def affinity(self, pid: int) -> str:
        """``taskset -cp``'s list for ``pid`` (``0,1``)."""
        out = self.node.host.run(["taskset", "-cp", str(pid)], as_user=self.node.user).stdout
        return out.rsplit(":", 1)[1].strip()

    def _set(self, cpus: str) -> None:
        self.node.host.run(["taskset", "-a", "-cp", cpus, str(self.pid)], as_user=self.node.user)

    @contextlib.contextmanager
    def server_pinned(self) -> Iterator[None]:
        """Backends forked inside the block run on ``SERVER_CPUS``; the first time, one is checked."""
        self._set(SERVER_CPUS)
        try:
            if not self.checked:
                with self.node.connect(DB) as conn, conn.cursor() as cur:
                    cur.execute("select pg_backend_pid()")
                    backend = int(cur.fetchone()[0])
                    say(f"pinned check: postmaster {self.pid} on CPU(s) {self.affinity(self.pid)}, a backend "
                        f"forked after it ({backend}) on CPU(s) {self.affinity(backend)}")
                self.checked = True
            yield
        finally:
            self._set(self.free)


def plan(variants: tuple[str, ...], blocks: int, seed: int) -> list[Planned]:
    """Per block every variant's two copies, all shuffled together (not pairwise: as in a study's block)."""
    rng = random.Random(seed)
    out: list[Planned] = []
    for b in range(1, blocks + 1):
        points = [Planned(b, Group(v), CONFIG, copy) for v in variants for copy in (1, 2)]
        rng.shuffle(points)
        out.extend(points)
    return out


def run_one(node: Node, point: Point, argv: list[str], seconds: int, pl: Planned,
            sampler: waits.WaitSampler, pin: Pinning | None) -> Result:
    """One pgbench run as its variant (and copy) wants it."""
    variant, timeout = pl.group.name, seconds + 60
    if variant == "reset":
        reset_tables(node)
    if variant == "pinned" and pin is not None:
        with pin.server_pinned():
            return pgbench.run(node, point, ["taskset", "-c", CLIENT_CPUS, *argv], timeout=timeout)
    if variant == "unsampled" and pl.copy == 2:
        with sampler.recording(point, {"bench": node}):
            return pgbench.run(node, point, argv, timeout=timeout)
    return pgbench.run(node, point, argv, timeout=timeout)


def measure(node: Node, store: RunStore, sampler: waits.WaitSampler, pin: Pinning | None, argv: list[str],
            args: argparse.Namespace, variants: tuple[str, ...]) -> tuple[pd.DataFrame, list[float | None]]:
    """Every planned run: one row per run (block, group = variant, copy, tps, steal flag), and each run's steal."""
    rows: list[dict] = []
    steals: list[float | None] = []
    for pl in plan(variants, args.blocks, args.seed):
        point = store.point(pl.id, **pl.factors())
        res, steal = steal_during(lambda: run_one(node, point, argv, args.seconds, pl, sampler, pin))  # noqa: B023
        if res.exit_code != 0:
            raise RunFailed(f"{pl.id}: pgbench exited {res.exit_code}")
        tps = float(parse_summary(res.stdout, res.stderr)["tps"])
        flagged = steal is not None and steal > STEAL_FLAG
        rows.append({**pl.factors(), "value": tps, "steal_flag": flagged})
        steals.append(steal)
        say(f"{pl.id:>26}: {tps:9.1f} tps{steal_words(steal)}{'  (left out: steal)' if flagged else ''}")
    return pd.DataFrame(rows), steals


def spread(logs: np.ndarray) -> float:
    """Standard deviation of log A/A (NaN below two blocks)."""
    return float(np.std(logs, ddof=1)) if len(logs) >= 2 else float("nan")


def spread_ratio_interval(ratio: float, n: int, n0: int) -> tuple[float, float]:
    """95% interval of a ratio of standard deviations over ``n`` and ``n0`` blocks (F distribution)."""
    if n < 2 or n0 < 2 or not np.isfinite(ratio):
        return float("nan"), float("nan")
    f_hi, f_lo = stats.f.ppf(0.975, n - 1, n0 - 1), stats.f.ppf(0.025, n - 1, n0 - 1)
    return float(np.sqrt(ratio**2 / f_hi)), float(np.sqrt(ratio**2 / f_lo))


def lever_words(variant: str, ratio: float, lo: float, hi: float) -> str:
    """Whether the lever narrowed the A/A spread: only when the interval says so, else 'not measurably'."""
    if not np.isfinite(lo):
        return "too few blocks to say"
    if variant == "unsampled":  # the lever is plain's leaving the sampler out of both copies
        if lo > 1:
            return "the sampler on one copy widened the A/A: leaving it out narrows the floor"
        if hi < 1:
            return "the A/A was narrower with the sampler on one copy: leaving it out does not narrow it"
        return "the sampler on one copy did not measurably change the A/A spread: no measurable gain in leaving it out"
    if hi < 1:
        return f"{variant} narrowed the A/A spread"
    if lo > 1:
        return f"{variant} widened the A/A spread"
    return f"{variant} did not measurably narrow the A/A spread"


def report(points: pd.DataFrame, variants: tuple[str, ...]) -> None:
    """Per variant the A/A figures, then each lever's spread over plain's."""
    r = effects.block_ratios(points, CONFIG)
    aa = r[r.config == effects.AA]
    spreads: dict[str, tuple[float, int]] = {}
    for v in variants:
        ratios = aa[aa.group == v].ratio.to_numpy(dtype=float)
        logs = np.log(ratios)
        s = spread(logs)
        spreads[v] = (s, len(ratios))
        if not len(ratios):
            say(f"{v:>9}: no A/A pair left (steal)")
            continue
        say(f"{v:>9}: A/A per block: " + ", ".join(f"{x:.3f}" for x in ratios))
        say(f"{'':>9}  noise floor +-{100 * effects.noise_floor(ratios):.1f}%, median A/A {np.median(ratios):.3f}, "
            f"median |log A/A| {np.median(np.abs(logs)):.4f}, spread (std of log A/A) {s:.4f}, "
            f"{len(ratios)} block(s)")
    s0, n0 = spreads["plain"]
    for v in ("reset", "pinned", "unsampled"):
        if v not in variants:
            continue
        s, n = spreads[v]
        ratio = s / s0 if s0 > 0 else float("nan")
        lo, hi = spread_ratio_interval(ratio, n, n0)
        say(f"lever {v}: spread {v}/plain = {ratio:.3f} (95% interval [{lo:.3f}, {hi:.3f}], {n} and {n0} blocks): "
            f"{lever_words(v, ratio, lo, hi)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=8, help="blocks of 4 variants x 2 copies; default 8")
    ap.add_argument("--seconds", type=int, default=4, help="pgbench -T of every run; default 4")
    ap.add_argument("--clients", type=int, default=4, help="pgbench -c; default 4")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s; default 10")
    ap.add_argument("--seed", type=int, default=1, help="the order of the runs within each block; default 1")
    return parse(ap, argv, blocks=2, seconds=1, clients=2, scale=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    jobs = min(args.clients, os.cpu_count() or 1)
    why_not = pinning_impossible()
    variants = tuple(v for v in VARIANTS if v != "pinned" or why_not is None)

    def body(store: RunStore) -> None:
        with session(load_inventory(None)) as s, waits.WaitSampler() as sampler:
            node = s.deploy.node("bench", "local", SETTINGS).start()
            pin = None if why_not else Pinning(node)  # the postmaster's pid and CPUs, right after start
            node.query(f"create database {DB}")
            node.host.run([node.bin("pgbench"), "-i", "-s", str(args.scale), DB], env=node.pg_env(), timeout=1800)
            argv_ = pgbench.pgbench_argv(node, DB, clients=args.clients, jobs=jobs, duration_s=args.seconds,
                                         no_vacuum=True)
            say(f"command: {' '.join(argv_)}; {args.blocks} block(s) of {2 * len(variants)} runs "
                f"({', '.join(variants)}; two copies each) in a seeded order (seed {args.seed})")
            if pin is None:
                say(f"pinned: {why_not}")
            else:
                say(f"CPU sets: pinned runs: server (postmaster and the backends it forks) on CPU {SERVER_CPUS}, "
                    f"pgbench on CPU {CLIENT_CPUS}; other runs: server on CPU(s) {pin.free}, pgbench unpinned "
                    f"(CPU(s) {','.join(map(str, sorted(os.sched_getaffinity(0))))})")
            (points, steals), whole = steal_during(lambda: measure(node, store, sampler, pin, argv_, args, variants))
            report(points, variants)
            known = [x for x in steals if x is not None]
            per_run = (f"; per run {min(known):.0%}-{max(known):.0%} (median {statistics.median(known):.0%}), "
                       f"{int(points.steal_flag.sum())} run(s) over {STEAL_FLAG:.0%} left out") if known else ""
            overall = "unknown" if whole is None else f"{whole:.0%}"
            say(f"cpu steal during the bench: {overall} overall{per_run}")
            if args.tiny:
                say("--tiny: sizes far too small to say anything about the levers")

    return run_main("noise_levers", args, body)


if __name__ == "__main__":
    sys.exit(main())
