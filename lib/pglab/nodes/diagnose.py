"""What a backend is waiting for, in words: the diagnosis a timed-out statement's error carries.

Asked of pg_stat_activity in a short-lived session of its own, from a helper thread given a deadline: a
server that does not answer (a vanished host behind a tunnel) must not hold up the cancel that follows.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from pglab.nodes.connection import DIAGNOSE_S, cut_socket


def describe_wait(conninfo: dict[str, Any], node: str, pid: int, timeout: float = DIAGNOSE_S) -> str:
    """What backend ``pid`` of node ``node`` (reached with psycopg's ``conninfo``) is waiting for, in words;
    after ``timeout`` seconds, that it could not find out (and the helper's socket is cut)."""
    answer = [f"something it could not find out (pg_stat_activity did not answer within {timeout:g} s)"]
    opened: list[psycopg.Connection] = []

    def ask() -> None:
        try:
            with psycopg.connect(autocommit=True, **conninfo) as conn:
                opened.append(conn)
                row = conn.execute(
                    "select a.wait_event_type, a.wait_event, a.state, pg_blocking_pids(%s)::text, "
                    "current_setting('synchronous_standby_names') "
                    "from (select 1) one left join pg_stat_activity a on a.pid = %s", (pid, pid)).fetchone()
            answer[0] = _wait_in_words(pid, *row)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001  (the timeout is reported either way)
            first = (str(exc).strip().splitlines() or [""])[0]
            answer[0] = (f"something it could not find out (asking pg_stat_activity failed: "
                         f"{type(exc).__name__}: {first})")

    helper = threading.Thread(target=ask, name=f"pglab-diagnose-{node}", daemon=True)
    helper.start()
    helper.join(timeout)
    if helper.is_alive() and opened:
        cut_socket(opened[0])  # frees the helper too
    return answer[0]


def _wait_in_words(pid: int, wtype: str | None, event: str | None, state: str | None, blockers: str,
                   sync_names: str) -> str:
    """A pg_stat_activity row as the end of "it was waiting for ..."."""
    if state is None:
        return f"nothing any more: backend {pid} was gone"
    if (wtype, event) == ("IPC", "SyncRep"):
        return f"a synchronous standby to confirm (IPC:SyncRep; synchronous_standby_names = '{sync_names}')"
    if wtype == "Lock":
        return f"a lock (Lock:{event}; blocked by backend pids {blockers})"
    if wtype:
        return f"{wtype}:{event} (state {state})"
    return f"nothing it could name: it was running (state {state}, no wait event)"
