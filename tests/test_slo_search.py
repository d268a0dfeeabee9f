"""The rate at a latency target: the trial verdict, the search on a simulated M/M/1 server, and one real search.

The simulator: Poisson arrivals at the offered rate, exponential service at ``mu``, one FIFO server, every
transaction's wait by Lindley's recursion (``W[i+1] = max(0, W[i] + S[i] - A[i+1])``, event by event, computed
as a running minimum), after a warm-up that is thrown away. Its p99 sojourn time is ``-ln(0.01)/(mu - lambda)``,
so the rate at a p99 target ``t`` is known: ``lambda* = mu + ln(0.01)/t``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pglab.analysis.slo import Interval, Rule, TrialData, intervals_of, judge, min_samples, quantile_upper, upper_rank
from pglab.analysis.slo_search import FINE, OPEN, TOO_HIGH, Search, TrialRecord, classify
from pglab.app.slo import closed_loop_peak, find_rate
from pglab.errors import ParseError
from pglab.hosts.inventory import Inventory
from pglab.parsers.txlog_schedule import read_schedule
from pglab.runs.record import FORMAT_VERSION
from pglab.runs.session import session
from pglab.runs.store import Point
from pglab.workloads import pgbench


def mm1(rng: np.random.Generator, rate: float, mu: float, seconds: float, warm_s: float
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scheduled starts (s), schedule lags (ms) and latencies from the schedule (ms) after ``warm_s``."""
    n = int(rng.poisson(rate * (seconds + warm_s)))
    arrive = np.sort(rng.uniform(0.0, seconds + warm_s, n))
    service = rng.exponential(1.0 / mu, n)
    steps = np.concatenate([[0.0], np.cumsum(service[:-1] - np.diff(arrive))]) if n else np.zeros(0)
    wait = steps - np.minimum(0.0, np.minimum.accumulate(steps))  # Lindley's recursion, unrolled
    kept = arrive >= warm_s
    return arrive[kept] - warm_s, wait[kept] * 1e3, (wait + service)[kept] * 1e3


def simulate(mu: float, target_ms: float, seed: int, noise: float = 0.0, max_trials: int = 12):
    """A whole search against the simulated server; ``noise``: the capacity of each trial drawn around ``mu``
    (log-normal, that standard deviation), as a real server's varies from run to run."""
    rng = np.random.default_rng(seed)
    full_s = 400_000 / mu  # the same number of busy periods at every capacity: the same noise in p99
    search = Search(mu, target_ms, short_s=full_s / 10, full_s=full_s, max_trials=max_trials, seed=seed)
    rule = Rule(target_ms)
    while not search.done:
        rate, seconds = search.next_trial()  # type: ignore[misc]
        capacity = mu * math.exp(rng.normal(0.0, noise)) if noise else mu
        start, lag, latency = mm1(rng, rate, capacity, seconds, warm_s=seconds / 10)
        data = TrialData(rate, seconds, len(latency), latencies_ms=latency,
                         intervals=intervals_of(start, lag, np.zeros(0), 0.0, seconds))
        search.record(rate, judge(data, rule))
    return search.result


CASES = [(500, 50.0), (2000, 5.0), (2000, 20.0), (8000, 2.0), (1000, 50.0)]


@pytest.mark.parametrize(("mu", "target_ms"), CASES)
@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_the_search_lands_within_3_percent_of_the_known_rate(mu: float, target_ms: float, noise: float) -> None:
    known = mu + math.log(0.01) / (target_ms / 1e3)
    result = simulate(mu, target_ms, seed=int(mu + target_ms), noise=noise)
    assert result.rate is not None
    error = result.rate / known - 1
    print(f"mu {mu:g}/s target {target_ms:g} ms noise {noise:.0%}: known {known:.1f}/s found {result.rate:g}/s "
          f"({error:+.2%}) in {result.trials_used} trials, confirmed {result.confirmed}, bracket {result.bracket}")
    assert abs(error) <= 0.03 and result.trials_used <= 12


def test_the_search_is_deterministic_given_its_seed() -> None:
    a, b = simulate(2000, 20.0, seed=7), simulate(2000, 20.0, seed=7)
    assert [(t.rate, t.good) for t in a.trials] == [(t.rate, t.good) for t in b.trials]


