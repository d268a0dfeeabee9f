"""Processes of the lab on this machine: alive or not, and stopping them by PID and start time only.

A PID alone may belong to another process by now; every signal here is sent only while the PID still
has the start time that was recorded for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from pglab.hosts import procs
from pglab.hosts.local import LocalHost

STOP_GRACE_S = 3.0


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    state = _proc_state(pid)
    return state is not None and state != "Z"


def _signal_checked(pid: int, start_time: int, sig: int) -> None:
    """Signal ``pid`` only while it still is the process that started at ``start_time``."""
    if procs.start_time(LocalHost(), pid) == start_time and _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _stop_pids(pids: list[tuple[int, int]], grace_s: float = STOP_GRACE_S) -> list[int]:
    """SIGTERM ``(pid, start time)`` pairs, SIGKILL what is left after ``grace_s``; returns the survivors."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        for pid, start in pids:
            _signal_checked(pid, start, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = [(p, s) for p, s in pids if _alive(p) and procs.start_time(LocalHost(), p) == s]
            if not pids:
                return []
            time.sleep(0.02)
    return [p for p, _ in pids]
