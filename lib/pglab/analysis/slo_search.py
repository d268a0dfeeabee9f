"""The search for the highest Poisson rate whose trials are good (``pglab.analysis.slo``): a state machine.

Why a state machine: it proposes the next ``(rate, duration)`` and takes results, so the same code runs
against PostgreSQL (``pglab.workloads.slo``), a simulated queue (tests/test_slo_search.py) or a replay.

The search, after RFC 9971's MLRsearch (docs/measurement.md, "The rate at a latency target"):

* **Short phase**: trials of ``short_s``, one trial deciding a rate. An exponential bracket from a quarter
  of the closed-loop peak (x2 up while good, /2 down while bad), then bisection on the log rate until the
  bracket is ``short_width`` wide.
* **Final phase**: trials of ``full_s`` decide. A rate is *too high* once more than half of its trials'
  time is bad, *fine* once more than half is good, where the time not yet measured up to the goal
  duration sum counts against the decision (RFC 9971's pessimistic and optimistic sums). A short trial's
  bad time counts too, less its short good time (RFC 9971's balancing); short good time alone never
  makes a rate fine. Bisection on the log rate goes on from the short phase's bracket (a rate not yet
  measured at full length keeps its short verdict until then) to ``width``, with a goal of
  ``goal_sum_s`` (one full trial by default), widening outwards (doubling the step) when a bound is
  overturned.
* **Confirmation**: the narrow bracket's two ends are then held to ``confirm_sum_s`` (two full trials
  by default): a fine end needs two good trials, and an end near the boundary is measured until its
  majority of time is clear, not decided by one coin flip. The confirmation trials run in a seeded
  random order; an end overturned reopens the bisection.

Deterministic given ``seed``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Protocol


class Result(Protocol):
    """What the search needs of a trial's verdict (``pglab.analysis.slo.Verdict`` has it)."""

    good: bool
    duration_s: float


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the search saw it."""

    index: int
    phase: str
    rate: float
    duration_s: float
    good: bool
    result: object


@dataclass(frozen=True)
class SearchResult:
    """The found rate (None: not even the lowest rate tried was fine), its bracket, the trials; ``confirmed``:
    both ends held to the confirmation goal (False when ``max_trials`` cut the search short)."""

    rate: float | None
    confirmed: bool
    bracket: tuple[float | None, float | None]
    trials_used: int
    trials: list[TrialRecord]
    why: str


@dataclass
class _Load:
    trials: list[TrialRecord] = field(default_factory=list)


FINE, TOO_HIGH, OPEN = "fine", "too high", "open"


def classify(trials: list[TrialRecord], full_s: float, goal_sum_s: float, exceed: float = 0.5) -> str:
    """RFC 9971-style classification of one rate from its trials (``full_s`` and longer are long)."""
    good_long = sum(t.duration_s for t in trials if t.good and t.duration_s >= full_s)
    bad_long = sum(t.duration_s for t in trials if not t.good and t.duration_s >= full_s)
    good_short = sum(t.duration_s for t in trials if t.good and t.duration_s < full_s)
    bad_short = sum(t.duration_s for t in trials if not t.good and t.duration_s < full_s)
    bad = bad_long + max(0.0, bad_short - good_short * exceed / (1 - exceed))
    whole = max(goal_sum_s, bad + good_long)
    missing = whole - bad - good_long
    if bad > exceed * whole:  # bad even if every missing second turned out good
        return TOO_HIGH
    if good_long > (1 - exceed) * whole and bad + missing < exceed * whole:  # good even if missing were bad
        return FINE
    return OPEN


class Search:
    """``next_trial()`` -> ``(rate, seconds)`` or None when ``done``; ``record(rate, result)``; ``result``."""

    def __init__(self, peak: float, target_ms: float, *, short_s: float = 5.0, full_s: float = 30.0,
                 goal_sum_s: float | None = None, confirm_sum_s: float | None = None, width: float = 0.03,
                 short_width: float = 0.1,
                 min_rate: float | None = None, max_trials: int = 40, min_samples: int = 299,
                 seed: int = 0) -> None:
        if peak <= 0 or target_ms <= 0:
            raise ValueError("peak and target_ms must be positive")
        self.peak, self.target_ms = float(peak), float(target_ms)
        self.short_s, self.full_s = float(short_s), float(full_s)
        self.goal_sum_s = float(goal_sum_s if goal_sum_s is not None else full_s)
        self.confirm_sum_s = float(confirm_sum_s if confirm_sum_s is not None else 2 * full_s)
        self.width, self.short_width = width, max(short_width, width)
        self.min_rate = min_rate if min_rate is not None else peak / 256
        self.max_trials, self.min_samples = max_trials, min_samples
        self.rng = random.Random(seed)
        self.loads: dict[float, _Load] = {}
        self.trials: list[TrialRecord] = []
        self.phase = "short"
        self._step = width  # the final phase's outward step, doubled at each widening
        self._why = ""
        self._next: tuple[float, float] | None = None
        self._plan()

    # -- what the search knows ------------------------------------------------------------------
    def _class(self, rate: float, phase: str, confirm: bool = False) -> str:
        trials = self.loads[rate].trials if rate in self.loads else []
        if phase == "short":
            short = [t for t in trials if t.phase == "short"]
            return OPEN if not short else (FINE if short[-1].good else TOO_HIGH)
        if not any(t.duration_s >= self.full_s for t in trials):  # the short verdict, until measured at length
            return OPEN if confirm else self._class(rate, "short")
        return classify(trials, self.full_s, self.confirm_sum_s if confirm else self.goal_sum_s)

    def bracket(self, phase: str | None = None) -> tuple[float | None, float | None]:
        """The highest fine rate under the lowest too-high one, in ``phase`` (default: the current)."""
        phase = phase or self.phase
        classes = {r: self._class(r, phase) for r in self.loads}
        high = min((r for r, c in classes.items() if c == TOO_HIGH), default=None)
        low = max((r for r, c in classes.items() if c == FINE and (high is None or r < high)), default=None)
        return low, high

    @staticmethod
    def _narrow(low: float, high: float, width: float) -> bool:
        return high / low - 1 <= width

    def _duration(self, rate: float, base: float) -> float:
        """At least twice the samples a p99 bound needs, whatever the rate."""
        return max(base, math.ceil(2 * self.min_samples / rate))

    # -- what to do next ------------------------------------------------------------------------
    def _plan(self) -> None:
        self._next = None
        if len(self.trials) >= self.max_trials:
            self._why = f"max_trials ({self.max_trials}) reached"
            return
        if self.phase == "short":
            rate = self._short_rate()
            if rate is not None:
                self._next = (rate, self._duration(rate, self.short_s))
                return
            self.phase = "final"
        rate = self._final_rate()
        if rate is not None:
            self._next = (rate, self._duration(rate, self.full_s))

    def _short_rate(self) -> float | None:
        low, high = self.bracket("short")
        if low is None and high is None:
            return self._round(self.peak / 4)
        if high is None:
            return self._round(low * 2)  # type: ignore[operator]
        if low is None:
            nxt = high / 2
            return self._round(nxt) if nxt >= self.min_rate else None
        return None if self._narrow(low, high, self.short_width) else self._round(math.sqrt(low * high))

    def _final_rate(self) -> float | None:
        low, high = self.bracket("final")
        open_ = [r for r in self.loads if self._class(r, "final") == OPEN
                 and (low is None or r > low) and (high is None or r < high)]
        if open_:  # a split inside the bracket: its majority first
            return self.rng.choice(sorted(open_))
        if low is not None and high is not None and self._narrow(low, high, self.width):
            ends = [r for r in (low, high) if self._class(r, "final", confirm=True) == OPEN]
            if ends:  # both ends held to confirm_sum_s: measured again, in a random order
                return self.rng.choice(ends)
            self._why = "bracket narrower than the width, both ends confirmed"
            return None
        if low is None:  # widen downwards from the lowest rate found too high
            base = high if high is not None else self.peak / 4
            nxt = base / (1 + self._step)
            self._step *= 2
            if nxt < self.min_rate:
                self._why = f"no fine rate down to {self.min_rate:g}/s"
                return None
            return self._round(nxt)
        if high is None:  # widen upwards from the highest fine rate
            nxt = low * (1 + self._step)
            self._step *= 2
            return self._round(nxt)
        return self._round(math.sqrt(low * high))

    @staticmethod
    def _round(rate: float) -> float:
        """Four significant digits: the same rate is the same key, and the command reads well."""
        return float(f"{rate:.4g}")

    # -- the interface ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._next is None

    def next_trial(self) -> tuple[float, float] | None:
        """The next trial's ``(rate per second, seconds)``, or None when the search is over."""
        return self._next

    def record(self, rate: float, result: Result) -> None:
        """A trial's verdict at ``rate`` (the rate proposed; its ``duration_s`` as measured)."""
        if self._next is None or rate != self._next[0]:
            raise ValueError(f"rate {rate} was not the one proposed ({self._next})")
        rec = TrialRecord(len(self.trials) + 1, self.phase, rate, float(result.duration_s), bool(result.good), result)
        self.loads.setdefault(rate, _Load()).trials.append(rec)
        self.trials.append(rec)
        self._plan()

    @property
    def result(self) -> SearchResult:
        low, high = self.bracket("final")
        confirmed = self.done and self._why.startswith("bracket")
        return SearchResult(rate=low, confirmed=confirmed, bracket=(low, high), trials_used=len(self.trials),
                            trials=list(self.trials),
                            why=self._why or ("under way" if not self.done else ""))
