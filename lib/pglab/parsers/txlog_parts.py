"""The compiled loop over a whole chunk: cut at line ends into parts, one per core, their counts summed.

Why: the kernel (``txlog_kernel``) releases the GIL, so the parts of a chunk are scanned at once in
threads; what they read is summed here, and a chunk any part refuses is handed back untouched (the
histogram counts a part already made are taken back) for the general readers to read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pglab.parsers.txlog_kernel import MAX_CLIENTS, MAX_SCRIPTS, kernel
from pglab.parsers.txlog_loop import (
    COLMASK,
    DEADLOCK,
    FAILED,
    HHI,
    HLO,
    NHIST,
    NLAT,
    NSTATS,
    REFUSED,
    ROWS,
    SERIALIZATION,
    SKIPPED,
    SUM7,
    SUM8,
    SUMLAT,
)

#: Parts (threads) a chunk is cut into at most, and histogram rows of counted latencies.
CORES = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
# A chunk is cut at line ends into this many parts scanned at once (the kernel releases the GIL).
_MIN_PART_BYTES = 1 << 20


def _run_all(fn: Callable[[Any], None], items: list[Any]) -> None:
    """``fn`` on every item at once: the first in this thread, each other in a thread of its own. Threads, not
    a pool: concurrent.futures and the logging it loads cost 6 ms of a 0.5 s ``pglab parse``."""
    errors: list[BaseException] = []

    def guarded(item: Any) -> None:
        try:
            fn(item)
        except BaseException as exc:  # raised again in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(x,), name="pglab-txlog") for x in items[1:]]
    for th in threads:
        th.start()
    guarded(items[0])
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def _parts(buf: np.ndarray, end: int, n: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of whole lines, about ``end / n`` bytes each."""
    cuts = [0]
    for k in range(1, n):
        at = max(cuts[-1], end * k // n)
        nl = _find_newline(buf, at, end)
        if nl < 0:
            break
        cuts.append(nl + 1)
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _find_newline(buf: np.ndarray, at: int, end: int) -> int:
    """The first ``\n`` at or after ``at`` (within 64 KiB: a longer line is refused by the kernel anyway)."""
    hits = np.flatnonzero(buf[at:min(end, at + (1 << 16))] == 10)
    return at + int(hits[0]) if len(hits) else -1


class Scratch:
    """The latency buffers of a chunk's parts, reused from chunk to chunk of one pass: a fresh one per
    chunk cost a page fault per 4 KiB written."""

    def __init__(self) -> None:
        self.lat: list[np.ndarray] = []

    def latencies(self, part: int, size: int) -> np.ndarray:
        while len(self.lat) <= part:
            self.lat.append(np.empty(0, dtype=np.int64))
        if len(self.lat[part]) < size:
            self.lat[part] = np.empty(size, dtype=np.int64)
        return self.lat[part]


def scan_chunk(buf: bytearray | memoryview, end: int, cores: int, hists: np.ndarray | None = None,
               scratch: Scratch | None = None) -> dict[str, Any] | None:
    """Counters of ``buf[:end]`` (whole lines) and its successful latencies (us); None, with ``hists``
    as it was, if the chunk is not exactly as pgbench writes it. ``buf`` may go on after ``end``.

    Without ``hists`` every latency is returned, in file order (one array per part). With ``hists``
    (``cores`` rows of ``HIST_US`` counts), part ``k`` counts its latencies below ``HIST_US`` in
    ``hists[k]`` (``"counted"``, between ``"counted_lo"`` and ``"counted_hi"``, summed in ``"sumlat"``
    with the others) and returns only the others. Returned arrays are views of ``scratch``'s buffers:
    valid until its next chunk.
    """
    scan = kernel()
    if end == 0 or buf[end - 1] != 10:  # the last line of a file without a final newline
        return None
    scratch = scratch or Scratch()
    data = np.frombuffer(buf, dtype=np.uint8, count=end)
    whole = np.frombuffer(buf, dtype=np.uint8)  # the word-wise path may read past end
    n = max(1, min(cores, end // _MIN_PART_BYTES))
    if hists is not None and len(hists) < n:
        raise ValueError(f"{len(hists)} histogram rows for {n} parts")
    no_hist = np.zeros(0, dtype=np.int64)
    outs = []
    for k, (a, b) in enumerate(_parts(data, end, n)):
        outs.append({"range": (a, b), "lat": scratch.latencies(k, (b - a) // 12 + 1),
                     "hist": hists[k] if hists is not None else no_hist,
                     "clients": np.zeros(MAX_CLIENTS, dtype=np.bool_), "scripts": np.zeros(MAX_SCRIPTS, dtype=np.bool_),
                     "stats": np.zeros(NSTATS, dtype=np.int64), "ends": np.zeros(4, dtype=np.int64)})

    def one(o: dict[str, Any]) -> None:
        a, b = o["range"]
        scan(whole, a, b, o["lat"], o["hist"], o["clients"], o["scripts"], o["stats"], o["ends"])

    _run_all(one, outs)
    if any(o["stats"][REFUSED] for o in outs):
        for o in outs:  # take back what every part counted (the refused one up to its bad line)
            counted = o["lat"][len(o["lat"]) - int(o["stats"][NHIST]):]
            np.subtract.at(o["hist"], counted, 1)
        return None
    total = {k: sum(int(o["stats"][i]) for o in outs) for k, i in
             (("rows", ROWS), ("failed", FAILED), ("serialization", SERIALIZATION), ("deadlock", DEADLOCK),
              ("skipped", SKIPPED), ("sum7", SUM7), ("sum8", SUM8), ("sumlat", SUMLAT), ("counted", NHIST))}
    total["counted_lo"] = min(int(o["stats"][HLO]) for o in outs)
    total["counted_hi"] = max(int(o["stats"][HHI]) for o in outs)
    mask = 0
    for o in outs:
        mask |= int(o["stats"][COLMASK])
    total["columns"] = {k for k in range(6, 9) if mask >> k & 1}
    clients, scripts = (np.logical_or.reduce([o[k] for o in outs]) if len(outs) > 1 else outs[0][k]
                        for k in ("clients", "scripts"))
    total["clients"] = set(np.flatnonzero(clients).tolist())
    total["scripts"] = set(np.flatnonzero(scripts).tolist())
    # epoch + us / 1e6 in doubles, as the line-by-line rules compute it, for the earliest and latest
    # line only: with us below 10**6 that order is the order of epoch * 10**6 + us (rounding is monotone)
    scanned = [o for o in outs if o["stats"][ROWS]]
    lo = min(((int(o["ends"][0]), int(o["ends"][1])) for o in scanned), default=None)
    hi = max(((int(o["ends"][2]), int(o["ends"][3])) for o in scanned), default=None)
    total["first_end"] = lo[0] + lo[1] / 1e6 if lo else float("inf")
    total["last_end"] = hi[0] + hi[1] / 1e6 if hi else float("-inf")
    total["latencies_us"] = [o["lat"][:int(o["stats"][NLAT])] for o in outs]
    return total
