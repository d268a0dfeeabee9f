"""The compiled loop over per-transaction log (``txlog_loop``), loaded without importing numba.

Why: ``pglab parse`` on a 256 MB ``-l`` log is a whole process: numba's import and the loading of its
cached loop took about 1.5 s of it, six times the parse. numba compiles the loop once per machine as a
C callback, whose machine code ``txlog_native`` keeps on disk and loads with llvmlite in 0.04-0.08 s;
the loop is then called through ctypes with the arrays' addresses. The same machine code as numba's, so
the same numbers; where that cannot be made, numba's own dispatcher runs the loop.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pglab.parsers import txlog_loop, txlog_native
from pglab.parsers.txlog_loop import HHI, HLO, NHIST, NLAT, NSTATS, ROWS, SUMLAT

MAX_CLIENTS = 1 << 16
MAX_SCRIPTS = 1 << 10
#: Latencies below this many microseconds (4.2 s) may be counted in a histogram (one row per part)
#: instead of kept: exact percentiles then need no partition of millions of values.
HIST_US = 1 << 22
#: Input below this many bytes (one call's logs together) takes the general readers: the loop compiles in
#: about 20 s in a new copy of the code (numba's cache and the kept machine code are beside the source),
#: and loading it costs 0.04-0.08 s after that, while pyarrow reads 64 MB of log in about 0.3 s. Studies
#: at the smoke and quick profiles write far less; paper-profile points write about 1 GB.
MIN_BYTES = 64 << 20

_P, _N = ctypes.c_void_p, ctypes.c_int64
# the C callback's arguments: buf, its length, start, end, then each array's address (and its length)
_ARGTYPES = (_P, _N, _N, _N, _P, _N, _P, _N, _P, _N, _P, _N, _P, _P)
# buf, lat, hist, clients, scripts, stats, ends
_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int64, np.int64, np.bool_, np.bool_, np.int64, np.int64))


def _c_callback() -> Any:
    """numba's C callback around the loop: pointers and lengths in, the loop's arrays made from them."""
    from numba import carray, cfunc, types

    scan = txlog_loop.numba_scan()
    p8, p64, pb, n = (types.CPointer(types.uint8), types.CPointer(types.int64), types.CPointer(types.boolean),
                      types.int64)

    @cfunc(types.void(p8, n, n, n, p64, n, p64, n, pb, n, pb, n, p64, p64), nogil=True)
    def c_scan(buf, nbuf, start, end, lat, nlat, hist, nhist, clients, nclients, scripts, nscripts,  # noqa: ANN001, ANN202
               stats, ends):
        scan(carray(buf, nbuf), start, end, carray(lat, nlat), carray(hist, nhist), carray(clients, nclients),
             carray(scripts, nscripts), carray(stats, NSTATS), carray(ends, 4))

    return c_scan


def _with_arrays(fn: Callable[..., None]) -> Callable[..., None]:
    """The C function called as numba's dispatcher is: on arrays, their types checked as its signature did
    (a wrong one would be memory written out of place, not an error)."""

    def scan(buf: np.ndarray, start: int, end: int, lat: np.ndarray, hist: np.ndarray, clients: np.ndarray,
             scripts: np.ndarray, stats: np.ndarray, ends: np.ndarray) -> None:
        arrays = (buf, lat, hist, clients, scripts, stats, ends)
        for a, dtype in zip(arrays, _DTYPES, strict=True):
            if a.dtype != dtype or a.ndim != 1 or not a.flags.c_contiguous or not a.flags.writeable:
                raise TypeError(f"the loop takes writable contiguous 1-d {dtype} arrays, not {a.dtype} {a.shape}")
        if len(stats) < NSTATS or len(ends) < 4 or not 0 <= start <= end <= len(buf):
            raise ValueError("stats or ends too short, or start:end outside buf")
        fn(buf.ctypes.data, len(buf), start, end, lat.ctypes.data, len(lat), hist.ctypes.data, len(hist),
           clients.ctypes.data, len(clients), scripts.ctypes.data, len(scripts), stats.ctypes.data, ends.ctypes.data)

    return scan


def _works(scan: Callable[..., None]) -> bool:
    """Whether ``scan`` reads a known line as the loop does (a kept file gone wrong is not trusted)."""
    line = b"3 1 250 0 1795266855 5\n"
    buf = np.frombuffer(bytearray(line + b"0" * 96), dtype=np.uint8)  # (the word-wise path reads past end)
    lat, hist, stats, ends = (np.zeros(k, dtype=np.int64) for k in (8, 512, NSTATS, 4))
    clients, scripts = np.zeros(MAX_CLIENTS, dtype=np.bool_), np.zeros(MAX_SCRIPTS, dtype=np.bool_)
    scan(buf, 0, len(line), lat, hist, clients, scripts, stats, ends)
    return (stats[[ROWS, NLAT, NHIST, HLO, HHI, SUMLAT]].tolist() == [1, 0, 1, 250, 250, 250] and hist[250] == 1
            and lat[-1] == 250 and ends.tolist() == [1795266855, 5, 1795266855, 5]
            and np.flatnonzero(clients).tolist() == [3] and np.flatnonzero(scripts).tolist() == [0])


@functools.cache
def kernel() -> Callable[..., None]:
    """The loop, ``scan(buf, start, end, lat, hist, clients, scripts, stats, ends)`` on numpy arrays (see
    ``txlog_loop``): numba's machine code loaded without numba, compiled (seconds) when not kept yet."""
    here = Path(__file__)
    try:
        fn = txlog_native.load("txlog_kernel.scan", _c_callback, [here.with_name("txlog_loop.py"), here], _ARGTYPES)
    except RuntimeError:  # the object file could not be made from what this numba compiled
        return txlog_loop.numba_scan()
    scan = _with_arrays(fn)
    return scan if _works(scan) else txlog_loop.numba_scan()


def worth_it(nbytes: int) -> bool:
    """Whether ``nbytes`` of log are read through the compiled loop (where it loads)."""
    return nbytes >= MIN_BYTES and available()


def available() -> bool:
    """Whether the compiled loop loads here (without llvmlite and numba every chunk takes the general readers)."""
    try:
        kernel()
    except ImportError:
        return False
    return True
