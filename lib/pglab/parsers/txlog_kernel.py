"""The per-transaction log's fast path: one compiled pass over a chunk of bytes (numba), on every core.

Why: a paper-profile point writes about 1 GB of ``-l`` log, and pyarrow's general CSV reader (every
field converted, then reduced) ran at 25-45x ``wc -l`` on this 2-core machine. A loop compiled for
exactly this format reads each byte once and keeps nothing but counters and the latencies.

Strict by design: it accepts only lines exactly as pgbench writes them (6 to 8 fields, one space
between fields, ``\\n`` line ends, the last line included, ASCII digits of at most 18 (no overflow),
the time field digits or one of the four words, client ids below 65536, script numbers below 1024,
microseconds below 10**6). On anything else it returns "refused" and the caller reads the chunk with
the general readers (pyarrow, then the line-by-line rules that name the bad line), so what is
accepted, refused and computed is unchanged.
The arithmetic is the line-by-line parser's: ``epoch + us / 1e6`` in doubles, integer sums.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

MAX_CLIENTS = 1 << 16
MAX_SCRIPTS = 1 << 10
# stats slots of one pass
ROWS, NLAT, FAILED, SERIALIZATION, DEADLOCK, SKIPPED, COLMASK, SUM7, SUM8, SUMLAT, REFUSED = range(11)
_WORDS = (b"failed", b"serialization", b"deadlock", b"skipped")
# A chunk is cut at line ends into this many parts scanned at once (the kernel releases the GIL).
_MIN_PART_BYTES = 1 << 20


@functools.cache
def _kernel() -> Any:
    """The scanning loop, compiled for its one signature when first needed (numba keeps the machine
    code in a cache beside this file, so later processes only load it)."""
    from numba import njit

    sig = "void(uint8[::1], int64, int64, int64[::1], boolean[::1], boolean[::1], int64[::1], int64[::1])"

    @njit(sig, cache=True, nogil=True)
    def scan(buf, start, end, lat, clients, scripts, stats, ends):  # noqa: ANN001, ANN202
        # buf[end - 1] is a newline (the caller checks): every loop below stops at it without a bound check
        i = start
        rows = nlat = failed = ser = dead = skipped = colmask = sum7 = sum8 = sumlat = 0
        lo = hi = -1  # the earliest and latest end time, as epoch * 10**6 + us (us < 10**6)
        lo4 = lo5 = hi4 = hi5 = 0
        while i < end:
            nf = 0
            word = -1
            v0 = v2 = v3 = v4 = v5 = v6 = v7 = 0
            while True:  # one field
                if nf == 8:
                    stats[REFUSED] = 1
                    return
                c = buf[i]
                if nf == 2 and (c < 48 or c > 57):  # a word in the time field
                    k = i
                    while buf[k] != 32 and buf[k] != 10:
                        k += 1
                    n = k - i
                    word = -1
                    if n == 6 and buf[i] == 102 and buf[i + 1] == 97 and buf[i + 2] == 105 \
                            and buf[i + 3] == 108 and buf[i + 4] == 101 and buf[i + 5] == 100:
                        word = 0  # failed
                    elif n == 13 and buf[i] == 115 and buf[i + 1] == 101 and buf[i + 2] == 114 \
                            and buf[i + 3] == 105 and buf[i + 4] == 97 and buf[i + 5] == 108 \
                            and buf[i + 6] == 105 and buf[i + 7] == 122 and buf[i + 8] == 97 \
                            and buf[i + 9] == 116 and buf[i + 10] == 105 and buf[i + 11] == 111 \
                            and buf[i + 12] == 110:
                        word = 1  # serialization
                    elif n == 8 and buf[i] == 100 and buf[i + 1] == 101 and buf[i + 2] == 97 \
                            and buf[i + 3] == 100 and buf[i + 4] == 108 and buf[i + 5] == 111 \
                            and buf[i + 6] == 99 and buf[i + 7] == 107:
                        word = 2  # deadlock
                    elif n == 7 and buf[i] == 115 and buf[i + 1] == 107 and buf[i + 2] == 105 \
                            and buf[i + 3] == 112 and buf[i + 4] == 112 and buf[i + 5] == 101 \
                            and buf[i + 6] == 100:
                        word = 3  # skipped
                    if word < 0:
                        stats[REFUSED] = 1
                        return
                    i = k
                else:
                    v = 0
                    first = i
                    c = buf[i]
                    while 48 <= c <= 57:
                        v = v * 10 + (c - 48)
                        i += 1
                        c = buf[i]
                    digits = i - first
                    if digits == 0 or digits > 18:
                        stats[REFUSED] = 1
                        return
                    if nf == 0:
                        v0 = v
                    elif nf == 2:
                        v2 = v
                    elif nf == 3:
                        v3 = v
                    elif nf == 4:
                        v4 = v
                    elif nf == 5:
                        v5 = v
                    elif nf == 6:
                        v6 = v
                    elif nf == 7:
                        v7 = v
                nf += 1
                c = buf[i]
                i += 1
                if c == 10:
                    break
                if c != 32:
                    stats[REFUSED] = 1
                    return
            if nf < 6 or v0 >= clients.shape[0] or v3 >= scripts.shape[0] or v5 >= 1000000 or v4 >= 1 << 40:
                stats[REFUSED] = 1
                return
            rows += 1
            colmask |= 1 << nf
            clients[v0] = True
            scripts[v3] = True
            key = v4 * 1000000 + v5
            if lo < 0 or key < lo:
                lo, lo4, lo5 = key, v4, v5
            if key > hi:
                hi, hi4, hi5 = key, v4, v5
            sum7 += v6
            sum8 += v7
            if word < 0:
                lat[nlat] = v2
                nlat += 1
                sumlat += v2
            elif word == 3:
                skipped += 1
            else:
                failed += 1
                if word == 1:
                    ser += 1
                elif word == 2:
                    dead += 1
        stats[ROWS] = rows
        stats[NLAT] = nlat
        stats[FAILED] = failed
        stats[SERIALIZATION] = ser
        stats[DEADLOCK] = dead
        stats[SKIPPED] = skipped
        stats[COLMASK] = colmask
        stats[SUM7] = sum7
        stats[SUM8] = sum8
        stats[SUMLAT] = sumlat
        ends[0] = lo4
        ends[1] = lo5
        ends[2] = hi4
        ends[3] = hi5

    return scan


def available() -> bool:
    """Whether numba imports here (without it every chunk takes the general readers)."""
    try:
        _kernel()
    except ImportError:
        return False
    return True


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix="pglab-txlog")


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


def scan_chunk(buf: bytearray, end: int, cores: int) -> dict[str, Any] | None:
    """Counters of ``buf[:end]`` (whole lines) and its successful latencies (us, in file order, one
    array per part); None if the chunk is not exactly as pgbench writes it."""
    scan = _kernel()
    if end == 0 or buf[end - 1] != 10:  # the last line of a file without a final newline
        return None
    data = np.frombuffer(buf, dtype=np.uint8, count=end)
    n = max(1, min(cores, end // _MIN_PART_BYTES))
    parts = _parts(data, end, n)
    outs = []
    for a, b in parts:
        outs.append({"range": (a, b), "lat": np.empty((b - a) // 12 + 1, dtype=np.int64),
                     "clients": np.zeros(MAX_CLIENTS, dtype=np.bool_), "scripts": np.zeros(MAX_SCRIPTS, dtype=np.bool_),
                     "stats": np.zeros(11, dtype=np.int64), "ends": np.zeros(4, dtype=np.int64)})

    def one(o: dict[str, Any]) -> None:
        a, b = o["range"]
        scan(data, a, b, o["lat"], o["clients"], o["scripts"], o["stats"], o["ends"])

    if len(outs) == 1:
        one(outs[0])
    else:
        list(_pool(len(outs)).map(one, outs))
    if any(o["stats"][REFUSED] for o in outs):
        return None
    total = {k: sum(int(o["stats"][i]) for o in outs) for k, i in
             (("rows", ROWS), ("failed", FAILED), ("serialization", SERIALIZATION), ("deadlock", DEADLOCK),
              ("skipped", SKIPPED), ("sum7", SUM7), ("sum8", SUM8), ("sumlat", SUMLAT))}
    mask = 0
    for o in outs:
        mask |= int(o["stats"][COLMASK])
    total["columns"] = {k for k in range(6, 9) if mask >> k & 1}
    clients = np.logical_or.reduce([o["clients"] for o in outs])
    scripts = np.logical_or.reduce([o["scripts"] for o in outs])
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
