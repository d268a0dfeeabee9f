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

What was done is recorded in the manifest (``plan.adaptive``), and that record is the truth at every stop: the
looks (what was open at the first, what the added blocks measured), the blocks planned, added and finished (a
block cut short by Ctrl-C or a failure is ``cut_short``, never counted as added), and why the adding stopped
(``STOPPED``): written while a block runs (``running``) and again however ``extend`` ends. ``--resume`` keeps
the record (``pglab.runs.resume.open_run``): the first look is not taken again (the folder then holds added
blocks it must not see), finished blocks are skipped, the block cut short is finished and the adding goes on.
The analysis reads the record through ``pglab.analysis.claims.first_look``, which also reads older records.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from pglab.runs.opening import Opened
from pglab.runs.record import under_way
from pglab.runs.sweep import Planned
from pglab.workloads import observed

#: why the adding stopped, as the manifest and the report say it (``running``: a block is under way)
STOPPED = {"decided": "every claim was decided or needs nothing more at the first look",
           "max_blocks": "max_blocks reached", "budget": "the next block would have ended past budget_s",
           "interrupted": "the run was interrupted (Ctrl-C, SIGTERM) while adding blocks",
           "failed": "the run failed while adding blocks"}
FINAL = ("decided", "max_blocks", "budget")  # the adding ended by itself: a resumed run adds nothing more


def extend(run: Opened[Any], measure: observed.Measure, *, first: int, max_blocks: int, budget_s: float | None,
           still_open: Callable[[], set[str]], block: Callable[[int, set[str]], Sequence[Planned]], desc: str,
           progress: bool = True, **observe: Any) -> dict[str, Any]:
    """After ``first`` planned blocks: the first look (``still_open()``: the configurations an open claim
    needs), then blocks ``block(n, open)`` up to ``max_blocks`` or the budget. Returns what the manifest's
    ``plan.adaptive`` records (saved before each block and however this ends, an exception included)."""
    store = run.store
    earlier = store.manifest.get("plan", {}).get("adaptive") or {}
    if earlier.get("looks") and earlier.get("stopped") in FINAL:  # a run resumed after its adding ended
        return earlier
    record = _start(earlier, first, max_blocks, budget_s, still_open, store)
    needed = set(record["looks"][0]["open"])
    done_before = int(record["blocks_added"])  # finished by an earlier attempt of this run: not timed again
    resume_cut = record.get("cut_short")  # started under the budget by an earlier attempt: finished first
    swept = float(sum(store.manifest.get("sweep_s", [])))
    per_block = float(record.get("block_s") or (swept / first if first else 0.0))
    n, started, stopped = first, time.monotonic(), "decided" if not needed else "max_blocks"
    record["added"] = []  # planned again block by block (the same seed: the same ids)
    try:
        while needed and n < max_blocks:
            again = n + 1 == resume_cut  # the budget was checked when it began
            if n + 1 <= first + done_before:  # finished by an earlier attempt: its ids only
                n += 1
                record["added"] += [p.id for p in block(n, needed)]
                continue
            if not again and budget_s is not None and swept + (time.monotonic() - started) + per_block > budget_s:
                stopped = "budget"
                break
            n += 1
            points = list(block(n, needed))
            record["added"] += [p.id for p in points]
            record.update(stopped="running", why="a block is under way", cut_short=n)
            _save(store, record)
            t0 = time.monotonic()
            observed.run(dataclasses.replace(run, points=points), measure, desc=f"{desc}, block {n} (open: "
                         f"{', '.join(sorted(needed))})", progress=progress, **observe)
            if not again:
                per_block = max(per_block, time.monotonic() - t0)  # the longer of the estimates: never past it
            record.update(blocks_added=n - first, blocks_finished=n, last_block=n, cut_short=None,
                          block_s=round(per_block, 1))
    except KeyboardInterrupt:
        stopped = "interrupted"
        raise
    except BaseException:
        stopped = "failed"
        raise
    finally:
        _close(record, stopped, needed, store)
    return record


def _start(earlier: dict[str, Any], first: int, max_blocks: int, budget_s: float | None,
           still_open: Callable[[], set[str]], store: Any) -> dict[str, Any]:
    """The record to go on with: a resumed run's (its first look kept, the attempt noted), or a new first look."""
    if earlier.get("looks"):
        record = dict(earlier)
        added = int(record.get("blocks_added", 0))
        if record.get("stopped") == "running":  # the block under way when the earlier attempt ended: cut short
            added, record["cut_short"] = under_way(record, first, added)
        record.update(blocks_added=added, blocks_finished=first + added, last_block=first + added,
                      looks=record["looks"][:1])
        record.setdefault("resumes", []).append({"previous": record.get("stopped"),
                                                 "blocks_finished": first + added,
                                                 "cut_short": record.get("cut_short")})
        return record
    needed = still_open()
    return {"first_look": first, "blocks_planned": first, "max_blocks": max_blocks, "budget_s": budget_s,
            "looks": [{"blocks": first, "open": sorted(needed)}], "blocks_added": 0, "blocks_finished": first,
            "last_block": first, "cut_short": None, "added": []}


def _close(record: dict[str, Any], stopped: str, needed: set[str], store: Any) -> None:
    """The record as the adding ended: why, and the second look when a block was added and finished."""
    first, last = int(record["first_look"]), int(record["blocks_finished"])
    record.update(stopped=stopped, why=STOPPED[stopped], blocks_planned=first)
    if stopped not in ("interrupted", "failed"):
        record["cut_short"] = None
    record["looks"] = record["looks"][:1]
    if last > first:  # decided by the analysis (comparison.csv), at the last look's confidence, not here
        record["looks"].append({"blocks": last, "measured": sorted(needed), "verdicts": "comparison.csv"})
    _save(store, record)


def _save(store: Any, record: dict[str, Any]) -> None:
    store.manifest.setdefault("plan", {})["adaptive"] = record
    store.save()
