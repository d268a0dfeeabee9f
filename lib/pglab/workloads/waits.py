"""Where the server's time went: ``pg_stat_activity`` wait events sampled during every point.

Why: a ratio says how much one configuration costs, not why. Sampling each node's busy backends about
every 100 ms (from one extra connection per node, outside the workload) shows what they were waiting
for: ``IPC:SyncRep`` for a commit waiting on a synchronous standby, ``LWLock:WALWrite`` or
``IO:WALSync`` for local WAL flushes, ``Lock:*`` for row locks, ``CPU`` for a backend running with no
wait. The raw samples go to the point's ``waits.csv`` first; shares are computed in analysis
(``pglab.analysis.waits``), which collecting never imports.

``pg_wait_sampling`` would sample inside the server at a finer grain, but it is not installed by
default; ``pg_stat_activity`` needs nothing and costs one small query per node per period (measured
by ``bench/wait_sampler_cost.py``).
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg

from pglab.runs.writing import write_json

CSV = "waits.csv"
SUMMARY = "waits.json"
# One row per sample, node and distinct (backend type, state, wait): ``backends`` of them were so. Counted
# in the server, so that a sample costs the client one small result, not a row per backend.
COLUMNS = ["t_s", "node", "backend_type", "state", "wait_event_type", "wait_event", "backends"]
APPLICATION = "pglab-waits"
# Busy sessions only: an idle client backend waits for its client (ClientRead), and a background process
# in its main loop (wait type Activity) waits for work; neither says where the server's time went.
QUERY = """select backend_type, coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''), count(*)
  from pg_stat_activity
 where pid <> pg_backend_pid() and coalesce(application_name, '') <> 'pglab-waits'
   and not (backend_type = 'client backend' and coalesce(state, '') in ('idle', ''))
   and not (backend_type <> 'client backend' and wait_event_type is not distinct from 'Activity')
 group by 1, 2, 3, 4"""


class WaitSampler:
    """A daemon thread that samples the nodes of the point being recorded into its ``waits.csv``.

    One sampler serves a whole sweep: its connections (one per node, ``application_name``
    pglab-waits, excluded from the samples) stay open across points, so a point pays no connection
    set-up, and between points it does nothing. It never hangs or fails the benchmark: each query has
    a 1 s server-side statement_timeout, an error is counted and that node skipped for the round (a
    node that went away just stops producing rows), and ``close`` waits at most about 2 s.
    """

    def __init__(self, interval_s: float = 0.1, dbname: str = "postgres"):
        self.interval_s, self.dbname = interval_s, dbname
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._current: _Recording | None = None
        self._conns: dict[tuple[str, str, int], psycopg.Connection] = {}
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WaitSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def recording(self, point: Any, nodes: Mapping[str, Any], delay_s: float = 0.0) -> Iterator[None]:
        """Sample ``nodes`` into ``point``'s folder for the ``with`` body, from ``delay_s`` after it
        starts (the workload's warm-up, which the measured window leaves out too); the summary goes to
        meta.json. ``t_s`` in the CSV counts from the start of the body."""
        rec = _Recording(dict(nodes), point.dir / CSV, delay_s)
        with self._lock:
            self._current = rec
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pglab-waits", daemon=True)
            self._thread.start()
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._current = None
            self._wake.set()  # a round still in its warm-up wait stops at once
            rec.done.wait(2 * self.interval_s + 2.0)  # the round under way finishes and closes the file
            summary = rec.summary(self.interval_s)
            point.meta["waits"] = {k: summary[k] for k in ("samples", "rows", "errors", "sampler_cpu_s")}
            write_json(point.dir / SUMMARY, summary)

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(2 * self.interval_s + 2.0)
        for c in list(self._conns.values()):
            with contextlib.suppress(Exception):
                c.close()
        self._conns.clear()

    def _conn(self, node: Any) -> psycopg.Connection:
        key = (node.host.name, node.name, int(node.port))
        conn = self._conns.get(key)
        if conn is None or conn.closed:
            info = node.conninfo(self.dbname, statement_timeout_s=1.0, connect_timeout=5)
            conn = psycopg.connect(autocommit=True, application_name=APPLICATION, **info)
            self._conns[key] = conn
        return conn

    def _drop(self, node: Any) -> None:
        conn = self._conns.pop((node.host.name, node.name, int(node.port)), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                rec = self._current
            if rec is not None:
                self._record(rec)

    def _record(self, rec: _Recording) -> None:
        cpu0 = time.thread_time()
        try:
            with open(rec.path, "w", newline="") as f:
                out = csv.writer(f)
                out.writerow(COLUMNS)
                next_at = rec.started + rec.delay_s
                while not self._closed.is_set() and time.monotonic() < next_at:  # the warm-up, unsampled
                    with self._lock:
                        if self._current is not rec:
                            break
                    self._wake.wait(next_at - time.monotonic())  # set when the recording ends
                while not self._closed.is_set():
                    with self._lock:
                        if self._current is not rec:
                            break
                    t = round(time.monotonic() - rec.started, 3)
                    for name, node in rec.nodes.items():
                        try:
                            rows = _query(self._conn(node))
                        except Exception:  # noqa: BLE001  (a sampler never breaks the point it observes)
                            rec.errors[name] = rec.errors.get(name, 0) + 1
                            self._drop(node)
                            continue
                        for r in rows:
                            out.writerow([t, name, *r])
                        rec.rows += len(rows)
                    rec.samples += 1
                    next_at += self.interval_s
                    self._closed.wait(max(0.0, next_at - time.monotonic()))
        finally:
            rec.cpu_s = time.thread_time() - cpu0
            rec.wall_s = time.monotonic() - rec.started
            rec.done.set()


_QUERY = QUERY.encode()


def _query(conn: psycopg.Connection) -> list[list[str]]:
    """The sample through libpq directly: half the client CPU of a cursor (measured: 0.06 vs 0.12 ms),
    and the sampler runs ten times a second for every node of every point."""
    from psycopg import pq

    res = conn.pgconn.exec_(_QUERY)
    if res.status != pq.ExecStatus.TUPLES_OK:
        raise psycopg.OperationalError((res.error_message or b"sample failed").decode(errors="replace"))
    rows = [[(res.get_value(i, j) or b"").decode() for j in range(res.nfields)] for i in range(res.ntuples)]
    res.clear()
    return rows


class _Recording:
    """One point's samples: where they go and what the sampler spent on them."""

    def __init__(self, nodes: dict[str, Any], path: Path, delay_s: float = 0.0):
        self.nodes, self.path, self.delay_s = nodes, path, delay_s
        self.started = time.monotonic()
        self.samples = self.rows = 0
        self.errors: dict[str, int] = {}
        self.cpu_s = self.wall_s = 0.0
        self.done = threading.Event()

    def summary(self, interval_s: float) -> dict[str, Any]:
        return {"samples": self.samples, "rows": self.rows, "interval_s": interval_s, "errors": dict(self.errors),
                "sampler_cpu_s": round(self.cpu_s, 4), "wall_s": round(self.wall_s, 3), "delay_s": self.delay_s,
                "source": "pg_stat_activity", "nodes": sorted(self.nodes)}


@contextlib.contextmanager
def sampler(interval_ms: int) -> Iterator[WaitSampler | None]:
    """The sweep's sampler (None when ``interval_ms`` is 0: nothing is sampled)."""
    if not interval_ms:
        yield None
        return
    s = WaitSampler(interval_ms / 1000.0)
    try:
        yield s
    finally:
        s.close()


def recording(s: WaitSampler | None, point: Any, nodes: Mapping[str, Any],
              delay_s: float = 0.0) -> contextlib.AbstractContextManager:
    """``s.recording(point, nodes, delay_s)``, or nothing when sampling is off."""
    return s.recording(point, nodes, delay_s) if s is not None else contextlib.nullcontext()

