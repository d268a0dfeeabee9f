"""How fast the TSBS loader is: the generator alone, and the loader into an UNLOGGED table without indexes.

Why: the streaming_scale_out study divides insert rates of replication modes; that only measures the
server if the loader can go much faster than any mode. Goal: the loader's rate into an UNLOGGED table
without indexes (the least the server can do per row) is at least 3x the slowest replication mode's insert
rate. The slowest mode is not known before the study runs, but every mode does at least what ``none``
does (a logged table with the three indexes, commits flushed locally, no standby), so the goal is checked
against that rate, measured here too: it bounds every mode's rate from above.

A throwaway PostgreSQL 15 on this machine (as the server user, a free port, never 5432), stopped with
pg_ctl at the end. Default: 200 devices x 2 simulated hours (144,000 rows, the quick profile's load),
batch 1000, 4 clients, best of 3. Run from the project root::

    .venv/bin/python bench/tsbs_loader.py
    .venv/bin/python bench/tsbs_loader.py --devices 400 --duration-s 7200 --clients 8 --repeat 5
    .venv/bin/python bench/tsbs_loader.py --tiny      # seconds: does the script still work?

Prints the figures; exit 0 (1 only if the server cannot be started or a load fails).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pglab.hosts.local import LocalHost
from pglab.nodes.node import Node
from pglab.nodes.workspace import Workspace
from pglab.workloads import tsbs
from tiny import parse

BINDIR = "/usr/lib/postgresql/15/bin"
DB = "tsbs"
START = datetime(2016, 1, 1, tzinfo=UTC)
GOAL = 3.0
SETTINGS = {"max_connections": 40, "max_wal_size": "4GB", "checkpoint_timeout": "30min", "shared_buffers": "256MB"}


def say(text: str) -> None:
    print(text, flush=True)


def best_load(node: Node, table: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The fastest of ``repeat`` loads into ``table`` (emptied and checkpointed before each); CPU of this process."""
    best: dict[str, Any] = {}
    for i in range(args.repeat):
        node.query(f"truncate {table}", dbname=DB)
        node.query("checkpoint")
        cpu = time.process_time()
        s = tsbs.load({**node.pg_env(), "PGDATABASE": DB}, devices=args.devices, start=START,
                      duration_s=args.duration_s, interval_s=10, batch=args.batch, clients=args.clients, seed=1,
                      table=table, out=out / f"{table}-{i}")
        s["loader_cpu_s"] = time.process_time() - cpu
        if not best or s["rows_per_s"] > best["rows_per_s"]:
            best = s
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--duration-s", type=int, default=7200)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = parse(ap, argv, devices=10, duration_s=600, batch=100, clients=2, repeat=1)
    rows = tsbs.total_rows(args.devices, args.duration_s, 10)
    say(f"TSBS cpu-only: {args.devices} devices x {args.duration_s} s / 10 s = {rows:,} rows "
        f"({rows * 10:,} metrics), batch {args.batch}, {args.clients} clients, best of {args.repeat}")

    gen = max((tsbs.generate_only(devices=args.devices, start=START, duration_s=args.duration_s, batch=args.batch,
                                  seed=1) for _ in range(args.repeat)), key=lambda s: s["rows_per_s"])
    say(f"generator alone (binary COPY buffers, no connection): {gen['rows_per_s']:>12,.0f} rows/s "
        f"({gen['metrics_per_s']:,.0f} metrics/s, {gen['mb_per_s']:.0f} MB/s)")

    host = LocalHost()
    ws = Workspace.create(host)
    node = Node(ws, "bench", host.free_port(), BINDIR)
    try:
        node.init(SETTINGS)
        node.start()
        node.query(f"create database {DB}")
        end = START + timedelta(seconds=args.duration_s)
        with node.connect(DB) as conn:
            tsbs.load_tags(conn, args.devices, 1)
            for stmt in [*tsbs.unlogged_table_sql("cpu_unlogged", START, end),
                         *tsbs.schema_sql("plain", START, end, 3600)]:
                conn.execute(stmt)
        with tempfile.TemporaryDirectory(prefix="pglab-bench-tsbs-") as tmp:
            fast = best_load(node, "cpu_unlogged", args, Path(tmp))
            none = best_load(node, "cpu", args, Path(tmp))
        version = node.query("show server_version")[0][0]
    except Exception as exc:  # noqa: BLE001  (said in one line; the server is stopped below)
        say(f"FAILED: {type(exc).__name__}: {exc}")
        return 1
    finally:
        node.stop()
        ws.remove()
    for label, s in (("loader -> UNLOGGED table, no index", fast),
                     ("loader -> logged table, 3 indexes (mode none)", none)):
        say(f"{label:<46}: {s['rows_per_s']:>12,.0f} rows/s ({s['metrics_per_s']:,.0f} metrics/s) in "
            f"{s['seconds']:.2f} s; commit p50 {s['commit_p50_ms']} ms p99 {s['commit_p99_ms']} ms; "
            f"loader CPU {s['loader_cpu_s']:.2f} s")
    ratio = fast["rows_per_s"] / none["rows_per_s"]
    say(f"PostgreSQL {version}; generator / loader-unlogged = {gen['rows_per_s'] / fast['rows_per_s']:.1f}x")
    say(f"target: the loader's rate must be at least {GOAL:g}x the slowest replication mode's insert rate; "
        f"here {ratio:.1f}x the rate of mode none, which bounds every mode from above: "
        f"{'met' if ratio >= GOAL else 'NOT met on this machine'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
