"""The article's machine's speed, searched before the measured blocks: a CPU share (and a flush latency) that makes
this machine give the article's own figure at a named calibration point.

Why: a verdict under emulation rests on the CPU time a statement takes as much as on the disk's flush, and this
VM's CPU speed changes 3x between boots. The article's table fixes its machine's speed at some point (the
synchronous_commit article's ``off`` at 10 clients, 6,247 tps; postgres_fdw's local transactions at 1 client).
The search sets the emulated CPU's share (``pglab.nodes.cpu_quota``) until this machine gives that figure within
``TOLERANCE``; a ``flush`` point then sets the emulated disk's latency the same way.

**Slow motion.** Where this machine at its full speed is slower than the article's at the CPU point, there is no
share to find. Then the article's machine is run ``k`` times slower: every emulated time (each disk's latency)
times ``k``, where ``k`` = the article's figure / this machine's at full speed (the mean of the steps, each at full
speed). The article's ratios are kept (a CPU ``k`` times slower beside a flush ``k`` times longer) and its absolute
numbers are compared divided by ``k``: a point's ``target`` is ``article / k``.

No calibration point is a claim's own ratio: each is one absolute number of the article's table that no claim is
about. The record (the run's ``emulation.calibration``) keeps every step, so a reader sees how the search went.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pglab.errors import ProcessError
from pglab.nodes import cpu_quota
from pglab.nodes.emulating import Emulating
from pglab.nodes.node import Node
from pglab.nodes.topology import Client
from pglab.runs.store import RunStore
from pglab.workloads import pgbench

SECONDS = 6  # a step: pgbench -T 6 -P 1, its first second cut (5 s of rate: about 2% between steps)
WARMUP_S = 1.0
TOLERANCE = 0.05  # a calibration point is matched when within 5% of its target
MAX_STEPS = 6  # measurements per point after the first
BUDGET_S = 110.0  # the whole search, a study: stop adjusting past it (the record says so)


@dataclass
class Point:
    """One of the article's figures to match: ``measure`` runs the point at the current settings (its raw output
    kept in a point folder named by the step) and returns its rate (tps)."""

    name: str  # "off @ 10 clients"
    knob: str  # "cpu" (the share) or "flush" (the emulated disk's latency, in ms at the article's speed)
    article: float  # the article's figure (tps)
    measure: Callable[[str], float]
    start_ms: float = 0.0  # a flush point's first latency: the level the profile names


def _within(measured: float, target: float) -> bool:
    return target > 0 and abs(measured / target - 1) <= TOLERANCE


def _next(x: float, measured: float, target: float, lo: float, hi: float, power: float) -> float:
    """The knob's next value: the rate taken as proportional to ``x ** power`` (a share: 1; a latency: -1),
    kept strictly inside what the steps so far bracket (else their geometric middle)."""
    guess = x * (target / measured) ** (1 / power)
    if lo < guess < hi:
        return guess
    return math.sqrt(lo * hi)


class Search:
    """One study's search on a deployment: the steps it took, and the record it leaves (``record``)."""

    def __init__(self, deploy: Emulating) -> None:
        self.deploy = deploy
        self.k = 1.0
        self.share = 1.0
        self.flush_ms: float | None = None
        self.steps: list[dict[str, Any]] = []
        self.points: list[dict[str, Any]] = []
        self.t0 = time.monotonic()

    def _measure(self, p: Point, **knobs: float) -> float:
        got = p.measure(f"{p.knob}-{len(self.steps) + 1}")
        self.steps.append({"point": p.name, **{k: round(v, 4) for k, v in knobs.items()}, "k": round(self.k, 4),
                           "measured": round(got, 1)})
        return got

    def _left(self) -> bool:
        return time.monotonic() - self.t0 < BUDGET_S

    def cpu(self, p: Point) -> float:
        """The share that gives ``p``'s figure (/k); in slow motion the share stays whole and ``k`` is set."""
        self.deploy.set_share(1.0)
        got = self._measure(p, share=1.0)
        if got < p.article * (1 - TOLERANCE):  # slower than the article's machine at full speed: slow motion
            # every step measures the same CPU (at full speed; the longer flush hardly moves a CPU-bound point), so
            # their mean is the estimate: k from the steps so far, then a step, until it moves the mean under 5%
            seen = [got]
            for _ in range(3):
                self.k = p.article / (sum(seen) / len(seen))
                self.deploy.slow_motion(self.k)
                seen.append(self._measure(p, share=1.0))
                got = sum(seen) / len(seen)
                if _within(got, p.article / self.k) or not self._left():
                    break
            return got
        lo, hi, share = cpu_quota.MIN_SHARE, 1.0, max(cpu_quota.MIN_SHARE, p.article / got)
        for _ in range(MAX_STEPS):
            if _within(got, p.article) or not self._left():
                break
            self.deploy.set_share(share)
            self.share, got = share, self._measure(p, share=share)
            lo, hi = (lo, share) if got > p.article else (share, hi)
            share = min(1.0, max(cpu_quota.MIN_SHARE, _next(share, got, p.article, lo, hi, 1.0)))
        return got

    def flush(self, p: Point) -> float:
        """The latency (ms at the article's speed; the disk applies ``k``) that gives ``p``'s figure (/k)."""
        ms, target = p.start_ms, p.article / self.k
        lo, hi = 0.05, 1000.0
        self.deploy.set_flush(ms)
        got = self._measure(p, flush_ms=ms)
        for _ in range(MAX_STEPS):
            if _within(got, target) or not self._left():
                break
            lo, hi = (ms, hi) if got > target else (lo, ms)
            ms = _next(ms, got, target, lo, hi, -1.0)
            self.deploy.set_flush(ms)
            got = self._measure(p, flush_ms=ms)
        self.flush_ms = ms
        self.deploy.calibrated_flush(ms)
        return got

    def run(self, points: list[Point]) -> dict[str, Any]:
        for p in sorted(points, key=lambda x: x.knob != "cpu"):  # the CPU first: it sets k
            got = self.cpu(p) if p.knob == "cpu" else self.flush(p)
            target = p.article / self.k
            self.points.append({"point": p.name, "knob": p.knob, "article": round(p.article, 1),
                                "target": round(target, 1), "measured": round(got, 1),
                                "error": round(got / target - 1, 4), "within": _within(got, target)})
        return self.record()

    def record(self) -> dict[str, Any]:
        ok = bool(self.points) and all(x["within"] for x in self.points)
        out = {"k": round(self.k, 4), "share": round(self.share, 4), "period_us": cpu_quota.PERIOD_US,
               "flush_ms": None if self.flush_ms is None else round(self.flush_ms, 3),
               "points": self.points, "steps": self.steps, "seconds": round(time.monotonic() - self.t0, 1), "ok": ok}
        out["said"] = said(out)
        return out


