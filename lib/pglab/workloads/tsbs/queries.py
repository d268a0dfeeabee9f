"""TSBS cpu-only read queries, as pgbench scripts (drawn by pgbench) and as one concrete query (drawn by a seed).

The SQL is TSBS's TimescaleDB devops queries (``cmd/tsbs_generate_queries/databases/timescaledb/
devops.go``, with ``--use-tags``: hosts are found through the ``tags`` table) adapted so that one text runs
on every layout and every node, and gives the same result on all of them:

- ``date_trunc(unit, time, 'UTC')`` instead of ``time_bucket`` (no TimescaleDB needed; the same buckets for
  one minute and one hour, and independent of the session's TimeZone);
- times as ``to_timestamp(<epoch seconds>)`` (pgbench draws integers; no literal with colons for pgbench
  to mistake for variables);
- an ORDER BY that fixes the order of every result (``high-cpu-1`` has none in TSBS: ``ORDER BY time``).

Every query is one template with ``{host}``, ``{t0}``, ``{t1}`` markers: ``pgbench_script`` puts pgbench
variables there, ``query_sql`` psycopg placeholders, so both run exactly the same statement. Windows have
TSBS's lengths, shortened to the loaded span when that is shorter, and always lie inside it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from pglab.workloads.tsbs.data import METRICS

QUERY_TYPES: tuple[str, ...] = ("cpu-max-all-1", "single-groupby-1-1-1", "double-groupby-1", "high-cpu-1",
                                "lastpoint", "groupby-orderby-limit")
HOUR = 3600
# TSBS's window per query type (devops/common.go: MaxAllDuration 8 h, DoubleGroupByDuration and
# HighCPUDuration 24 h; single-groupby-1-1-1: 1 h; groupby-orderby-limit: the end of a random 1 h window)
WINDOW_S: dict[str, int] = {"cpu-max-all-1": 8 * HOUR, "single-groupby-1-1-1": HOUR, "double-groupby-1": 24 * HOUR,
                            "high-cpu-1": 24 * HOUR, "groupby-orderby-limit": HOUR}
_ONE_HOST = "tags_id IN (SELECT id FROM tags WHERE hostname IN ('host_' || {host}))"
_WINDOW = "time >= to_timestamp({t0}) AND time < to_timestamp({t1})"

TEMPLATES: dict[str, str] = {
    "cpu-max-all-1": (
        "SELECT date_trunc('hour', time, 'UTC') AS hour, "
        + ", ".join(f"max({m}) AS max_{m}" for m in METRICS)
        + f" FROM cpu WHERE {_ONE_HOST} AND {_WINDOW} GROUP BY hour ORDER BY hour"),
    "single-groupby-1-1-1": (
        "SELECT date_trunc('minute', time, 'UTC') AS minute, max(usage_user) AS max_usage_user "
        f"FROM cpu WHERE {_ONE_HOST} AND {_WINDOW} GROUP BY minute ORDER BY minute ASC"),
    "double-groupby-1": (
        "WITH cpu_avg AS (SELECT date_trunc('hour', time, 'UTC') AS hour, tags_id, "
        f"avg(usage_user) AS mean_usage_user FROM cpu WHERE {_WINDOW} GROUP BY hour, tags_id) "
        "SELECT hour, tags.hostname, mean_usage_user FROM cpu_avg JOIN tags ON cpu_avg.tags_id = tags.id "
        "ORDER BY hour, tags.hostname"),
    "high-cpu-1": (
        f"SELECT * FROM cpu WHERE usage_user > 90.0 AND {_WINDOW} AND {_ONE_HOST} ORDER BY time"),
    "lastpoint": (
        "SELECT DISTINCT ON (t.hostname) * FROM tags t INNER JOIN LATERAL (SELECT * FROM cpu c "
        "WHERE c.tags_id = t.id ORDER BY time DESC LIMIT 1) AS b ON true ORDER BY t.hostname, b.time DESC"),
    "groupby-orderby-limit": (
        "SELECT date_trunc('minute', time, 'UTC') AS minute, max(usage_user) FROM cpu "
        "WHERE time < to_timestamp({t1}) GROUP BY minute ORDER BY minute DESC LIMIT 5"),
}
_MARKERS = ("host", "t0", "t1")


def _check(qtype: str) -> None:
    if qtype not in QUERY_TYPES:
        raise ValueError(f"unknown TSBS query type {qtype!r}; one of {', '.join(QUERY_TYPES)}")


def _span(devices: int, start: datetime, end: datetime) -> tuple[int, int]:
    """(start as whole epoch seconds, span in whole seconds); ValueError when there is nothing to query."""
    if devices < 1:
        raise ValueError(f"devices must be at least 1, not {devices}")
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end need a time zone")
    t0 = int(np.ceil(start.timestamp()))
    span = int(end.timestamp()) - t0
    if span < 1:
        raise ValueError(f"end {end.isoformat()} is not after start {start.isoformat()}")
    return t0, span


def window(qtype: str, start: datetime, end: datetime) -> int:
    """The query's window in seconds: TSBS's, or the whole loaded span when that is shorter (0: none)."""
    _check(qtype)
    return min(WINDOW_S.get(qtype, 0), _span(1, start, end)[1])


def uses(qtype: str) -> tuple[str, ...]:
    """The markers a query's template has (``host``, ``t0``, ``t1``)."""
    _check(qtype)
    return tuple(m for m in _MARKERS if "{" + m + "}" in TEMPLATES[qtype])


