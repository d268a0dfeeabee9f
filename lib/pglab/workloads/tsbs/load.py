"""The TSBS loader: ``clients`` connections, one binary COPY per batch, one transaction per batch.

One thread generates the batches in order (``tsbs_data.batches``) and hands batch k to client k % C
through a short queue; each client runs ``BEGIN`` (plus ``SET LOCAL`` for every ``set_local``, in the same
round trip), ``COPY ... FROM STDIN (FORMAT binary)``, ``COMMIT``, and records when the transaction
started, how long BEGIN + COPY took and how long COMMIT took (where synchronous replication waits).

Connections are made from libpq's environment only (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSFILE,
PGSSLMODE...), the process's or the ``env`` given: never a password. TCP connections get keepalives
and ``tcp_user_timeout`` (a vanished host is noticed within ~30 s); a round trip longer than
``timeout_s`` (a commit waiting for a standby that never answers) is cancelled. The first failure stops
every client: in-flight statements are cancelled, then their sockets shut down, and what was committed so
far is still written (``batches.csv``, ``summary.json`` with ``complete: false`` and the errors).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import queue
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from pglab.workloads.tsbs import data as tsbs_data

# libpq environment variables and the connection parameters they stand for (libpq's "Environment Variables")
ENV_PARAMS: dict[str, str] = {
    "PGHOST": "host", "PGHOSTADDR": "hostaddr", "PGPORT": "port", "PGDATABASE": "dbname", "PGUSER": "user",
    "PGPASSFILE": "passfile", "PGSERVICE": "service", "PGOPTIONS": "options", "PGAPPNAME": "application_name",
    "PGSSLMODE": "sslmode", "PGSSLROOTCERT": "sslrootcert", "PGSSLCERT": "sslcert", "PGSSLKEY": "sslkey",
    "PGSSLCRL": "sslcrl", "PGSSLSNI": "sslsni", "PGREQUIRESSL": "requiressl", "PGGSSENCMODE": "gssencmode",
    "PGCHANNELBINDING": "channel_binding", "PGCONNECT_TIMEOUT": "connect_timeout",
    "PGTARGETSESSIONATTRS": "target_session_attrs", "PGKRBSRVNAME": "krbsrvname", "PGSSLMINPROTOCOLVERSION":
    "ssl_min_protocol_version", "PGSSLMAXPROTOCOLVERSION": "ssl_max_protocol_version",
}
# What every loader connection adds (ignored by libpq on Unix sockets): as pglab.nodes.connection.TCP_KEEPALIVE.
TCP_KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                                 "keepalives_count": 3, "tcp_user_timeout": 30000}
TIMEOUT_S = 300.0  # default limit of one round trip (BEGIN, COPY or COMMIT)
CANCEL_GRACE_S = 2.0  # after a cancel, how long before the socket is shut down
QUEUE_DEPTH = 2  # batches generated ahead per client
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")  # a setting, or a table without the dot
BATCH_COLUMNS = ["client", "batch", "rows", "start_s", "copy_ms", "commit_ms"]


class LoadError(RuntimeError):
    """The load failed; ``summary`` is what was written (committed rows, errors)."""

    def __init__(self, message: str, summary: dict[str, Any]):
        super().__init__(message)
        self.summary = summary


def connect_kwargs(env: dict[str, str] | None) -> dict[str, Any]:
    """psycopg keyword arguments from libpq environment variables (None: libpq reads the process's own).

    A password is refused: use a passfile (PGPASSFILE), so that none is ever in an argv, an environment
    dump or an output file.
    """
    kw: dict[str, Any] = {"connect_timeout": 10, "fallback_application_name": "pglab-tsbs", **TCP_KEEPALIVE}
    source = os.environ if env is None else env
    if "PGPASSWORD" in source:
        raise ValueError("PGPASSWORD is set: the loader takes no password; give a passfile (PGPASSFILE)")
    if env is None:
        if "PGCONNECT_TIMEOUT" in os.environ:
            del kw["connect_timeout"]  # libpq's own setting wins
        return kw
    unknown = sorted(k for k in env if k not in ENV_PARAMS)
    if unknown:
        raise ValueError(f"unknown libpq environment variables {unknown}; known: {sorted(ENV_PARAMS)}")
    kw.update({ENV_PARAMS[k]: v for k, v in env.items()})
    return kw


def parse_set_local(items: Sequence[str]) -> list[tuple[str, str]]:
    """``name=value`` pairs (``synchronous_commit=local``); ValueError for anything else."""
    out = []
    for item in items:
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not _NAME.match(name) or not value:
            raise ValueError(f"--set-local wants NAME=VALUE (e.g. synchronous_commit=local), not {item!r}")
        out.append((name, value))
    return out


def check_table(table: str) -> str:
    if not _NAME.match(table) or "." in table:
        raise ValueError(f"table must be a plain name (letters, digits, _), not {table!r}")
    return table


@dataclass
class _Run:
    """What the clients share: the stop flag, the first errors, the committed batches, who waits on what."""

    t0: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)
    done: list[tuple[int, int, int, float, float, float]] = field(default_factory=list)
    busy: dict[int, tuple[str, int, float]] = field(default_factory=dict)  # client: (what, batch, since)
    generate_s: float = 0.0
    generated_rows: int = 0

    def fail(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)
        self.stop.set()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def _produce(run: _Run, queues: list[queue.Queue], gen: Iterator[tuple[int, int, bytes]]) -> None:
    """Batch k to client k % C, in order; a None to every client at the end (or at a stop)."""
    try:
        while not run.stop.is_set():
            t = time.perf_counter()
            item = next(gen, None)
            run.generate_s += time.perf_counter() - t
            if item is None:
                break
            run.generated_rows += item[1]
            q = queues[item[0] % len(queues)]
            while not run.stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
    except Exception as exc:  # noqa: BLE001  (reported as the load's failure)
        run.fail(f"generator: {_first_line(exc)}")
    finally:
        for q in queues:
            _put_end(run, q)


def _put_end(run: _Run, q: queue.Queue) -> None:
    """The end mark after the client's last batch; after a stop, batches still queued are dropped."""
    while True:
        try:
            q.put(None, timeout=0.1)
            return
        except queue.Full:
            if run.stop.is_set():  # a stopped client may no longer read: make room
                try:
                    q.get_nowait()
                except queue.Empty:
                    pass


def _client(run: _Run, c: int, conn: psycopg.Connection, q: queue.Queue, begin: str, copy_sql: str) -> None:
    what, k = "waiting for a batch", -1
    try:
        cur = conn.cursor()
        while not run.stop.is_set():
            item = q.get()
            if item is None:
                return
            k, n, buf = item
            started = time.perf_counter()
            what = "BEGIN"
            run.busy[c] = (what, k, started)
            conn.execute(begin)
            what = "COPY"
            run.busy[c] = (what, k, time.perf_counter())
            with cur.copy(copy_sql) as cp:
                cp.write(buf)
            copied = time.perf_counter()
            what = "COMMIT"
            run.busy[c] = (what, k, copied)
            cur.execute("COMMIT")
            ended = time.perf_counter()
            del run.busy[c]
            if cur.statusmessage != "COMMIT":
                raise RuntimeError(f"COMMIT answered {cur.statusmessage!r}: the transaction was not committed")
            with run.lock:
                run.done.append((c, k, n, started - run.t0, (copied - started) * 1000, (ended - copied) * 1000))
    except Exception as exc:  # noqa: BLE001  (the first error is the load's; later ones follow from the stop)
        run.busy.pop(c, None)
        if not run.stop.is_set():
            run.fail(f"client {c}, batch {k} ({what}): {_first_line(exc)}")
        else:
            with run.lock:
                run.errors.append(f"client {c}, batch {k} ({what}) after the stop: {_first_line(exc)}")


def _cancel(conns: list[psycopg.Connection], clients: list[int]) -> None:
    """Cancel what ``clients`` are waiting for; shut their sockets if the cancel did not end it."""
    helpers = [threading.Thread(target=_cancel_one, args=(conns[c],), daemon=True) for c in clients]
    for h in helpers:
        h.start()
    for h in helpers:
        h.join(CANCEL_GRACE_S)


def _cancel_one(conn: psycopg.Connection) -> None:
    try:
        conn.cancel_safe(timeout=CANCEL_GRACE_S)
    except Exception:  # noqa: BLE001, S110  (the server may be gone: the socket is shut below anyway)
        pass


def _shut(conn: psycopg.Connection) -> None:
    """Shut a connection's socket down: a read blocked on it (in any thread) returns at once with an error."""
    try:
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001, S110  (already closed)
        pass


def _percentiles(values: list[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_p{p}_ms": None for p in (50, 95, 99)}
    got = np.percentile(np.asarray(values), [50, 95, 99])
    return {f"{prefix}_p{p}_ms": round(float(v), 3) for p, v in zip((50, 95, 99), got, strict=True)}


def load(conninfo_env: dict[str, str] | None, *, devices: int, start: datetime, duration_s: int, interval_s: int = 10,
         batch: int, clients: int, seed: int, out: Path, table: str = "cpu", set_local: Sequence[str] = (),
         timeout_s: float = TIMEOUT_S, stop: threading.Event | None = None) -> dict[str, Any]:
    """Load the seeded rows into ``table``; write ``out``/batches.csv and summary.json; return the summary.

    ``conninfo_env``: libpq environment variables (None: this process's environment). ``set_local``: ``name=value``
    run as ``SET LOCAL`` in every transaction. ``stop``: set it (from a signal handler) to end the load as a
    failure. Raises ValueError for bad arguments (before connecting) and LoadError when the load failed
    (after writing what was done).
    """
    tsbs_data.check(devices, duration_s, interval_s, batch)
    if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
        raise ValueError(f"clients must be at least 1, not {clients!r}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, not {timeout_s}")
    tsbs_data.microseconds(start)
    settings = parse_set_local(set_local)
    check_table(table)
    kw = connect_kwargs(conninfo_env)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    expected = tsbs_data.total_rows(devices, duration_s, interval_s)
    summary: dict[str, Any] = {
        "loader": "pglab.workloads.tsbs", "complete": False, "devices": devices, "start": start.isoformat(),
        "duration_s": duration_s, "interval_s": interval_s, "batch": batch, "clients": clients, "seed": seed,
        "table": table, "set_local": [f"{n}={v}" for n, v in settings], "rows_expected": expected,
        "batches_expected": -(-expected // batch), "timeout_s": timeout_s, "versions": _versions()}
    run = _Run()
    conns: list[psycopg.Connection] = []
    t_connect = time.perf_counter()
    try:
        for _ in range(clients):
            conns.append(psycopg.connect(autocommit=True, **kw))
    except Exception as exc:  # noqa: BLE001
        run.fail(f"connect (client {len(conns)}): {_first_line(exc)}")
    summary["connect_s"] = round(time.perf_counter() - t_connect, 3)
    if conns:
        info = conns[0].info
        summary["target"] = {"host": info.host, "port": info.port, "dbname": info.dbname, "user": info.user,
                             "server_version": info.server_version}
    threads: list[threading.Thread] = []
    if not run.stop.is_set():
        begin = "BEGIN" + "".join(
            sql.SQL("; SET LOCAL {} = {}").format(sql.SQL(".").join(map(sql.Identifier, n.split("."))),
                                                  sql.Literal(v)).as_string(conns[0])
            for n, v in settings)
        copy_sql = f"COPY {table} ({', '.join(tsbs_data.COLUMNS)}) FROM STDIN (FORMAT binary)"
        queues: list[queue.Queue] = [queue.Queue(QUEUE_DEPTH) for _ in range(clients)]
        gen = tsbs_data.batches(devices, start, duration_s, interval_s, batch, seed)
        run.t0 = time.perf_counter()
        threads = [threading.Thread(target=_produce, args=(run, queues, gen), name="tsbs-generate", daemon=True)]
        threads += [threading.Thread(target=_client, args=(run, c, conns[c], queues[c], begin, copy_sql),
                                     name=f"tsbs-client-{c}", daemon=True) for c in range(clients)]
        for t in threads:
            t.start()
        _watch(run, threads, conns, timeout_s, stop)
    ended = time.perf_counter()
    for t in threads:
        t.join(CANCEL_GRACE_S)
    for c, conn in enumerate(conns):
        if not (threads and threads[1 + c].is_alive()):
            conn.close()
    return _finish(run, summary, out, ended, expected)


def _watch(run: _Run, threads: list[threading.Thread], conns: list[psycopg.Connection], timeout_s: float,
           stop: threading.Event | None) -> None:
    """Until every client is done: a round trip over ``timeout_s`` or ``stop`` fails the load; on failure
    cancel the others' statements, then shut their sockets."""
    while any(t.is_alive() for t in threads[1:]):
        if stop is not None and stop.is_set() and not run.stop.is_set():
            run.fail("stopped from outside (SIGTERM or SIGINT)")
        now = time.perf_counter()
        for c, (what, k, since) in list(run.busy.items()):
            if now - since > timeout_s and not run.stop.is_set():
                run.fail(f"client {c}, batch {k} ({what}): no answer within timeout_s={timeout_s:g} s "
                         "(a commit waiting for a synchronous standby that does not confirm?)")
        if run.stop.is_set():
            _cancel(conns, list(run.busy))
            deadline = time.monotonic() + CANCEL_GRACE_S
            while run.busy and time.monotonic() < deadline:
                time.sleep(0.02)
            for c in list(run.busy):
                _shut(conns[c])
            for t in threads[1:]:
                t.join(CANCEL_GRACE_S)
            return
        time.sleep(0.02)


def _finish(run: _Run, summary: dict[str, Any], out: Path, ended: float, expected: int) -> dict[str, Any]:
    done = sorted(run.done, key=lambda r: r[1])
    with open(out / "batches.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(BATCH_COLUMNS)
        for c, k, n, s, cp, cm in done:
            w.writerow([c, k, n, f"{s:.6f}", f"{cp:.3f}", f"{cm:.3f}"])
    rows = sum(r[2] for r in done)
    last = max((r[3] + (r[4] + r[5]) / 1000 for r in done), default=0.0)
    seconds = last if done else max(0.0, ended - run.t0) if run.t0 else 0.0
    complete = not run.errors and rows == expected
    if not run.errors and rows != expected:
        run.errors.append(f"committed {rows} rows of {expected}")
    summary.update(
        complete=complete, rows=rows, batches=len(done), metrics=rows * len(tsbs_data.METRICS),
        seconds=round(seconds, 6), rows_per_s=round(rows / seconds, 1) if seconds > 0 else None,
        metrics_per_s=round(rows * len(tsbs_data.METRICS) / seconds, 1) if seconds > 0 else None,
        **_percentiles([r[5] for r in done], "commit"), **_percentiles([r[4] for r in done], "copy"),
        generate_s=round(run.generate_s, 6), generated_rows=run.generated_rows,
        generate_rows_per_s=round(run.generated_rows / run.generate_s, 1) if run.generate_s > 0 else None,
        errors=run.errors[:20], error_count=len(run.errors))
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if not complete:
        raise LoadError(run.errors[0], summary)
    return summary


def generate_only(*, devices: int, start: datetime, duration_s: int, interval_s: int = 10, batch: int,
                  seed: int, out: Path | None = None) -> dict[str, Any]:
    """The generator alone (every batch built, nothing sent): its rows/s; summary.json in ``out`` if given."""
    tsbs_data.check(devices, duration_s, interval_s, batch)
    t = time.perf_counter()
    rows = nbatches = nbytes = 0
    for _, n, buf in tsbs_data.batches(devices, start, duration_s, interval_s, batch, seed):
        rows, nbatches, nbytes = rows + n, nbatches + 1, nbytes + len(buf)
    seconds = time.perf_counter() - t
    summary = {"loader": "pglab.workloads.tsbs", "generate_only": True, "complete": True, "devices": devices,
               "start": start.isoformat(), "duration_s": duration_s, "interval_s": interval_s, "batch": batch,
               "seed": seed, "rows": rows, "batches": nbatches, "bytes": nbytes, "generate_s": round(seconds, 6),
               "rows_per_s": round(rows / seconds, 1),
               "metrics_per_s": round(rows * len(tsbs_data.METRICS) / seconds, 1),
               "mb_per_s": round(nbytes / seconds / 1e6, 1), "versions": _versions()}
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _versions() -> dict[str, str]:
    return {"python": platform.python_version(), "numpy": np.__version__, "psycopg": psycopg.__version__,
            "libpq": str(psycopg.pq.version())}
