"""Blocks spent where a claim is still open: after the planned blocks, more blocks of only the open configurations.

Why: on a small machine most claims stay open after the planned blocks, while some configurations serve no
open claim any more (a level whose claim was decided, a level no claim is about). Measuring those again
buys nothing; the time goes to the configurations a verdict still waits for.

The design (``studies.synchronous_commit`` uses it; docs/measurement.md, "Blocks spent where a claim is
open"):

* **Two looks.** The first after the profile's ``blocks``: the study says which configurations an open
  claim still needs (``still_open``). The second after the last added block. Nothing is decided between.
* **Blocks added one at a time**, each with the baseline twice (the A/A) and the open configurations only,
  in the seeded order of a planned block, until ``max_blocks`` or until the next block would end past
  ``budget_s`` of sweep time (the block's length estimated from the blocks so far).
* **The error rate under two looks** is kept exactly: a verdict decided with the first look's blocks uses the
  95% interval of those blocks (at 6 blocks it misses with probability 3.1%); a verdict from n blocks uses the
  narrowest interval for which the chance that either look's interval misses is at most 5%
  (``pglab.analysis.claims.last_look_confidence``, computed from the binomial walk the two looks share).
  Either way the chance that a verdict rests on an interval that misses is at most 5%, whichever look
  decided it.

What was done is recorded in the manifest (``plan.adaptive``): the looks (what was open at the first, what the
added blocks measured, the verdicts of the last left to the analysis), how many
blocks were added and why it stopped. The analysis reads it to say, per claim, the blocks it got and why.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from pglab.runs.opening import Opened
from pglab.runs.sweep import Planned, finished
from pglab.workloads import observed

#: why the adding stopped, as the manifest and the report say it
STOPPED = {"decided": "every claim was decided or needs nothing more at the first look",
           "max_blocks": "max_blocks reached", "budget": "the next block would have ended past budget_s"}


def extend(run: Opened[Any], measure: observed.Measure, *, first: int, max_blocks: int, budget_s: float | None,
           still_open: Callable[[], set[str]], block: Callable[[int, set[str]], Sequence[Planned]], desc: str,
           progress: bool = True, **observe: Any) -> dict[str, Any]:
    """After ``first`` planned blocks: the first look (``still_open()``: the configurations an open claim
    needs), then blocks ``block(n, open)`` up to ``max_blocks`` or the budget. Returns what the manifest's
    ``plan.adaptive`` records."""
    store = run.store
    record: dict[str, Any] = {"first_look": first, "max_blocks": max_blocks, "budget_s": budget_s, "looks": []}
    swept = float(sum(store.manifest.get("sweep_s", [])))
    per_block = swept / first if first else 0.0
    needed = still_open()
    record["looks"].append({"blocks": first, "open": sorted(needed)})
    n, added, started = first, [], time.monotonic()
    stopped = "decided" if not needed else "max_blocks"
    while needed and n < max_blocks:
        elapsed = swept + (time.monotonic() - started)
        if budget_s is not None and elapsed + per_block > budget_s:
            stopped = "budget"
            break
        n += 1
        points = list(block(n, needed))
        added += [p.id for p in points]
        record.update(blocks_added=n - first, added=added, stopped="running")
        store.manifest.setdefault("plan", {})["adaptive"] = record
        store.save()
        t0 = time.monotonic()
        observed.run(dataclasses.replace(run, points=points), measure, desc=f"{desc}, block {n} (open: "
                     f"{', '.join(sorted(needed))})", progress=progress, **observe)
        per_block = max(per_block, time.monotonic() - t0)  # the longer of the estimates: never past the budget
    record.update(blocks_added=n - first, last_block=n, added=added, stopped=stopped, why=STOPPED[stopped])
    if n > first:  # decided by the analysis (comparison.csv), at the last look's confidence, not here
        record["looks"].append({"blocks": n, "measured": sorted(needed), "verdicts": "comparison.csv"})
    store.manifest.setdefault("plan", {})["adaptive"] = record
    _recount(store)
    return record


def _recount(store: Any) -> None:
    """The manifest's point counts over every point, planned and added (each sweep.run counted its own)."""
    counts: dict[str, int] = {"total": 0, "ok": 0, "failed": 0}
    for status in finished(store).values():
        counts["total"] += 1
        counts[status] = counts.get(status, 0) + 1
    store.manifest["points"] = counts
    store.save()
