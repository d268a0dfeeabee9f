"""TSBS cpu-only rows, generated vectorised and encoded as PostgreSQL binary COPY buffers.

Why this and not TSBS's own generator: the loader must run on any client host the study uses (no Go
toolchain), be seeded like everything else in pglab, and be far faster than the server's insert rate so
that the rate measured is the server's. Numpy makes a whole chunk of time steps at once and one
``tobytes`` of a big-endian structured array is a ready COPY buffer (no per-row Python, no text parsing on
the server).

The data (as TSBS's cpu-only use case, ``pkg/data/usecases/devops/cpu.go``): every device reports the ten
``usage_*`` metrics every ``interval_s`` seconds from ``start``; rows are ordered by time, then device
(every device at t, then every device at t + interval). Each metric of each device is a random walk
starting at a uniform value in [0, 100) with N(0, 1) steps, kept in [0, 100], and written as an integer
(TSBS emits ``int64(value)``). Two deliberate differences, both for vectorisation:

- TSBS clamps after each step (a sequential recursion); here the walk is *reflected* at 0 and 100 (a
  triangle fold of the cumulative sum), which is the same walk away from the bounds.
- values are floored, not truncated (the same for values >= 0).

Integer values also make every sum exact in float8, so aggregates (``avg``, ``sum``) give the same result
whatever order a plan (parallel or not) adds them in: the study compares results across nodes.

Determinism: ``PCG64(seed)`` draws the initial values, then the steps in chunks of ``chunk_steps(devices)``
time steps (a function of the device count only): the rows are the same whatever ``batch`` or the number
of clients (batches are byte slices of one row stream).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np

METRICS: tuple[str, ...] = ("usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
                            "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice")
COLUMNS: tuple[str, ...] = ("time", "tags_id", *METRICS)
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # timestamptz in binary COPY: int64 microseconds since this
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)  # signature, flags, header extension length
TRAILER = struct.pack(">h", -1)
# One row of binary COPY: field count, then (length, value) per field, all big-endian.
ROW_DTYPE = np.dtype([("nfields", ">i2"), ("time_len", ">i4"), ("time", ">i8"), ("tags_len", ">i4"),
                      ("tags_id", ">i4"), *[f for m in METRICS for f in ((f"{m}_len", ">i4"), (m, ">f8"))]])
ROW_BYTES = ROW_DTYPE.itemsize  # 142
_CONSTANTS = {"nfields": len(COLUMNS), "time_len": 8, "tags_len": 4, **{f"{m}_len": 8 for m in METRICS}}
CHUNK_ROWS = 1 << 16  # rows generated at once (about 9 MB encoded)


def steps(duration_s: int, interval_s: int) -> int:
    """Time steps of a load: one row per device every ``interval_s`` in [start, start + duration_s)."""
    return duration_s // interval_s


def total_rows(devices: int, duration_s: int, interval_s: int) -> int:
    """Rows of a whole load (devices x time steps)."""
    check(devices, duration_s, interval_s)
    return devices * steps(duration_s, interval_s)


def check(devices: int, duration_s: int, interval_s: int, batch: int | None = None) -> None:
    """ValueError naming the first parameter that makes no load."""
    for name, value in (("devices", devices), ("duration_s", duration_s), ("interval_s", interval_s),
                        *((("batch", batch),) if batch is not None else ())):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, not {value!r}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if duration_s < interval_s:
        raise ValueError(f"duration_s={duration_s} is shorter than one interval_s={interval_s}: no rows")


def microseconds(t: datetime) -> int:
    """``t`` as binary COPY's timestamptz: microseconds since 2000-01-01 UTC. Naive times are refused."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"start {t.isoformat()} has no time zone (give e.g. +00:00)")
    return (t - PG_EPOCH) // timedelta(microseconds=1)


