"""The per-transaction log's fast path: one compiled pass over a range of bytes (numba), its source.

Why: a paper-profile point writes about 1 GB of ``-l`` log, and pyarrow's general CSV reader (every
field converted, then reduced) ran at 25-45x ``wc -l`` on this 2-core machine. A loop compiled for
exactly this format reads each line once and keeps nothing but counters and the latencies, or only
counts of the latencies when percentiles are all that is wanted (``txlog_kernel.HIST_US``). A line is
read 8 bytes at a time (SWAR: where its separators are, then each field's digits, with a few
multiplications), not byte by byte: 1.6x faster than the byte loop, which remains for what that path
does not take (a word in the time field, a long line, the end of the buffer).

Strict by design: it accepts only lines exactly as pgbench writes them (6 to 8 fields, one space
between fields, ``\\n`` line ends, the last line included, ASCII digits of at most 18 (no overflow),
the time field digits or one of the four words, client ids below 65536, script numbers below 1024,
microseconds below 10**6). On anything else it returns "refused" and the caller reads the chunk with
the general readers (pyarrow, then the line-by-line rules that name the bad line), so what is
accepted, refused and computed is unchanged.
The arithmetic is the line-by-line parser's: ``epoch + us / 1e6`` in doubles, integer sums.
It raises nothing (no raise, no division by a variable, no bounds checks): ``txlog_native`` relies on it.
``txlog_kernel`` loads it, ``txlog_parts`` runs it over the parts of a chunk on every core and sums what
they read.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

# stats slots of one pass
(ROWS, NLAT, NHIST, HLO, HHI, FAILED, SERIALIZATION, DEADLOCK, SKIPPED, COLMASK, SUM7, SUM8, SUMLAT,
 REFUSED, NSTATS) = range(15)
# The word-wise path (8 bytes at a time, SWAR) of the loop: bytes looked at per line, and its constants.
_WINDOW = 48
_U0, _U1, _U2, _U4, _U8, _U16, _U24, _U32, _U40, _U56 = (np.uint64(k) for k in (0, 1, 2, 4, 8, 16, 24, 32, 40, 56))
_ZEROS = np.uint64(0x3030303030303030)  # "0" in every byte: digits become 0-9 by xor
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_TO_HIGH = np.uint64(0x7676767676767676)  # + on bytes below 128: the high bit is set from 10 up
_HIGH = np.uint64(0x8080808080808080)
_GATHER = np.uint64(0x0002040810204081)  # * then >> 56: the high bit of byte k to bit k
_BITS1, _BITS2, _BITS4 = np.uint64(0x5555555555555555), np.uint64(0x3333333333333333), np.uint64(0x0F0F0F0F0F0F0F0F)
_BYTES1 = np.uint64(0x0101010101010101)
_MUL1, _MUL2, _MUL3 = np.uint64(10 * 256 + 1), np.uint64(100 * 65536 + 1), np.uint64(10000 * 2**32 + 1)
_KEEP1, _KEEP2 = np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF)
_U10, _U100, _PAIRS, _LOW16 = np.uint64(10), np.uint64(100), np.uint64(0x00FF00FF), np.uint64(0xFFFF)
_POW10 = np.array([10**k for k in range(9)], dtype=np.int64)
_LOW_BYTES = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)  # the first k bytes of a word


@functools.cache
def numba_scan() -> Any:
    """The scanning loop as numba's dispatcher, compiled for its one signature (numba keeps the machine code
    in a cache beside this file): what ``txlog_kernel``'s C callback calls."""
    from numba import njit

    sig = ("void(uint8[::1], int64, int64, int64[::1], int64[::1], boolean[::1], boolean[::1], int64[::1], "
           "int64[::1])")

    @njit(sig, cache=True, nogil=True)
    def scan(buf, start, end, lat, hist, clients, scripts, stats, ends):  # noqa: ANN001, ANN202, C901, PLR0912, PLR0915
        # buf[end - 1] is a newline (the caller checks): every byte loop below stops at it without a bound
        # check. buf may go on after end (the rest of the read buffer): the word-wise path reads there.

        def load8(a):  # noqa: ANN001, ANN202  buf[a:a + 8] as a little-endian word (one load once compiled)
            u = np.uint64(a)
            x = np.uint64(0)
            for k in range(8):
                x |= np.uint64(buf[u + np.uint64(k)]) << np.uint64(8 * k)
            return x

        def at(a):  # noqa: ANN001, ANN202  buf[a], a >= 0: an unsigned index spares the check for negative ones
            return buf[np.uint64(a)]

        def nondigits(a):  # noqa: ANN001, ANN202  bit k set when buf[a + k] (k < 8) is not an ASCII digit
            t = load8(a) ^ _ZEROS
            return (((((t & _LOW7) + _TO_HIGH) | t) & _HIGH) * _GATHER) >> _U56

        def ctz(x):  # noqa: ANN001, ANN202  trailing zero bits (64 for 0): LLVM makes this one tzcnt
            x = ~x & (x - _U1)
            x = x - ((x >> _U1) & _BITS1)
            x = (x & _BITS2) + ((x >> _U2) & _BITS2)
            x = (x + (x >> _U4)) & _BITS4
            return np.int64((x * _BYTES1) >> _U56)

        def eight(t):  # noqa: ANN001, ANN202  8 digit values (the first in the low byte) -> their number
            t = (t * _MUL1) >> _U8
            t = ((t & _KEEP1) * _MUL2) >> _U16
            return ((t & _KEEP2) * _MUL3) >> _U32

        def four(a, n):  # noqa: ANN001, ANN202  digits(a, n) for 1 <= n <= 4: two multiplications, not three
            t = ((load8(a) ^ _ZEROS) << np.uint64(64 - 8 * n)) >> _U32
            t = (t * _U10 + (t >> _U8)) & _PAIRS
            return np.int64((t * _U100 + (t >> _U16)) & _LOW16)

        def digits(a, n):  # noqa: ANN001, ANN202  the number written in buf[a:a + n], all digits, 1 <= n <= 16
            if n <= 8:
                return np.int64(eight((load8(a) ^ _ZEROS) << np.uint64(64 - 8 * n)))
            return (np.int64(eight(load8(a) ^ _ZEROS)) * _POW10[n - 8]
                    + np.int64(eight((load8(a + 8) ^ _ZEROS) << np.uint64(128 - 8 * n))))

        nbuf = buf.shape[0]
        i = start
        top = lat.shape[0]  # counted latencies are written from the back, to be taken back on a refusal
        nbins = hist.shape[0]
        nclients = clients.shape[0]
        nscripts = scripts.shape[0]
        rows = nlat = nh = failed = ser = dead = skipped = colmask = sum7 = sum8 = sumlat = 0
        hlo = nbins
        hhi = -1
        lo = hi = -1  # the earliest and latest end time, as epoch * 10**6 + us (us < 10**6)
        refused = 0
        last_n4 = last_v4 = 0
        last_e0 = last_e1 = keep0 = keep1 = _U0
        while i < end:
            refused = 1  # until the line is read through
            word = -1
            v0 = v2 = v3 = v4 = v5 = v6 = v7 = 0
            nf = 0
            c = 0
            if i + _WINDOW + 32 <= nbuf:
                # Word-wise: where the first 48 bytes are not digits, at once; taken when they make a line of
                # 6 to 8 fields of 1 to 16 digits, one space apart. Else (a word, a long line) byte by byte.
                m = (nondigits(i) | (nondigits(i + 8) << _U8) | (nondigits(i + 16) << _U16)
                     | (nondigits(i + 24) << _U24) | (nondigits(i + 32) << _U32) | (nondigits(i + 40) << _U40))
                s0 = ctz(m)
                m &= m - _U1
                s1 = ctz(m)
                m &= m - _U1
                s2 = ctz(m)
                m &= m - _U1
                s3 = ctz(m)
                m &= m - _U1
                s4 = ctz(m)
                m &= m - _U1
                has6 = m != _U0  # (tested on the mask, not on s5 < 48: LLVM then keeps ctz one instruction)
                s5 = ctz(m)
                m &= m - _U1
                has7 = m != _U0
                s6 = ctz(m)
                m &= m - _U1
                has8 = m != _U0
                s7 = ctz(m)
                n1, n2, n3, n4, n5 = s1 - s0 - 1, s2 - s1 - 1, s3 - s2 - 1, s4 - s3 - 1, s5 - s4 - 1
                spaces = (at(i + s0) ^ 32) | (at(i + s1) ^ 32) | (at(i + s2) ^ 32) | (at(i + s3) ^ 32) \
                    | (at(i + s4) ^ 32)
                lengths = (s0 - 1) | (n1 - 1) | (n2 - 1) | (n3 - 1) | (n4 - 1) | (n5 - 1)
                if has6 and spaces == 0 and 0 <= lengths < 16:
                    last = s5
                    c = at(i + s5)
                    if c == 32 and has7 and 1 <= s6 - s5 - 1 <= 16:
                        last = s6
                        c = at(i + s6)
                        if c == 32 and has8 and 1 <= s7 - s6 - 1 <= 16:
                            last = s7
                            c = at(i + s7)
                    if c == 10:
                        nf = 6 + (last > s5) + (last > s6)
                        v0 = four(i, s0) if s0 <= 4 else digits(i, s0)  # (client ids and script numbers: short)
                        v2 = digits(i + s1 + 1, n2)
                        v3 = four(i + s2 + 1, n3) if n3 <= 4 else digits(i + s2 + 1, n3)
                        # the epoch changes once a second: the same bytes as the last line's, the same number
                        e0 = load8(i + s3 + 1)
                        e1 = load8(i + s3 + 9)
                        if n4 != last_n4 or ((e0 ^ last_e0) & keep0) | ((e1 ^ last_e1) & keep1) != _U0:
                            last_n4, last_e0, last_e1 = n4, e0, e1
                            keep0, keep1 = _LOW_BYTES[min(n4, 8)], _LOW_BYTES[max(n4 - 8, 0)]
                            last_v4 = digits(i + s3 + 1, n4)
                        v4 = last_v4
                        v5 = digits(i + s4 + 1, n5)
                        if nf > 6:
                            v6 = digits(i + s5 + 1, s6 - s5 - 1)
                        if nf > 7:
                            v7 = digits(i + s6 + 1, s7 - s6 - 1)
                        i += last + 1
            if nf == 0:
                # client_id
                j = i
                c = buf[j]
                while 48 <= c <= 57:
                    v0 = v0 * 10 + (c - 48)
                    j += 1
                    c = buf[j]
                if j == i or j - i > 18 or c != 32:
                    break
                i = j + 1
                # transaction_no: digits only checked
                j = i
                c = buf[j]
                while 48 <= c <= 57:
                    j += 1
                    c = buf[j]
                if j == i or j - i > 18 or c != 32:
                    break
                i = j + 1
                # time: microseconds or a word
                j = i
                c = buf[j]
                if 48 <= c <= 57:
                    while 48 <= c <= 57:
                        v2 = v2 * 10 + (c - 48)
                        j += 1
                        c = buf[j]
                    if j - i > 18 or c != 32:
                        break
                else:
                    while buf[j] != 32 and buf[j] != 10:
                        j += 1
                    n = j - i
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
                    if word < 0 or buf[j] != 32:
                        break
                i = j + 1
                # script_no
                j = i
                c = buf[j]
                while 48 <= c <= 57:
                    v3 = v3 * 10 + (c - 48)
                    j += 1
                    c = buf[j]
                if j == i or j - i > 18 or c != 32:
                    break
                i = j + 1
                # time_epoch
                j = i
                c = buf[j]
                while 48 <= c <= 57:
                    v4 = v4 * 10 + (c - 48)
                    j += 1
                    c = buf[j]
                if j == i or j - i > 18 or c != 32:
                    break
                i = j + 1
                # time_us, then up to two more columns
                j = i
                c = buf[j]
                while 48 <= c <= 57:
                    v5 = v5 * 10 + (c - 48)
                    j += 1
                    c = buf[j]
                if j == i or j - i > 18:
                    break
                i = j + 1
                nf = 6
                if c == 32:
                    j = i
                    c = buf[j]
                    while 48 <= c <= 57:
                        v6 = v6 * 10 + (c - 48)
                        j += 1
                        c = buf[j]
                    if j == i or j - i > 18:
                        break
                    i = j + 1
                    nf = 7
                    if c == 32:
                        j = i
                        c = buf[j]
                        while 48 <= c <= 57:
                            v7 = v7 * 10 + (c - 48)
                            j += 1
                            c = buf[j]
                        if j == i or j - i > 18:
                            break
                        i = j + 1
                        nf = 8
            if c != 10 or v0 >= nclients or v3 >= nscripts or v5 >= 1000000 or v4 >= 1 << 40:
                break
            refused = 0
            rows += 1
            colmask |= 1 << nf
            clients[v0] = True
            scripts[v3] = True
            key = v4 * 1000000 + v5
            if lo < 0 or key < lo:
                lo = key
            if key > hi:
                hi = key
            sum7 += v6
            sum8 += v7
            if word < 0:
                sumlat += v2
                if v2 < nbins:
                    hist[v2] += 1
                    nh += 1
                    lat[top - nh] = v2
                    hlo = min(hlo, v2)
                    hhi = max(hhi, v2)
                else:
                    lat[nlat] = v2
                    nlat += 1
            elif word == 3:
                skipped += 1
            else:
                failed += 1
                if word == 1:
                    ser += 1
                elif word == 2:
                    dead += 1
        stats[REFUSED] = refused
        stats[ROWS] = rows
        stats[NLAT] = nlat
        stats[NHIST] = nh
        stats[HLO] = hlo
        stats[HHI] = hhi
        stats[FAILED] = failed
        stats[SERIALIZATION] = ser
        stats[DEADLOCK] = dead
        stats[SKIPPED] = skipped
        stats[COLMASK] = colmask
        stats[SUM7] = sum7
        stats[SUM8] = sum8
        stats[SUMLAT] = sumlat
        ends[0] = max(lo, 0) // 1000000
        ends[1] = max(lo, 0) % 1000000
        ends[2] = max(hi, 0) // 1000000
        ends[3] = max(hi, 0) % 1000000

    return scan