# -- the search's rules, without a server ------------------------------------------------------------
class Fixed:
    def __init__(self, good: bool, duration_s: float) -> None:
        self.good, self.duration_s = good, duration_s


def test_a_rate_is_classified_by_the_share_of_its_trial_time() -> None:
    def trials(*spec: tuple[bool, float]) -> list[TrialRecord]:
        return [TrialRecord(i, "final", 1.0, d, g, None) for i, (g, d) in enumerate(spec)]
    assert classify(trials((True, 30)), 30, 60) == OPEN  # half the goal: not yet more than half good
    assert classify(trials((True, 30), (True, 30)), 30, 60) == FINE
    assert classify(trials((True, 30), (False, 30)), 30, 60) == OPEN  # a split: measured again
    assert classify(trials((True, 30), (False, 30), (False, 30)), 30, 60) == TOO_HIGH
    assert classify(trials((False, 5), (False, 30)), 30, 60) == TOO_HIGH  # a short bad trial counts
    assert classify(trials((True, 5), (True, 5), (True, 30)), 30, 60) == OPEN  # short good time never does


def test_the_search_brackets_from_a_quarter_of_the_peak_and_stops() -> None:
    search = Search(1000, 20, short_s=1, full_s=10, seed=1)
    rates = []
    while not search.done and len(rates) < 40:
        rate, _ = search.next_trial()  # type: ignore[misc]
        rates.append(rate)
        search.record(rate, Fixed(rate <= 612.0, 10 if search.phase == "final" else 1))
    assert rates[:3] == [250.0, 500.0, 1000.0]
    r = search.result
    assert r.confirmed and r.rate is not None and r.bracket[1] is not None
    assert r.rate <= 612.0 < r.bracket[1] and r.bracket[1] / r.rate - 1 <= 0.03


# -- the trial verdict --------------------------------------------------------------------------------
def test_the_p99_bound_is_the_maximum_from_299_samples_and_not_before() -> None:
    assert min_samples() == 299
    assert upper_rank(298) is None and upper_rank(299) == 298
    values = np.arange(1.0, 10001.0)
    bound = quantile_upper(values)
    assert bound is not None and 9900 < bound <= 9920  # above the sample p99, by a few ranks


def _steady(n: int, rate: float = 1000.0, latency_ms: float = 2.0, **kw: object) -> TrialData:
    seconds = n / rate
    starts = np.linspace(0, seconds, n, endpoint=False)
    defaults: dict[str, object] = {"latencies_ms": np.full(n, latency_ms),
                                   "intervals": intervals_of(starts, np.full(n, 0.1), np.zeros(0), 0, seconds)}
    defaults.update(kw)
    return TrialData(rate, seconds, n, **defaults)  # type: ignore[arg-type]


def test_a_steady_trial_is_good() -> None:
    v = judge(_steady(20_000), Rule(20))
    assert v.good and v.judged and not v.reasons


def test_no_skipped_but_every_transaction_late_is_bad() -> None:
    v = judge(_steady(20_000, latency_ms=50.0), Rule(20))
    assert not v.good and v.skipped == 0 and v.late == 20_000
    assert any("late+skipped" in r for r in v.reasons)
    agg = TrialData(1000, 20, 20_000, late=20_000, intervals=[Interval(i, 1000, 0.1, 0, 50.0) for i in range(20)])
    assert not judge(agg, Rule(20)).good  # the same from aggregate rows and pgbench's late count


def test_fewer_than_299_transactions_cannot_be_judged_good() -> None:
    v = judge(_steady(298), Rule(20))
    assert not v.judged and not v.good
    assert judge(_steady(299), Rule(20)).good


def test_an_achieved_rate_2_percent_short_is_bad() -> None:
    n = 600_000
    short = _steady(n)  # the steady trial, then its count cut by 2%
    data = TrialData(short.rate, short.duration_s, int(n * 0.98), latencies_ms=short.latencies_ms[: int(n * 0.98)],
                     intervals=short.intervals)
    v = judge(data, Rule(20))
    assert not v.good and any("achieved" in r for r in v.reasons)
    assert judge(TrialData(short.rate, short.duration_s, int(n * 0.995), latencies_ms=short.latencies_ms,
                           intervals=short.intervals), Rule(20)).good  # 0.5% short: within the 1%


