"""One replication measurement: a provider workload, then the wait until the subscriber has caught up.

No threads: the caller's loop polls the workload's exit (``Background.running``), ticks the lag sampler
(``pglab.workloads.lag``) at its own interval, and after the workload ends polls the subscriber. The
resolution of a catch-up time is the poll interval plus one poll's queries (both recorded).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pglab.hosts.base import Background
from pglab.replication.base import System
from pglab.workloads.lag import LagSampler

LAG_COLUMNS = ("t_s", "phase", "lag_bytes", "lag_s", "lag_events")


def lag_rows(system: System, t_s: float, phase: str) -> list[list[str]]:
    """One sample of ``System.lag()``. A failed query is a gap in the CSV, not a failed point."""
    try:
        lag: dict[str, Any] = system.lag()
    except Exception as exc:  # noqa: BLE001  (the catch-up check decides the point's fate, not the sampler)
        lag = {"lag_events": None, "error": type(exc).__name__}
    return [[f"{t_s:.3f}", phase, *(_fmt(lag.get(k)) for k in ("lag_bytes", "lag_s", "lag_events"))]]


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


@dataclass
class Timing:
    """What ``run_and_catch_up`` measured (monotonic seconds)."""

    run_s: float  # workload start to its exit being seen
    catchup_s: float | None  # exit seen to the marker applied on the subscriber; None on timeout
    confirmed_s: float | None  # exit seen to the system's own caught_up(); None on timeout
    caught_up: bool  # both of the above within the timeout
    checks: int  # polls after the run
    slowest_check_s: float  # one poll's queries; the resolution is poll_s + this
    poll_s: float
    lag_samples: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def run_and_catch_up(system: System, start: Callable[[], Background], *, lag_csv: Path | None,
                     lag_interval_s: float, poll_s: float, run_timeout_s: float,
                     catchup_timeout_s: float, token: str) -> tuple[Background, Timing]:
    """Start the workload, sample lag while it runs, then wait for catch-up (never raises on a timeout).

    Catch-up is measured twice from the moment the workload was seen to exit: until a marker
    committed right then is visible on the subscriber (``System.mark``: applied, the same test for
    every system), and until the system's own ``caught_up`` agrees (LSNs, sl_setsync, PgQ ticks).
    A workload that outlives ``run_timeout_s`` is stopped (its exit code says so); the catch-up wait
    still runs, so the subscriber's state after a killed run is measured too. A marker that cannot be
    committed within ``catchup_timeout_s`` (a provider stuck on a synchronous standby) raises QueryTimeout.
    """
    t0 = time.monotonic()
    sampler = LagSampler(lag_csv, LAG_COLUMNS, partial(lag_rows, system), lag_interval_s, t0)
    proc = start()
    try:
        while proc.running():
            sampler.tick("run")
            if time.monotonic() - t0 > run_timeout_s:
                proc.stop()
                break
            time.sleep(poll_s)
        t_end = time.monotonic()
        system.mark(token, timeout=catchup_timeout_s)  # QueryTimeout (a ProcessError) if it cannot commit
        checks, slowest = 0, 0.0
        applied_at: float | None = None
        confirmed_at: float | None = None
        while time.monotonic() - t_end <= catchup_timeout_s:
            sampler.tick("catchup")
            c0 = time.monotonic()
            if applied_at is None and system.applied(token):
                applied_at = time.monotonic()
            if confirmed_at is None and system.caught_up():
                confirmed_at = time.monotonic()
            c1 = time.monotonic()
            checks += 1
            slowest = max(slowest, c1 - c0)
            if applied_at is not None and confirmed_at is not None:
                break
            time.sleep(poll_s)
        done = applied_at is not None and confirmed_at is not None
        sampler.tick("caught_up" if done else "timeout", force=True)
    finally:
        sampler.close()
    return proc, Timing(run_s=t_end - t0, catchup_s=None if applied_at is None else applied_at - t_end,
                        confirmed_s=None if confirmed_at is None else confirmed_at - t_end, caught_up=done,
                        checks=checks, slowest_check_s=slowest, poll_s=poll_s, lag_samples=sampler.samples)
