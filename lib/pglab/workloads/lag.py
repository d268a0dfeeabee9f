"""Replication lag sampled during a point, into the point's CSV, as ``waits`` samples wait events.

Why one sampler: a lag figure is only comparable between studies if it is taken the same way (the
schedule, the CSV written as it goes, a sampler that never fails the point it observes). What differs
is what one sample is: the caller's ``sample(t_s, *args)`` returns the CSV rows of one sample, its own
columns and formats (the analysis reads them as they are), ``t_s`` counting from ``t0``.

Two ways to drive it: ``tick`` from the caller's own polling loop (``pglab.workloads.catchup``: no
thread, so a system's lag query never runs beside its catch-up queries), or ``with`` the sampler,
which samples from a thread of its own every ``interval_s`` (a load the caller only waits for); a
``sample`` with a ``close`` (a connection of its own, opened on its first call) is closed by that
thread. A sample that raises stops the sampling (``error`` says why); the workload goes on.
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

Sample = Callable[..., Iterable[Sequence[Any]]]  # (t_s, *args) -> the rows of one sample


class LagSampler:
    """Rows of ``sample`` into ``path`` (header ``columns``) at most every ``interval_s``; a no-op without a path."""

    def __init__(self, path: Path | None, columns: Sequence[str], sample: Sample, interval_s: float,
                 t0: float | None = None):
        self.sample, self.interval_s = sample, interval_s
        self.t0 = time.monotonic() if t0 is None else t0
        self.samples = 0
        self.error: str | None = None
        self._next = self.t0
        self._file: IO[str] | None = path.open("w", newline="") if path else None
        self._writer = csv.writer(self._file) if self._file else None
        if self._writer:
            self._writer.writerow(columns)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, *args: Any, force: bool = False) -> None:
        """One sample if the interval has passed (or ``force``); ``args`` go to ``sample``."""
        now = time.monotonic()
        if self._writer is None or self.error is not None or (now < self._next and not force):
            return
        self._next = now + self.interval_s
        try:
            rows = list(self.sample(now - self.t0, *args))
        except Exception as exc:  # noqa: BLE001  (the load goes on; the point records that sampling broke)
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self._writer.writerows(rows)
        self.samples += 1

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None
            self._writer = None

    def __enter__(self) -> LagSampler:
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)  # a sample stuck in a query is left to finish on its own

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self.error is None:
                self.tick(force=True)  # the thread keeps the schedule
                self._stop.wait(self.interval_s)
        finally:
            close = getattr(self.sample, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
            self.close()
