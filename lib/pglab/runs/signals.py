"""Signals during a run: SIGTERM unwinds like Ctrl-C, and neither may cut a cleanup short.

``sigterm_as_interrupt`` turns SIGTERM into KeyboardInterrupt so that every ``finally`` runs;
``deferred_signals`` only notes SIGINT/SIGTERM while a session stops what it started, since a second
Ctrl-C must not abandon half-stopped servers.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so ``finally`` blocks and context managers run."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def deferred_signals(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[list[int]]:
    """While cleaning up, SIGINT and SIGTERM are only noted (yielded list); the handlers that were in
    place come back afterwards. A second Ctrl-C would otherwise abort the cleanup half way."""
    noted: list[int] = []

    def note(signum: int, frame: object) -> None:
        noted.append(signum)  # nothing else: printing here could re-enter a print in progress

    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, note)
    except ValueError:  # not the main thread: signals go to the main thread anyway
        pass
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