def said(c: dict[str, Any]) -> str:
    """The search in one line, for the record and the report."""
    parts = [f"{x['point']}: {x['measured']:,.0f} tps against a target of {x['target']:,.0f}" for x in c["points"]]
    how = f"CPU share {c['share']:.0%}" + (f", flush {c['flush_ms']:.3g} ms" if c.get("flush_ms") else "")
    if c["k"] > 1:
        how += (f"; slow motion k = {c['k']:.2f} (this machine at full speed is slower than the article's: every "
                "emulated time x k, the article's rates / k)")
    verdict = "calibrated" if c["ok"] else f"calibration missed ({TOLERANCE:.0%} asked)"
    return f"{verdict}: {'; '.join(parts)} ({how}; {len(c['steps'])} steps, {c['seconds']:.0f} s)"


def calibrate(deploy: Emulating, points: list[Point]) -> dict[str, Any]:
    """Search, keep the record on the deployment (the run's manifest gets it), return it."""
    deploy.calibration = Search(deploy).run(points)
    return deploy.calibration


def pgbench_step(store: RunStore, node: Node, client: Client, argv: list[str], tag: str, timeout: float,
                 rate: Callable[[str], float | None], **factors: Any) -> float:
    """One step as the studies run it: pgbench (``-P 1``) against ``node``, its raw output kept in a point folder of
    its own (kind ``calibrate``, no block: no analysis counts it as measured); ``rate``: its tps from what it
    printed (the study's reading of a point's measured window, ``WARMUP_S`` cut)."""
    point = store.point(f"calibrate-{tag}", unique=True, kind="calibrate", warmup_s=WARMUP_S, **factors)
    res = pgbench.run(node, point, argv, timeout=timeout, client=client)
    tps = rate(res.stderr + "\n" + res.stdout)
    point.meta["tps"] = tps
    point.finish("ok" if res.exit_code == 0 and tps else "failed")
    if res.exit_code != 0 or not tps:
        raise ProcessError(node.host.name, res.command, res.exit_code, res.stdout, res.stderr)
    return float(tps)
