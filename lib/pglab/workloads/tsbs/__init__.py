"""The TSBS "cpu-only" workload on PostgreSQL: schema, tags, a seeded loader program, and the read queries.

After the Time Series Benchmark Suite (github.com/timescale/tsbs) as its TimescaleDB target sets it up
(``pkg/targets/timescaledb/creator.go``, default options):

- ``tags``: one row per simulated host (``id`` serial, ``hostname`` ``host_<i>`` and nine more text tags);
- ``cpu``: ``time timestamptz, tags_id integer``, the ten ``usage_*`` float8 metrics and TSBS's
  ``additional_tags jsonb`` (always NULL here). No ``hostname`` column: TSBS adds one only with
  ``--in-table-partition-tag``; queries reach hosts through ``tags`` (TSBS's ``--use-tags``).
- indexes: the article's three, as TSBS makes them: ``(time DESC)``, ``(tags_id, time DESC)`` and
  ``(usage_user, time DESC)``.

Layouts: ``plain`` (one table), ``partitioned`` (declarative RANGE partitions on time, one per chunk
interval, aligned like TimescaleDB's chunks and created before the load; indexes on the parent) and
``hypertable`` (TimescaleDB, with ``create_hypertable`` in the installed version's form).

The rows (``tsbs.data``), the loader (``tsbs.load``) and the queries (``tsbs.queries``) live in their own
modules; this one gathers the API and is the program the study runs on the client host like pgbench::

    python -m pglab.workloads.tsbs load --devices 200 --start 2016-01-01T00:00:00+00:00 --duration-s 7200 \\
        --interval-s 10 --batch 1000 --clients 8 --seed 1 --table cpu --out DIR \\
        [--set-local synchronous_commit=local] [--generate-only] [--timeout-s 300]

It connects through libpq's environment only (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSFILE, PGSSLMODE...)
and takes no password. Exit 0 when every row was committed, 1 on any failure (the reason on stderr; what
was committed is still in DIR), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from pglab.workloads.tsbs.data import COLUMNS, METRICS, batches, generate, total_rows
from pglab.workloads.tsbs.load import LoadError, check_table, generate_only, load
from pglab.workloads.tsbs.queries import QUERY_TYPES, draw_params, pgbench_script, query_sql

__all__ = ["COLUMNS", "LAYOUTS", "METRICS", "QUERY_TYPES", "TAG_COLUMNS", "LoadError", "batches", "draw_params",
           "generate", "generate_only", "hypertable_sql", "index_sql", "load", "load_tags", "main",
           "params_with_rows", "partition_bounds", "pgbench_script", "query_sql", "schema_sql", "tags_rows",
           "tags_sql", "timescale_available", "timescale_version", "total_rows", "unlogged_table_sql"]

LAYOUTS = ("plain", "partitioned", "hypertable")
MAX_PARTITIONS = 10_000
TAG_COLUMNS: tuple[str, ...] = ("hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
                                "service_version", "service_environment")
# TSBS's tag choices (pkg/data/usecases/devops/host.go)
REGIONS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"),
    "us-west-1": ("us-west-1a", "us-west-1b"),
    "us-west-2": ("us-west-2a", "us-west-2b", "us-west-2c"),
    "eu-west-1": ("eu-west-1a", "eu-west-1b", "eu-west-1c"),
    "eu-central-1": ("eu-central-1a", "eu-central-1b"),
    "ap-southeast-1": ("ap-southeast-1a", "ap-southeast-1b"),
    "ap-southeast-2": ("ap-southeast-2a", "ap-southeast-2b"),
    "ap-northeast-1": ("ap-northeast-1a", "ap-northeast-1c"),
    "sa-east-1": ("sa-east-1a", "sa-east-1b", "sa-east-1c"),
}
OS_CHOICES = ("Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10")
ARCH_CHOICES = ("x64", "x86")
TEAM_CHOICES = ("SF", "NYC", "LON", "CHI")
ENVIRONMENT_CHOICES = ("production", "staging", "test")
RACKS, SERVICES, SERVICE_VERSIONS = 100, 20, 2


# -- schema ------------------------------------------------------------------------------------------
def _cpu_columns() -> str:
    return ", ".join(["time timestamptz", "tags_id integer", *(f"{m} double precision" for m in METRICS),
                      "additional_tags jsonb DEFAULT NULL"])


def index_sql(table: str = "cpu") -> list[str]:
    """The article's three indexes (TSBS's time index, partition index and one VALUE-TIME field index)."""
    check_table(table)
    return [f"CREATE INDEX {table}_time_idx ON {table} (time DESC)",
            f"CREATE INDEX {table}_tags_id_time_idx ON {table} (tags_id, time DESC)",
            f"CREATE INDEX {table}_usage_user_time_idx ON {table} (usage_user, time DESC)"]


def timescale_version(version: str) -> tuple[int, int]:
    """(major, minor) of an extension version string ("2.14.2", "2.13.0-dev"); ValueError otherwise."""
    m = re.match(r"(\d+)\.(\d+)(?:\.\d+)?(?:[-.+~][0-9A-Za-z.-]*)?\Z", version.strip())
    if not m:
        raise ValueError(f"cannot read TimescaleDB version {version!r} (want e.g. '2.14.2')")
    major, minor = int(m.group(1)), int(m.group(2))
    if major not in (1, 2):
        raise ValueError(f"TimescaleDB {version}: only 1.x and 2.x are known (their create_hypertable)")
    return major, minor


def hypertable_sql(table: str, chunk_interval_s: int, timescale: str) -> str:
    """``create_hypertable`` in the form of ``timescale``'s version; no default indexes (ours follow).

    1.x: TSBS's own call (the interval as integer microseconds); 2.0-2.12: ``chunk_time_interval =>
    interval``; 2.13 and later: the new ``by_range`` dimension builder.
    """
    major, minor = timescale_version(timescale)
    interval = f"interval '{chunk_interval_s} seconds'"
    if major == 1:
        return (f"SELECT create_hypertable('{table}'::regclass, 'time'::name, "
                f"chunk_time_interval => {chunk_interval_s * 1_000_000}, create_default_indexes => FALSE)")
    if minor < 13:
        return (f"SELECT create_hypertable('{table}', 'time', chunk_time_interval => {interval}, "
                "create_default_indexes => FALSE)")
    return f"SELECT create_hypertable('{table}', by_range('time', {interval}), create_default_indexes => FALSE)"


def _check_range(start: datetime, end: datetime) -> None:
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end need a time zone")
    if end <= start:
        raise ValueError(f"end {end.isoformat()} is not after start {start.isoformat()}")


def partition_bounds(start: datetime, end: datetime, chunk_interval_s: int) -> list[tuple[datetime, datetime]]:
    """[from, to) of each partition covering [start, end), aligned on multiples of the interval since the
    Unix epoch (as TimescaleDB aligns its chunks)."""
    _check_range(start, end)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    step = timedelta(seconds=chunk_interval_s)
    first = epoch + ((start - epoch) // step) * step
    count = -(-(end - first) // step)
    if count > MAX_PARTITIONS:
        raise ValueError(f"{count} partitions of {chunk_interval_s} s for [{start}, {end}): more than "
                         f"{MAX_PARTITIONS}; use a longer chunk_interval_s")
    return [(first + i * step, first + (i + 1) * step) for i in range(count)]


def schema_sql(layout: str, start: datetime, end: datetime, chunk_interval_s: int, timescale: str | None = None,
               *, table: str = "cpu", unlogged: bool = False, indexes: bool = True) -> list[str]:
    """Statements that create ``table`` (TSBS's cpu table) in ``layout`` for data in [start, end).

    ``timescale``: the installed TimescaleDB version, needed by ``hypertable`` (the call differs by
    version). ``unlogged``: the table (or, partitioned, each partition) UNLOGGED. ``tags`` is made by
    ``load_tags``, once.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")
    if isinstance(chunk_interval_s, bool) or not isinstance(chunk_interval_s, int) or chunk_interval_s < 1:
        raise ValueError(f"chunk_interval_s must be a positive integer, not {chunk_interval_s!r}")
    check_table(table)
    kind = "UNLOGGED TABLE" if unlogged else "TABLE"
    idx = index_sql(table) if indexes else []
    if layout == "plain":
        _check_range(start, end)
        return [f"CREATE {kind} {table} ({_cpu_columns()})", *idx]
    if layout == "hypertable":
        if not timescale:
            raise ValueError("layout hypertable needs the installed TimescaleDB version (timescale=...); "
                             "TimescaleDB is not available here: use layout partitioned")
        if unlogged:
            raise ValueError("a TimescaleDB hypertable cannot be UNLOGGED")
        partition_bounds(start, end, chunk_interval_s)
        return [f"CREATE TABLE {table} ({_cpu_columns()})", hypertable_sql(table, chunk_interval_s, timescale), *idx]
    parts = [f"CREATE {kind} {table}_{lo:%Y%m%d_%H%M%S} PARTITION OF {table} "
             f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')"
             for lo, hi in partition_bounds(start, end, chunk_interval_s)]
    return [f"CREATE TABLE {table} ({_cpu_columns()}) PARTITION BY RANGE (time)", *parts, *idx]


def unlogged_table_sql(table: str = "cpu_unlogged", start: datetime | None = None, end: datetime | None = None,
                       indexes: bool = False) -> list[str]:
    """An UNLOGGED plain copy of the cpu table (no WAL, by default no index): what the loader can reach
    when the server does the least, for measuring the loader itself."""
    lo = start or datetime(2016, 1, 1, tzinfo=UTC)
    return schema_sql("plain", lo, end or lo + timedelta(days=1), 86400, table=table, unlogged=True,
                      indexes=indexes)


# -- tags --------------------------------------------------------------------------------------------
def tags_sql() -> list[str]:
    """TSBS's tags table and its two indexes (a unique one on every tag, one on hostname)."""
    cols = ", ".join(f"{c} text" for c in TAG_COLUMNS)
    return [f"CREATE TABLE tags (id serial PRIMARY KEY, {cols})",
            f"CREATE UNIQUE INDEX tags_uniq ON tags ({', '.join(TAG_COLUMNS)})",
            "CREATE INDEX tags_hostname_idx ON tags (hostname)"]


def tags_rows(devices: int, seed: int) -> list[tuple[Any, ...]]:
    """(id, hostname, region, ...) of every device: id i + 1 is ``host_<i>`` (the cpu rows' tags_id), the
    other tags drawn from TSBS's choices with ``PCG64([seed, 1])`` (a stream of its own)."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be at least 1, not {devices!r}")
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    names = list(REGIONS)
    region = rng.integers(0, len(names), devices)
    dc = rng.random(devices)
    draws = {name: rng.integers(0, n, devices) for name, n in (
        ("rack", RACKS), ("os", len(OS_CHOICES)), ("arch", len(ARCH_CHOICES)), ("team", len(TEAM_CHOICES)),
        ("service", SERVICES), ("service_version", SERVICE_VERSIONS), ("env", len(ENVIRONMENT_CHOICES)))}
    rows = []
    for i in range(devices):  # once per device (not per row), before the load
        r = names[region[i]]
        rows.append((i + 1, f"host_{i}", r, REGIONS[r][int(dc[i] * len(REGIONS[r]))], str(draws["rack"][i]),
                     OS_CHOICES[draws["os"][i]], ARCH_CHOICES[draws["arch"][i]], TEAM_CHOICES[draws["team"][i]],
                     str(draws["service"][i]), str(draws["service_version"][i]),
                     ENVIRONMENT_CHOICES[draws["env"][i]]))
    return rows


def load_tags(conn: Any, devices: int, seed: int) -> int:
    """(Re)create ``tags`` with every device's row in one transaction; returns the rows written."""
    rows = tags_rows(devices, seed)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS tags")
        for stmt in tags_sql():
            cur.execute(stmt)
        with cur.copy(f"COPY tags (id, {', '.join(TAG_COLUMNS)}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        cur.execute("SELECT setval(pg_get_serial_sequence('tags', 'id'), %s)", (devices,))
    return len(rows)


def timescale_available(conn: Any) -> str | None:
    """TimescaleDB's default version when the server can ``CREATE EXTENSION timescaledb``; None otherwise."""
    with conn.cursor() as cur:
        cur.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'timescaledb'")
        row = cur.fetchone()
    return str(row[0]) if row and row[0] else None


def params_with_rows(conn: Any, qtype: str, devices: int, start: datetime, end: datetime, seed: int,
                     tries: int = 50) -> dict[str, Any]:
    """``draw_params`` with seed, seed + 1... until the query returns rows on ``conn`` (a host whose usage
    never passes 90 in its window gives ``high-cpu-1`` nothing); deterministic for the same data."""
    params: dict[str, Any] = {}
    for i in range(tries):
        params = draw_params(qtype, devices, start, end, seed + i)
        sql, args = query_sql(qtype, params)
        with conn.cursor() as cur:
            cur.execute(sql, args)
            if cur.fetchone() is not None:
                return {**params, "seed": seed + i}
    return {**params, "seed": seed + tries - 1}


# -- the program ---------------------------------------------------------------------------------------
def _time(text: str) -> datetime:
    t = datetime.fromisoformat(text)
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pglab.workloads.tsbs",
                                description="TSBS cpu-only loader (connects through libpq's environment)")
    sub = p.add_subparsers(dest="command", required=True)
    ld = sub.add_parser("load", help="load the seeded cpu rows (or time the generator alone)")
    ld.add_argument("--devices", type=int, required=True)
    ld.add_argument("--start", type=_time, required=True, help="ISO time of the first row (no zone: UTC)")
    ld.add_argument("--duration-s", type=int, required=True, help="simulated seconds: one row per device per interval")
    ld.add_argument("--interval-s", type=int, default=10)
    ld.add_argument("--batch", type=int, required=True, help="rows per COPY (one transaction each)")
    ld.add_argument("--clients", type=int, default=1)
    ld.add_argument("--seed", type=int, default=1)
    ld.add_argument("--table", default="cpu")
    ld.add_argument("--out", type=Path, required=True, help="folder for batches.csv and summary.json")
    ld.add_argument("--set-local", action="append", default=[], metavar="NAME=VALUE",
                    help="SET LOCAL in every transaction (repeatable), e.g. synchronous_commit=local")
    ld.add_argument("--timeout-s", type=float, default=300.0, help="limit of one BEGIN, COPY or COMMIT")
    ld.add_argument("--generate-only", action="store_true", help="time the generator alone (no connection)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.generate_only:
            s = generate_only(devices=args.devices, start=args.start, duration_s=args.duration_s,
                              interval_s=args.interval_s, batch=args.batch, seed=args.seed, out=args.out)
            print(f"tsbs generate: {s['rows']} rows ({s['rows'] * len(METRICS)} metrics) in {s['generate_s']:.3f} s "
                  f"= {s['rows_per_s']:,.0f} rows/s ({s['mb_per_s']:.0f} MB/s of binary COPY), batch {args.batch}")
            return 0
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        s = load(None, devices=args.devices, start=args.start, duration_s=args.duration_s,
                 interval_s=args.interval_s, batch=args.batch, clients=args.clients, seed=args.seed,
                 out=args.out, table=args.table, set_local=args.set_local, timeout_s=args.timeout_s, stop=stop)
    except ValueError as exc:
        print(f"tsbs load: {exc}", file=sys.stderr)
        return 2
    except LoadError as exc:
        s = exc.summary
        print(f"tsbs load: FAILED: {exc}\ntsbs load: {s['rows']} of {s['rows_expected']} rows committed in "
              f"{s['batches']} batches; {s['error_count']} error(s); partial results in {args.out}",
              file=sys.stderr)
        return 1
    print(f"tsbs load: {s['rows']} rows ({s['metrics']} metrics) in {s['seconds']:.3f} s = "
          f"{s['rows_per_s']:,.0f} rows/s ({s['metrics_per_s']:,.0f} metrics/s), {s['clients']} clients, "
          f"batch {s['batch']}, commit p50 {s['commit_p50_ms']} ms p99 {s['commit_p99_ms']} ms")
    return 0

