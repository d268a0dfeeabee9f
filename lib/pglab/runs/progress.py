"""One progress display for every sweep, right for wherever its output goes.

``bar(points, "synchronous_commit")`` returns a :class:`Progress`, a tqdm-like object (iteration,
``set_postfix_str``, ``update``, ``close``, context manager) plus ``done(item_id, status)``, the call a
sweep makes when an item has finished. What it shows depends on where the output goes:

``tty``
    stderr is a terminal: a normal tqdm bar with rate and ETA, redrawn in place with ``\\r``.
``notebook``
    a kernel started by a Jupyter server (JupyterLab, Notebook): the ``tqdm.notebook`` widget.
``plain``
    anything else (CI, ``dvc repro`` or ``make`` piped to a log, papermill and nbval, whose kernels no
    Jupyter server started): no ``\\r`` redraws, one line per finished item on stderr, e.g.
    ``synchronous_commit: 12/90 points (13%), elapsed 1:02, ETA 6:40 — write-on-c004-r1 ok``,
    and one closing line with the count per status.

``PGLAB_PROGRESS=tty|notebook|plain|off`` in the environment overrides the choice.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TextIO, TypeVar

T = TypeVar("T")
MODES = ("tty", "notebook", "plain", "off")
ENV = "PGLAB_PROGRESS"
#: the count, share and ETA first, the item under way last: a long item id is what a narrow terminal cuts, never
#: the count (tqdm's default puts the postfix before the ETA, and a 60-character point id pushed both off the line)
BAR_FORMAT = ("{desc}: {n_fmt}/{total_fmt} {unit}s ({percentage:3.0f}%) {elapsed}<{remaining}, {rate_fmt} "
              "|{bar:12}|{postfix}")


def in_jupyter_kernel() -> bool:
    """True inside an IPython kernel (ZMQInteractiveShell). Never imports IPython itself: a kernel already has."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if get is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def detect_mode(stream: TextIO | None = None) -> str:
    """``tty``, ``notebook`` or ``plain`` for output written to ``stream`` (stderr); see the module doc."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced:
        if forced not in MODES:
            raise ValueError(f"{ENV}={forced!r}: expected one of {', '.join(MODES)}")
        return forced
    if in_jupyter_kernel():
        # a Jupyter server names the session of every kernel it starts (jupyter_server >= 2); papermill,
        # nbconvert and nbval start theirs without a server and keep only the text a widget never updates
        return "notebook" if os.environ.get("JPY_SESSION_NAME") else "plain"
    stream = stream if stream is not None else sys.stderr
    try:
        return "tty" if stream is not None and stream.isatty() else "plain"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return "plain"


def bar(items: Iterable[T] | int | None = None, desc: str = "", *, unit: str = "point", disable: bool = False,
        total: int | None = None, stream: TextIO | None = None, mode: str | None = None) -> Progress[T]:
    """A progress display over ``items`` (an iterable, or the number of items when the loop is elsewhere).

    Report each finished item with ``done(item_id, status)``; ``disable=True`` shows nothing at all.
    """
    iterable: Iterable[T] | None
    if isinstance(items, int):
        iterable, total = None, items if total is None else total
    else:
        iterable = items
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
    return Progress(iterable, desc=desc, unit=unit, total=total, stream=stream,
                    mode="off" if disable else (mode or detect_mode(stream)))


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def format_interval(seconds: float) -> str:
    """``6:40``, ``1:02:03``."""
    s = max(0, int(round(seconds)))
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress(Generic[T]):
    """What :func:`bar` returns: a tqdm bar (``tty``, ``notebook``), a line writer (``plain``) or nothing (``off``)."""

    def __init__(self, iterable: Iterable[T] | None, *, desc: str, unit: str, total: int | None,
                 stream: TextIO | None, mode: str):
        if mode not in MODES:
            raise ValueError(f"progress mode {mode!r}: expected one of {', '.join(MODES)}")
        self.iterable, self.desc, self.unit, self.total = iterable, desc, unit, total
        self.n = 0
        self.postfix = ""
        self.statuses: Counter[str] = Counter()
        self.closed = False
        self._stream = stream
        self._started = time.monotonic()
        self._tqdm: Any = None
        self._current = False  # an item was handed out by __iter__ and not reported with done()
        if mode == "notebook":
            try:
                from tqdm.notebook import tqdm as notebook_tqdm

                self._tqdm = notebook_tqdm(total=total, desc=desc, unit=unit)
            except ImportError:  # ipywidgets missing: "IProgress not found"
                mode = "plain"
        elif mode == "tty":
            from tqdm.std import tqdm

            out = stream or sys.stderr
            # a terminal that reports 0 columns (some `docker exec -t`, `script`) would get an empty bar
            sized = _columns(out) > 0
            self._tqdm = tqdm(total=total, desc=desc, unit=unit, file=out, dynamic_ncols=sized,
                              ncols=None if sized else 100, nrows=None if sized else 24, bar_format=BAR_FORMAT)
        self.mode = mode

    # -- tqdm's calls -------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[T]:
        if self.iterable is None:
            raise TypeError("this progress bar was given a total, not items: iterate over the items yourself")
        try:
            for item in self.iterable:
                self._current = True
                yield item
                if self._current:  # finished without done(): count it as tqdm would
                    self.update(1)
        finally:
            self._current = False
        self.close()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """The item under way (shown by the bar; in plain lines when it finishes without ``done``)."""
        self.postfix = str(s)
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(self.postfix, refresh=refresh)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._tqdm is not None:
            self._tqdm.set_description(desc)

    def update(self, n: int = 1) -> None:
        """``n`` more items finished; in plain mode one line, naming the postfix (the item under way)."""
        self._advance(n, self.postfix, None)

    def write(self, message: str) -> None:
        """A line of text that does not break the bar."""
        if self.mode == "off":
            return
        if self._tqdm is not None:
            self._tqdm.write(message, file=self._tqdm.fp if self.mode == "tty" else None)
        else:
            self._print(message)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._tqdm is not None:
            self._tqdm.close()
        elif self.mode == "plain" and (self.n or self.total):
            counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
            finished = self.total is None or self.n >= self.total
            what = f"{self.n} {self._units()}" if finished else f"stopped at {self._count()} {self._units()}"
            self._print(f"{self._prefix()}{what} in {format_interval(self._elapsed())}"
                        + (f" ({counts})" if counts else ""))

    def __enter__(self) -> Progress[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the sweep's own call -------------------------------------------------------------------------------
    def done(self, item_id: str | None = None, status: str | None = None) -> None:
        """One item finished: a line ``... — <item_id> <status>`` in plain mode, the bar moves on otherwise.

        A status other than ``ok`` is also printed above a tqdm bar, so that a failed point is seen.
        """
        self._current = False
        if status is not None:
            self.statuses[status] += 1
        self._advance(1, item_id if item_id is not None else self.postfix, status)

    # -- internals ----------------------------------------------------------------------------------------
    def _advance(self, n: int, item_id: str, status: str | None) -> None:
        self.n += n
        if self.mode == "plain":
            what = " ".join(x for x in (item_id, status) if x)
            self._print(self.line() + (f" {self._dash()} {what}" if what else ""))
        elif self._tqdm is not None:
            if status not in (None, "ok"):
                self.write(f"{self._prefix()}{item_id} {status}")
            self._tqdm.update(n)

    def line(self) -> str:
        """``desc: 12/90 points (13%), elapsed 1:02, ETA 6:40`` for the items finished so far."""
        elapsed = self._elapsed()
        text = f"{self._prefix()}{self._count()} {self._units()}"
        if self.total:
            text += f" ({100 * self.n // self.total}%)"
        text += f", elapsed {format_interval(elapsed)}"
        if self.total and self.n:
            text += f", ETA {format_interval(elapsed / self.n * max(0, self.total - self.n))}"
        return text

    def _count(self) -> str:
        return f"{self.n}/{self.total}" if self.total is not None else str(self.n)

    def _units(self) -> str:
        return self.unit if self.unit.endswith("s") or (self.total is None and self.n == 1) else self.unit + "s"

    def _prefix(self) -> str:
        return f"{self.desc}: " if self.desc else ""

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _out(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def _dash(self) -> str:
        try:
            "—".encode(getattr(self._out(), "encoding", None) or "ascii")
            return "—"
        except (UnicodeEncodeError, LookupError):
            return "-"

    def _print(self, text: str) -> None:
        out = self._out()
        out.write(text + "\n")
        out.flush()