def chunk_steps(devices: int) -> int:
    """Time steps drawn at once: a function of the device count only, so the rows never depend on batch."""
    return max(1, CHUNK_ROWS // devices)


def generate(devices: int, start: datetime, duration_s: int, interval_s: int,
             seed: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The rows in order, a chunk of whole time steps at a time: (time in microseconds since 2000-01-01
    UTC as int64[n], tags_id as int32[n], the ten metrics as float64[n, 10]); fresh arrays every chunk."""
    for times, tags, values in _chunks(devices, start, duration_s, interval_s, seed):
        yield times.copy(), tags.copy(), values.copy()


def _chunks(devices: int, start: datetime, duration_s: int, interval_s: int,
            seed: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """As ``generate``, in buffers reused by the next chunk (fresh memory costs page faults: a third of the
    time): use each chunk before asking for the next."""
    check(devices, duration_s, interval_s)
    base, step_us = microseconds(start), interval_s * 1_000_000
    total, per = steps(duration_s, interval_s), chunk_steps(devices)
    rng = np.random.Generator(np.random.PCG64(seed))
    walk = rng.random((devices, len(METRICS))) * 100.0  # initial values, then the unfolded walk's position
    # tags.id of device i is i + 1 (hostname host_i)
    tags = np.tile(np.arange(1, devices + 1, dtype=np.int32), min(per, total))
    buf = np.empty((min(per, total), devices, len(METRICS)))
    scratch = np.empty_like(buf)
    offsets = np.repeat(np.arange(min(per, total), dtype=np.int64) * step_us, devices)
    times = np.empty_like(offsets)
    for t0 in range(0, total, per):
        k = min(per, total - t0)
        cum, tmp = buf[:k], scratch[:k]
        rng.standard_normal(out=cum)
        cum[0] += walk
        _cumsum0(cum)
        walk = _mod200(cum[-1].copy(), np.empty_like(walk))  # the fold has period 200: keeps the position small
        vals = _mod200(cum, tmp)
        vals -= 100.0
        np.abs(vals, out=vals)
        np.subtract(100.0, vals, out=vals)  # reflected into [0, 100]
        np.floor(vals, out=vals)
        n = k * devices
        np.add(offsets[:n], base + step_us * t0, out=times[:n])
        yield times[:n], tags[:n], vals.reshape(n, len(METRICS))


def _cumsum0(x: np.ndarray) -> None:
    """In place x[i] += x[i - 1] along the first axis (what np.cumsum does, with the same additions in the
    same order), one vectorised add per time step when a step has many values (np.cumsum along axis 0 is
    ten times slower there)."""
    if x[0].size >= 256:
        for i in range(1, len(x)):
            np.add(x[i - 1], x[i], out=x[i])
    else:
        np.cumsum(x, axis=0, out=x)


def _mod200(x: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """x mod 200 in place, in [0, 200] (np.mod is 20x slower: it fixes up signs element by element)."""
    np.multiply(x, 1 / 200.0, out=tmp)
    np.floor(tmp, out=tmp)
    tmp *= 200.0
    x -= tmp
    return x


def encode(times: np.ndarray, tags: np.ndarray, values: np.ndarray, into: np.ndarray | None = None) -> np.ndarray:
    """Rows as binary COPY row records (``ROW_DTYPE``); ``.tobytes()`` is the body of a COPY buffer.

    ``into``: records whose constant fields are set (``records``), written over instead of new ones.
    """
    n = len(times)
    rows = records(n) if into is None else into[:n]
    rows["time"] = times
    rows["tags_id"] = tags
    # the ten metrics at once: a float8 view striding over the records (one conversion loop, not ten)
    first, second = (ROW_DTYPE.fields[m][1] for m in METRICS[:2])
    metrics = np.ndarray((n, len(METRICS)), ">f8", rows, first, (ROW_BYTES, second - first))
    metrics[...] = values
    return rows


def records(n: int) -> np.ndarray:
    """``n`` row records with the fields every row shares set (field count, lengths)."""
    rows = np.zeros(n, ROW_DTYPE)
    for name, value in _CONSTANTS.items():
        rows[name] = value
    return rows


def copy_buffer(rows: np.ndarray) -> bytes:
    """A whole binary COPY stream (header, rows, trailer) for ``ROW_DTYPE`` records."""
    return b"".join((HEADER, rows.view(np.uint8), TRAILER))


def batches(devices: int, start: datetime, duration_s: int, interval_s: int, batch: int,
            seed: int) -> Iterator[tuple[int, int, bytes]]:
    """(index, rows, binary COPY buffer) per batch of ``batch`` consecutive rows (the last may be shorter).

    A batch is a byte slice of the encoded row stream, so it may span generated chunks: the rows of a
    chunk that do not fill a batch are copied out before the next chunk is encoded in the same records.
    """
    check(devices, duration_s, interval_s, batch)
    want = batch * ROW_BYTES
    carry: list[bytes] = []  # encoded rows of earlier chunks not yet handed out
    have = index = 0
    rows: np.ndarray | None = None
    for times, tags, values in _chunks(devices, start, duration_s, interval_s, seed):
        if rows is None or len(rows) < len(times):
            rows = records(len(times))
        body = encode(times, tags, values, into=rows).view(np.uint8)
        pos = 0
        while have + len(body) - pos >= want:
            take = want - have
            yield index, batch, b"".join((HEADER, *carry, body[pos:pos + take], TRAILER))
            carry, have, pos, index = [], 0, pos + take, index + 1
        if pos < len(body):
            carry.append(body[pos:].tobytes())
            have += len(body) - pos
    if have:
        yield index, have // ROW_BYTES, b"".join((HEADER, *carry, TRAILER))


def decode(buffer: bytes) -> np.ndarray:
    """The row records of a buffer made by ``batches`` / ``copy_buffer`` (header and trailer checked)."""
    if not buffer.startswith(HEADER) or not buffer.endswith(TRAILER):
        raise ValueError("not a binary COPY buffer of this module (header or trailer missing)")
    return np.frombuffer(buffer[len(HEADER):-len(TRAILER)], ROW_DTYPE)