def test_a_rising_schedule_lag_is_bad() -> None:
    n, seconds = 20_000, 20.0
    starts = np.linspace(0, seconds, n, endpoint=False)
    rising = intervals_of(starts, starts * 0.5, np.zeros(0), 0, seconds)  # +0.5 ms of lag each second
    v = judge(_steady(n, intervals=rising), Rule(20))
    assert not v.good and any("lag rising" in r for r in v.reasons)
    assert v.lag_slope_ms_per_s == pytest.approx(0.5, rel=0.05)


def test_skipped_transactions_count_above_every_latency() -> None:
    v = judge(_steady(20_000, skipped=300), Rule(20))
    assert not v.good and v.p99_upper_ms == math.inf and v.scheduled == 20_300


# -- a real search on PostgreSQL ------------------------------------------------------------------------
@pytest.mark.servers
def test_a_short_search_on_a_local_node_keeps_its_raw_files(tmp_path: Path, inventory: Inventory) -> None:
    """2-3 s trials of ``pgbench -S`` at scale 1: a rate is found under the closed-loop peak, and every trial's
    point folder holds the command, its output, the trial's parameters, every log and the verdict."""
    folders: list[Path] = []

    def new_point(n: int, rate: float) -> Point:
        d = tmp_path / "run" / f"trial{n:02d}"
        d.mkdir(parents=True)
        folders.append(d)
        return Point(d, {"format_version": FORMAT_VERSION, "point": d.name, "status": "running"})

    setup = tmp_path / "run" / "setup"
    setup.mkdir(parents=True)
    with session(inventory) as s:
        node = s.deploy.node("primary", "local", {})
        node.start()
        node.query("create database bench")
        pgbench.initialise(node, Point(setup, {"point": "setup"}), "bench", 1)
        peak = closed_loop_peak(node, Point(setup, {"point": "setup"}), "bench", clients=4, seconds=3)
        result = find_rate(node, new_point, peak=peak, target_ms=20.0, dbname="bench", clients=4, short_s=2,
                           full_s=3, warmup_s=1, drain_s=0.5, max_trials=7, short_width=0.3, width=0.15)
    print(f"closed-loop peak {peak:.0f} tps; found {result.rate} /s, bracket {result.bracket}, "
          f"{result.trials_used} trials, confirmed {result.confirmed}: "
          + ", ".join(f"{t.rate:g}{'+' if t.good else '-'}" for t in result.trials))
    assert result.rate is not None and 0 < result.rate < peak
    assert len(folders) == result.trials_used
    for d in folders:
        assert {"command.txt", "stdout.txt", "stderr.txt", "exit_code", "trial.json", "verdict.json"} <= \
            {p.name for p in d.iterdir()}
        command = (d / "command.txt").read_text()
        assert " -R " in command and "--latency-limit 40" in command and " -l " in command
        assert list((d / "txlog").glob("pgbench_log*"))
        assert json.loads((d / "verdict.json").read_text())["scheduled"] > 0


def test_a_rate_limited_log_is_read_with_its_lag_and_a_log_without_lag_is_refused(tmp_path: Path) -> None:
    """With -R the 7th column is the schedule lag; the scheduled start is the end less the latency (a skipped
    row: the moment it was skipped less its lag)."""
    log = tmp_path / "pgbench_log.1"
    log.write_text("0 1 1500 0 1700000000 500000 200\n0 2 skipped 0 1700000001 0 50000\n1 1 2500 0 1700000001 2500 0\n")
    s = read_schedule([log])
    assert list(s.latency_ms) == [1.5, 2.5] and list(s.lag_ms) == [0.2, 0.0] and s.failed == 0
    assert s.start_s[0] == pytest.approx(1700000000.4985) and s.skipped_start_s[0] == pytest.approx(1700000000.95)
    plain = tmp_path / "pgbench_log.2"
    plain.write_text("0 1 1500 0 1700000000 500000\n")
    with pytest.raises(ParseError, match="schedule_lag"):
        read_schedule([plain])