def pgbench_script(qtype: str, devices: int, start: datetime, end: datetime) -> str:
    """A pgbench custom script: host and window drawn by pgbench (``random``, repeatable with
    ``--random-seed``), uniform like ``draw_params``."""
    _check(qtype)
    first, span = _span(devices, start, end)
    w = window(qtype, start, end)
    lines = [f"-- TSBS {qtype} (pglab.workloads.tsbs); data: {devices} hosts, "
             f"[{start.isoformat()}, {end.isoformat()})"]
    used = uses(qtype)
    if "host" in used:
        lines.append(f"\\set host random(0, {devices - 1})")
    if "t0" in used or "t1" in used:
        lines.append(f"\\set t0 random({first}, {first + span - w})")
        lines.append(f"\\set t1 :t0 + {w}")
    lines.append(TEMPLATES[qtype].format(**{m: f":{m}" for m in _MARKERS}) + ";")
    return "\n".join(lines) + "\n"


def draw_params(qtype: str, devices: int, start: datetime, end: datetime, seed: int) -> dict[str, Any]:
    """One draw of the parameters ``pgbench_script`` draws, from ``seed`` (and the query type): host index
    and window start uniform, the window ``window(qtype)`` long. Readable copies beside them."""
    _check(qtype)
    first, span = _span(devices, start, end)
    w = window(qtype, start, end)
    rng = np.random.Generator(np.random.PCG64([seed, QUERY_TYPES.index(qtype)]))
    host, off = int(rng.integers(0, devices)), int(rng.integers(0, span - w + 1))
    params: dict[str, Any] = {}
    used = uses(qtype)
    if "host" in used:
        params.update(host=host, hostname=f"host_{host}")
    if "t0" in used or "t1" in used:
        params.update(t0=first + off, t1=first + off + w,
                      window=f"[{datetime.fromtimestamp(first + off, start.tzinfo).isoformat()}, "
                             f"{datetime.fromtimestamp(first + off + w, start.tzinfo).isoformat()})")
    return params


def query_sql(qtype: str, params: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The query with psycopg placeholders and its arguments, in the template's order."""
    _check(qtype)
    template = TEMPLATES[qtype]
    order = sorted(uses(qtype), key=lambda m: template.index("{" + m + "}"))
    missing = [m for m in order if m not in params]
    if missing:
        raise ValueError(f"{qtype} needs parameters {missing} (see draw_params)")
    if any(template.count("{" + m + "}") != 1 for m in order):
        raise AssertionError(f"{qtype}: every marker must appear once")  # the args follow the markers' order
    return template.format(**dict.fromkeys(_MARKERS, "%s")), tuple(int(params[m]) for m in order)
