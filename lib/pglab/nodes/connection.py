"""psycopg connections on which every round trip to the server has a deadline.

Every psycopg connection pglab opens is guarded (``GuardedConnection``): a statement that outlives its
deadline is cancelled from the client, because the server cannot end some waits by itself (a commit
waiting for a dead synchronous standby ignores statement_timeout), and ``QueryTimeout`` says what the
backend was waiting for.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import psycopg

from pglab.errors import QueryTimeout
from pglab.hosts.base import Host

# Client-side deadlines: the default for every statement, how long a cancel may take before the
# socket is cut, how long asking what a late statement waits for may take, and the margin by which the
# server's statement_timeout (a backstop for a client that died) trails the client's own deadline, so
# that the client always gets to say what was waited for.
QUERY_TIMEOUT_S = 120.0
CANCEL_GRACE_S = 5.0
DIAGNOSE_S = 5.0
SERVER_TIMEOUT_MARGIN_S = 2.0
# TCP connections notice a vanished peer within ~30 s. For a remote node that peer is the local end of
# its SSH tunnel, so a vanished host is caught by the client deadline (cancel, then socket cut) instead.
TCP_KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                                 "keepalives_count": 3, "tcp_user_timeout": 30000}


class WatchedNode(Protocol):
    """What a deadline needs of its connection's node: a ``Node``, named by its parts so that this module
    need not import pglab.nodes.node (which imports this one)."""

    name: str
    port: int

    @property
    def host(self) -> Host: ...

    def describe_wait(self, pid: int) -> str: ...


def cut_socket(conn: psycopg.Connection) -> None:
    """Shut a connection's socket down: a read blocked on it (in any thread) returns at once with an error."""
    try:
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001, S110  (already closed: nothing left to cut)
        pass


class GuardedConnection(psycopg.Connection):  # type: ignore[type-arg]
    """A psycopg connection on which every round trip to the server has a deadline.

    psycopg sends every request (execute, commit, transaction blocks, COPY) through ``wait``, so that
    is where the ``_Deadline`` sits; ``GuardedCursor.execute`` and ``commit`` only say what is being
    waited for and for how long. ``Node.connect`` sets the node and the default deadline.
    """

    pglab_node: WatchedNode
    pglab_timeout: float
    _pglab_pending: tuple[str, float] | None = None

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        what, limit = self._pglab_pending or ("a request to the server", self.pglab_timeout)
        with _Deadline(self, what, limit):
            return super().wait(gen, *args, **kwargs)

    def commit(self) -> None:
        with self._labelled("commit", self.pglab_timeout):
            super().commit()

    @contextlib.contextmanager
    def _labelled(self, what: str, limit: float) -> Iterator[None]:
        previous, self._pglab_pending = self._pglab_pending, (what, limit)
        try:
            yield
        finally:
            self._pglab_pending = previous


class GuardedCursor(psycopg.Cursor):  # type: ignore[type-arg]
    """``execute`` takes a per-call ``timeout`` (default: the connection's); see GuardedConnection."""

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                binary: bool | None = None, timeout: float | None = None) -> GuardedCursor:
        conn: GuardedConnection = self.connection  # type: ignore[assignment]
        limit = conn.pglab_timeout if timeout is None else timeout
        longer = limit > conn.pglab_timeout
        if longer:  # the server's backstop would end it first: move it out of the way for this call
            ms = str(int((limit + SERVER_TIMEOUT_MARGIN_S) * 1000))
            conn.execute("select set_config('statement_timeout', %s, %s)", (ms, not conn.autocommit))
        try:
            with conn._labelled(_statement_text(query, conn), limit):
                super().execute(query, params, prepare=prepare, binary=binary)
        finally:
            if longer and conn.autocommit and not conn.closed:
                conn.execute("reset statement_timeout")
        return self

    def executemany(self, query: Any, params_seq: Any, *, returning: bool = False) -> None:
        conn: GuardedConnection = self.connection  # type: ignore[assignment]
        with conn._labelled(_statement_text(query, conn), conn.pglab_timeout):
            super().executemany(query, params_seq, returning=returning)


def _statement_text(query: Any, conn: Any) -> str:
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode(errors="replace")
    return query.as_string(conn) if hasattr(query, "as_string") else str(query)


class _Deadline:
    """Watches one round trip to the server from a timer thread.

    At the deadline it reads what the backend waits for (a second connection), cancels the
    statement, and if the server does not answer the cancel within CANCEL_GRACE_S it shuts the
    socket down, so that the execute returns whatever happened to the host. A statement that was
    cancelled raises QueryTimeout even if it then reported success (a commit whose synchronous-standby
    wait was cancelled is committed locally, with a warning): the caller did not get what it asked
    for in time. The connection is closed afterwards, so that a late cancel can never hit the next
    statement.
    """

    def __init__(self, conn: GuardedConnection, sql: str, timeout: float):
        self.conn, self.sql, self.timeout = conn, sql, timeout
        self.fired = False
        self.waited_for = ""
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._fire_done = threading.Event()

    def __enter__(self) -> _Deadline:
        _WATCHDOG.watch(time.monotonic() + self.timeout, self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        with self._lock:
            self._finished.set()
            fired = self.fired
        if not fired:
            self.conn = None  # type: ignore[assignment]  (the watchdog holds this until the deadline)
            return
        self._fire_done.wait()  # diagnosis and cancel are done
        node = self.conn.pglab_node
        self.conn.close()
        note = ""
        if exc is None and "SyncRep" in self.waited_for:
            note = "The transaction committed locally, but no synchronous standby confirmed it"
        elif exc is None:
            note = "It completed just after the deadline"
        raise QueryTimeout(node.name, node.host.name, node.port, self.sql, self.timeout, self.waited_for,
                           note) from exc

    def fire(self) -> None:
        """At the deadline (from a thread of its own: the diagnosis and cancel take a while)."""
        try:
            self._fire()
        finally:
            self._fire_done.set()

    def _fire(self) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            self.fired = True
        self.waited_for = self.conn.pglab_node.describe_wait(self.conn.pgconn.backend_pid)
        try:
            self.conn.cancel_safe(timeout=CANCEL_GRACE_S)
        except Exception:  # noqa: BLE001, S110  (the socket is cut below if the cancel did not work)
            pass
        if not self._finished.wait(CANCEL_GRACE_S):
            cut_socket(self.conn)


class _Watchdog:
    """One thread that watches every deadline of the process.

    Why not a ``threading.Timer`` per round trip: a thread started and cancelled for every query was
    a fifth of pglab's own CPU time in a logical replication sweep (thousands of catch-up polls). Here
    a round trip costs a heap push; the thread sleeps until the earliest deadline, drops the ones
    whose round trip finished, and hands an expired one to a thread of its own.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None
        self._pid = 0

    def watch(self, at: float, deadline: _Deadline) -> None:
        with self._cond:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._heap, self._pid = [], os.getpid()
                self._thread = threading.Thread(target=self._run, name="pglab-deadlines", daemon=True)
                self._thread.start()
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, deadline))
            if self._heap[0][2] is deadline:  # earlier than what the thread sleeps towards
                self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2]._finished.is_set():
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                at, _, deadline = self._heap[0]
                left = at - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                threading.Thread(target=deadline.fire, name="pglab-deadline", daemon=True).start()


_WATCHDOG = _Watchdog()
