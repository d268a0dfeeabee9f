"""pgbench's per-transaction logs thinned at collect time: a latency histogram and a 1-in-100 sample.

Why: the raw files of every shipped run live in git (the DVC remote is committed), and the ``-l`` logs
were nine tenths of a run's bytes, read by one thing only: latency percentiles merged over clients and
blocks. A histogram of every transaction's latency answers that within a stated error in a few KB,
whatever the number of transactions; a systematic sample keeps lines a person can still look at.

The histogram is log-linear, as HdrHistogram's with 3 significant digits: bucket ``i`` < 2048 holds
exactly ``i`` microseconds; above, with ``m = i // 1024 - 1``, it holds ``[(i - 1024 m) << m,
(i - 1024 m + 1) << m)``, a width at most 1/1024 of its lower bound. A value is read back as its
bucket's midpoint, within 1/2048 (0.049%) of every value the bucket holds; count, min, max and sum are
exact. Histograms merge by adding counts, so merging points gives what one histogram of all their
transactions would.

This module is in the workloads layer, below the parsers, because collect writes the histogram; its
reader takes lines only exactly as pgbench writes them (one space between fields, digits, a word in
the time column), and anything else is kept as the full log, gzipped, as before (the parsers read it).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

HISTOGRAM = "latency_histogram.json"
SAMPLE_EVERY = 100
#: the sample's name starts with neither ``pgbench_log`` nor ``latency``: no reader of logs globs it by mistake
SAMPLE = f"sample_1in{SAMPLE_EVERY}.pgbench_log.gz"
FORMAT = "pglab.latency_histogram/1"
EXACT = 2048  # buckets below this hold one microsecond each
HALF = 1024  # sub-buckets per power of two above it: 3 significant digits
RELATIVE_ERROR = 1 / (2 * HALF)  # a value read back as its bucket's midpoint
MAX_DIGITS = 15  # a time field longer than this (31 years in us) is not pgbench's
WORDS = ("failed", "serialization", "deadlock", "skipped")  # the time column of a transaction that did not succeed
_WORD_BYTES = {w.encode(): w for w in WORDS}
_CHUNK = 8 << 20


class NotALog(ValueError):
    """A file that is not a per-transaction log exactly as pgbench writes it: kept whole."""


def bucket_of(us: np.ndarray) -> np.ndarray:
    """The bucket of each latency (whole microseconds, >= 0)."""
    us = np.asarray(us, dtype=np.int64)
    _, bits = np.frexp(us.astype(np.float64))  # the bit length, exact below 2**53
    m = np.maximum(bits.astype(np.int64) - 11, 0)
    return np.where(us < EXACT, us, HALF * m + (us >> m))


def bucket_bounds(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lowest value and the width (us) of each bucket."""
    index = np.asarray(index, dtype=np.int64)
    m = np.maximum(index // HALF - 1, 0)
    return np.where(index < EXACT, index, (index - HALF * m) << m), np.int64(1) << m


@dataclass
class Histogram:
    """Successful transactions' latencies in log-linear buckets, with exact count, min, max and sum."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    min_us: int | None = None
    max_us: int | None = None
    sum_us: int = 0
    words: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WORDS, 0))

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def _grow(self, n: int) -> None:
        if n > len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(n - len(self.counts), dtype=np.int64)])

    def add_us(self, us: np.ndarray) -> None:
        """Count latencies given in whole microseconds."""
        us = np.asarray(us, dtype=np.int64)
        if not len(us):
            return
        lo, hi = int(us.min()), int(us.max())
        if lo < 0:
            raise ValueError(f"a latency of {lo} us")
        c = np.bincount(bucket_of(us))
        self._grow(len(c))
        self.counts[: len(c)] += c
        self.min_us = lo if self.min_us is None else min(self.min_us, lo)
        self.max_us = hi if self.max_us is None else max(self.max_us, hi)
        self.sum_us += int(us.sum())

    def merge(self, other: Histogram) -> Histogram:
        """Adds ``other``'s transactions to this one (itself returned)."""
        self._grow(len(other.counts))
        self.counts[: len(other.counts)] += other.counts
        for lim, pick in (("min_us", min), ("max_us", max)):
            a, b = getattr(self, lim), getattr(other, lim)
            setattr(self, lim, b if a is None else a if b is None else pick(a, b))
        self.sum_us += other.sum_us
        for w, n in other.words.items():
            self.words[w] = self.words.get(w, 0) + n
        return self

    def values_at(self, ranks: Iterable[int]) -> dict[int, float]:
        """The latency (us) of each 0-based rank in sorted order: the smallest and largest exact, the others
        their bucket's midpoint (exact below 2048 us), never outside min .. max."""
        n, out = self.count, {}
        cum = np.cumsum(self.counts)
        for k in ranks:
            if not 0 <= k < n:
                raise IndexError(f"rank {k} of {n} latencies")
            if k in (0, n - 1):
                out[k] = float(self.min_us if k == 0 else self.max_us)  # type: ignore[arg-type]
                continue
            lo, width = bucket_bounds(np.int64(np.searchsorted(cum, k, side="right")))
            mid = int(lo) + (int(width) - 1) / 2
            out[k] = float(min(max(mid, self.min_us), self.max_us))  # type: ignore[type-var]
        return out

    def to_json(self, logs: dict[str, Any] | None = None) -> str:
        """A few KB: zero runs of the counts as negative numbers, one key a line (``logs``: what it was made of)."""
        nz = np.flatnonzero(self.counts)
        first = int(nz[0]) if len(nz) else 0
        dense = self.counts[first: int(nz[-1]) + 1] if len(nz) else self.counts[:0]
        head = {"format": FORMAT, "what": "latency (pgbench -l time column, us) of every successful transaction",
                "buckets": "i < 2048: i us; above, m = i // 1024 - 1: [(i - 1024 m) << m, (i - 1024 m + 1) << m)",
                "relative_error": RELATIVE_ERROR, "count": self.count, "min_us": self.min_us,
                "max_us": self.max_us, "sum_us": self.sum_us, "time_words": self.words, "logs": logs or {},
                "first_bucket": first}
        rows = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
        rows.append(f' "counts": {json.dumps(_runs(dense), separators=(",", ":"))}')
        return "{\n" + ",\n".join(rows) + "\n}\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Histogram:
        """What :meth:`to_json` wrote, checked (ValueError otherwise)."""
        try:
            d = json.loads(text)
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                raise ValueError(f"not a latency histogram: its format is not {FORMAT!r}")
            runs = np.asarray(d["counts"], dtype=np.int64)
            dense = np.repeat(np.where(runs < 0, 0, runs), np.where(runs < 0, -runs, 1))
            counts = np.concatenate([np.zeros(int(d["first_bucket"]), dtype=np.int64), dense])
            words = {w: int(n) for w, n in d["time_words"].items()}
            h = cls(counts, d["min_us"], d["max_us"], int(d["sum_us"]), words)
        except (KeyError, TypeError, AttributeError, OverflowError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a latency histogram: {type(exc).__name__}: {exc}") from None
        if h.count != d["count"] or (h.count > 0) != (h.min_us is not None and h.max_us is not None):
            raise ValueError(f"not a latency histogram: its counts add up to {h.count}, not {d['count']}")
        return h

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Histogram:
        return cls.from_json(Path(path).read_bytes())


def _runs(dense: np.ndarray) -> list[int]:
    """Counts with each run of empty buckets written as minus its length."""
    if not len(dense):
        return []
    cuts = np.flatnonzero(np.diff((dense == 0).astype(np.int8))) + 1
    out: list[int] = []
    for seg in np.split(dense, cuts):
        out += [-len(seg)] if seg[0] == 0 else seg.tolist()
    return out


# -- reading a log: the time column, and every n-th line ----------------------------------------------
@dataclass
class _Pass:
    """What one pass over a folder's logs keeps besides the histogram."""

    hist: Histogram = field(default_factory=Histogram)
    sample: BinaryIO | None = None
    every: int = SAMPLE_EVERY
    bytes: int = 0  # of the logs as pgbench wrote them
    sampled: int = 0
    fields: set[int] = field(default_factory=set)


def _chunk(data: bytes, line0: int, acc: _Pass, where: str) -> int:
    """Whole lines (each ending in a newline) of one log: latencies counted, every n-th line sampled."""
    a = np.frombuffer(data, dtype=np.uint8)
    sep = (a == 32) | (a == 10)
    digit = (a >= 48) & (a <= 57)
    nl = np.flatnonzero(a == 10)
    starts = np.concatenate([[0], nl[:-1] + 1])
    if sep[0] or (sep[1:] & sep[:-1]).any():
        raise NotALog(f"{where}: an empty field or line near line {line0 + 1}")
    sp = np.flatnonzero(a == 32)
    k = np.searchsorted(sp, starts)
    nfields = np.searchsorted(sp, nl) - k + 1
    if nfields.min() < 6 or nfields.max() > 8:
        bad = int(np.flatnonzero((nfields < 6) | (nfields > 8))[0])
        raise NotALog(f"{where}: line {line0 + bad + 1} has {nfields[bad]} fields, not 6 to 8")
    acc.fields.update(np.unique(nfields).tolist())
    t0 = sp[k + 1] + 1
    length = sp[k + 2] - t0
    if length.max() > MAX_DIGITS:
        raise NotALog(f"{where}: a time field of {length.max()} characters near line {line0 + 1}")
    us = np.zeros(len(nl), dtype=np.int64)
    numeric = np.ones(len(nl), dtype=bool)
    for j in range(int(length.max())):
        inside = j < length
        d = a[np.minimum(t0 + j, len(a) - 1)].astype(np.int64) - 48
        numeric &= ~inside | ((d >= 0) & (d <= 9))
        us = np.where(inside, us * 10 + d, us)
    for i in np.flatnonzero(~numeric):
        word = _WORD_BYTES.get(data[t0[i]: t0[i] + length[i]])
        if word is None:
            raise NotALog(f"{where}: line {line0 + i + 1}'s time field is {data[t0[i]: t0[i] + length[i]]!r}")
        acc.hist.words[word] += 1
    # letters anywhere but in those words (or a sign, a tab, a carriage return): not pgbench's
    if int((~(sep | digit)).sum()) != int(length[~numeric].sum()):
        raise NotALog(f"{where}: a field that is not a whole number between lines {line0 + 1} and {line0 + len(nl)}")
    acc.hist.add_us(us[numeric])
    if acc.sample is not None:
        picked = np.flatnonzero((np.arange(line0, line0 + len(nl)) % acc.every) == 0)
        acc.sample.write(b"".join(data[starts[i]: nl[i] + 1] for i in picked))
        acc.sampled += len(picked)
    return len(nl)


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # type: ignore[return-value]


def _scan_file(path: Path, acc: _Pass) -> int:
    """One log (plain, or gzipped as pglab stored them), chunk by chunk; its line count."""
    line0, rest = 0, b""
    with _open(path) as f:
        while True:
            block = f.read(_CHUNK)
            acc.bytes += len(block)
            data = rest + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if not block and data and not data.endswith(b"\n"):
                data, cut = data + b"\n", len(data) + 1  # a last line without its newline
            if cut:
                line0 += _chunk(data[:cut], line0, acc, path.name)
            rest = data[cut:]
            if not block:
                break
    if len(acc.fields) > 1:
        raise NotALog(f"{path.name}: lines of {sorted(acc.fields)} fields; one log always has the same number")
    acc.fields.clear()
    return line0


def histogram_of(paths: Sequence[str | os.PathLike[str]]) -> Histogram:
    """The histogram of logs (plain or ``.gz``), without writing anything; NotALog if one is not a log."""
    acc = _Pass()
    for p in paths:
        _scan_file(Path(p), acc)
    return acc.hist


def kept_words(every: int = SAMPLE_EVERY) -> str:
    """What a thinned folder keeps, as its point's meta says it: "histogram+1% sample"."""
    return f"histogram+{100 / every:g}% sample"


def thin(folder: Path, logs: Sequence[Path], every: int = SAMPLE_EVERY) -> tuple[list[str], dict[str, Any]]:
    """Replace ``logs`` (in ``folder``) by their histogram and a sample of every ``every``-th line of each.

    Returns the files the folder keeps and what the point's meta records: what was kept, and the full
    logs' names, line count and bytes. The histogram and the sample are written (under a temporary name,
    then renamed) before any log is removed. A file that is not a log exactly as pgbench writes it
    leaves every log of the folder whole, gzipped (``kept: "full logs"`` and why).
    """
    t = time.monotonic()
    logs = sorted(logs, key=lambda p: p.name)
    if not logs:
        return [], {"kept": "no logs"}
    record: dict[str, Any] = {"log_files": [_plain(p.name) for p in logs]}
    tmp = folder / f".{SAMPLE}.tmp"
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6,
                                                  mtime=0) as gz:
            acc = _Pass(sample=gz, every=every)  # type: ignore[arg-type]
            record["log_lines"] = sum(_scan_file(p, acc) for p in logs)
    except NotALog as exc:
        tmp.unlink(missing_ok=True)
        kept = [_gzipped(p) for p in logs]
        return kept, {"kept": "full logs", "why": str(exc), **record, "thin_s": round(time.monotonic() - t, 3)}
    record.update(log_bytes=acc.bytes, sample_lines=acc.sampled, transactions=acc.hist.count)
    hist_tmp = folder / f".{HISTOGRAM}.tmp"
    hist_tmp.write_text(acc.hist.to_json({k: record[k] for k in ("log_files", "log_lines", "log_bytes")}))
    os.replace(hist_tmp, folder / HISTOGRAM)
    os.replace(tmp, folder / SAMPLE)
    for p in logs:
        p.unlink()
    return [HISTOGRAM, SAMPLE], {"kept": kept_words(every), **record, "thin_s": round(time.monotonic() - t, 3)}


def _plain(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def _gzipped(path: Path) -> str:
    """``path`` gzipped beside itself (level 1: 4x cheaper than 6), the plain file removed; the new name."""
    if path.suffix == ".gz":
        return path.name
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb", compresslevel=1) as gz:
        shutil.copyfileobj(src, gz)
    path.unlink()
    return f"{path.name}.gz"
