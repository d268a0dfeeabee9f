"""A sweep whose every point is observed alike: its hosts' CPU shares (``cpu``) and its nodes' wait events (``waits``).

Why one place: a point's steal flag and wait-event shares are compared across studies, so each study
must record them the same way around its workload; the study says only which nodes and which window
(its warm-up left out). ``pglab.runs.sweep`` owns the loop; this module adds what every point records
beside its workload.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pglab.hosts.base import Host
from pglab.runs import sweep
from pglab.runs.opening import Opened
from pglab.runs.store import Point
from pglab.runs.sweep import Planned
from pglab.workloads import cpu, statement_probe, waits

# watch(nodes, delay_s=0.0): wait events of ``nodes`` recorded over the ``with`` body, from ``delay_s`` into it
Watch = Callable[..., contextlib.AbstractContextManager]
Measure = Callable[[Planned, Point, Watch], "str | None"]


def run(opened: Opened, measure: Measure, *, desc: str, progress: bool = True,
        hosts: Callable[[Planned], Iterable[Host]] | None = None,
        ready: Callable[[Planned, Point], str | None] | None = None,
        errors: tuple[type[BaseException], ...] = (Exception,)) -> dict[str, int]:
    """``sweep.run`` over the run's points, each measured as ``measure(planned, point, watch)`` inside the
    CPU recording of ``hosts(planned)`` (default: every host of the run). ``ready(planned, point)`` runs
    first, outside that window (a replication pair set up again), and a reason it returns fails the point.
    One wait sampler serves the sweep (``wait_sample_ms``, 0 = off); ``watch`` with no nodes records nothing.
    Each running node's statement time is probed before the first point and after the last (``statement_probe``)."""
    p = opened.p
    every = [opened.s.host(h) for h in p.hosts]
    with waits.sampler(p.wait_sample_ms) as sampler:

        def one(pl: Planned, point: Point) -> str | None:
            if ready is not None and (reason := ready(pl, point)) is not None:
                return reason

            def watch(nodes: Mapping[str, Any], delay_s: float = 0.0) -> contextlib.AbstractContextManager:
                return waits.recording(sampler, point, nodes, delay_s) if nodes else contextlib.nullcontext()

            with cpu.during(every if hosts is None else hosts(pl), point):
                return measure(pl, point, watch)

        statement_probe.opened(opened.store, opened.s.nodes)  # the CPU a statement takes, at both ends
        counts = sweep.run(opened.store, opened.points, one, desc=desc, progress=progress, errors=errors,
                           health=opened.s.health)
        statement_probe.closed(opened.store, opened.s.nodes)
        return counts
