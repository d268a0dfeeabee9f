"""Parsing a pgbench per-transaction log at the speed of the disk: time vs `wc -l`, memory vs file size.

Why: a paper-profile point writes logs of about 1 GB. The first parser kept every row as a list of
strings (72 s and 5 GB for 256 MB); ``parse_transaction_log_file`` reads the log in chunks through
a compiled loop (numba, every core; pyarrow's reader for what the loop refuses) and keeps only counters
and the successful latencies. This script generates a log of ``--size-mb``
(default 256) with lines as pgbench 15 writes them (``client tx time script epoch us``, 8 clients by
default, a few ``serialization`` and ``failed`` rows), times ``wc -l`` on it (a first run puts the file
in the page cache, the best of the next ``--repeat`` is used), then runs the parser in child processes:

- ``parse_transaction_log_file``: the full parse (every field checked, every figure of the dict),
- ``merged_percentiles``: the latencies only (``transaction_latencies_ms``), what merged percentiles
  over many logs need.

Time is the call itself, after the imports and the loading of the compiled loop (printed apart: numba
compiles it once per machine and caches it beside the module), best of ``--repeat``. Peak memory is the child's peak
resident set (``VmHWM`` of /proc/self/status, read by the child at its end) minus that of a child that
only imports the same modules (Python, numpy and pyarrow take ~65 MB before reading anything). Not
``ru_maxrss`` (``RUSAGE_CHILDREN`` or ``wait4``): on Linux a child's ru_maxrss starts from the RSS its
parent had when it forked (exec keeps that maximum), and this script holds a few hundred MB after
generating the log. Goals: parse time / ``wc -l`` time <= 10, peak memory / file size <= 2.

Run from the project root::

    .venv/bin/python bench/parse_speed.py                 # 256 MB in a temporary folder
    .venv/bin/python bench/parse_speed.py --size-mb 1024 --path /tmp/big.log --repeat 5
    .venv/bin/python bench/parse_speed.py --tiny          # seconds: does the script still work?

Exit code 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
from tiny import parse

LIB = Path(__file__).resolve().parents[1] / "lib"
RATIO_GOAL = 10.0
MEMORY_GOAL = 2.0
# the child: the same imports in every mode (the parser imports pyarrow on first use: imported here
# so that neither the time nor the baseline's memory depend on it), then one call, timed
CHILD = """
import json, re, sys, time
import numpy, pyarrow, pyarrow.compute, pyarrow.csv
from pglab.parsers.txlog import merged_percentiles, parse_transaction_log_file
from pglab.parsers import txlog_kernel
path, mode = sys.argv[1], sys.argv[2]
t_load = time.perf_counter()
compiled = txlog_kernel.available()  # numba's import and the loop, from its on-disk cache after the first run
t_load = time.perf_counter() - t_load
t0 = time.perf_counter()
if mode == "parse":
    r = parse_transaction_log_file(path)
    out = {"n": r["transactions"], "failed": r["failed"], "p99": r["p99_ms"], "clients": r["clients"]}
elif mode == "latencies":
    r = merged_percentiles([path])
    out = {"n": r["n"], "p99": r[99]}
else:
    out = {}
out["s"] = time.perf_counter() - t0
out["load_s"], out["compiled"] = t_load, compiled
out["peak_kb"] = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps(out))
"""


def generate(path: Path, size_mb: int, clients: int = 8, seed: int = 1) -> None:
    """Lines as pgbench 15 writes them in one thread's log, in completion order, written by pyarrow.

    ``client_id``: 0..clients-1; ``transaction_no``: each client's own counter; ``time``: lognormal
    latency in us (median ~1.8 ms), or ``serialization`` (0.1%) / ``failed`` (0.05%); ``script_no`` 0;
    ``time_epoch time_us``: completion times, increasing, ``clients`` transactions in flight.
    """
    rng = np.random.default_rng(seed)
    target = size_mb * 1024 * 1024
    done = np.zeros(clients, dtype=np.int64)  # transactions per client so far
    now_us = 1795266855 * 1_000_000
    options = pv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    with open(path, "wb") as f:
        while f.tell() < target:
            n = 500_000
            client = rng.integers(0, clients, n)
            counts = np.bincount(client, minlength=clients)
            order = np.argsort(client, kind="stable")
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
            tx = done[client] + rank
            done += counts
            lat = rng.lognormal(7.5, 0.6, n).astype(np.int64)
            u = rng.random(n)
            time_col = pc.if_else(pa.array(u < 0.001), "serialization",
                                  pc.if_else(pa.array(u < 0.0015), "failed", pc.cast(pa.array(lat), pa.string())))
            ends = now_us + np.cumsum(rng.exponential(lat.mean() / clients, n)).astype(np.int64)
            now_us = int(ends[-1])
            table = pa.table({"client": client, "tx": tx, "time": time_col, "script": np.zeros(n, dtype=np.int64),
                              "epoch": ends // 1_000_000, "us": ends % 1_000_000})
            pv.write_csv(table, f, write_options=options)


def child(path: Path, mode: str) -> dict:
    """Run the parser in a fresh interpreter: its time, figures and peak RSS (``peak_kb``), as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(LIB), os.environ.get("PYTHONPATH")]))}
    res = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], stdout=subprocess.PIPE, text=True, env=env)
    if res.returncode:
        raise SystemExit(f"the {mode} child failed (exit {res.returncode})")
    return json.loads(res.stdout)


def wc_seconds(path: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, res.stdout.split()[0]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--clients", type=int, default=8, help="client ids in the log (pgbench -c per thread)")
    ap.add_argument("--path", help="reuse (or create) this log instead of a temporary one")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of wc and of each parser; the best counts")
    a = parse(ap, argv, size_mb=2, repeat=1)
    tmp = None
    if a.path:
        path = Path(a.path)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pglab-parse-")
        path = Path(tmp.name) / "pgbench_log.12345"
    try:
        if not path.exists() or path.stat().st_size < a.size_mb * 1024 * 1024:
            t0 = time.perf_counter()
            generate(path, a.size_mb, a.clients)
            print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - t0:.1f} s")
        size = path.stat().st_size
        wc_seconds(path)  # page cache
        wc_runs = [wc_seconds(path) for _ in range(a.repeat)]
        wc, lines = min(s for s, _ in wc_runs), wc_runs[0][1]
        print(f"file: {path} {size / 2**20:.0f} MB, {lines} lines")
        print(f"wc -l (cached): {wc:.3f} s, best of {' '.join(f'{s:.3f}' for s, _ in wc_runs)}")
        base = child(path, "import")
        print(f"baseline child (Python, numpy, pyarrow, numba and the compiled loop loaded, nothing read): "
              f"peak RSS {base['peak_kb'] / 1024:.0f} MB; loading took {base['load_s']:.2f} s "
              f"(not in the times below); compiled loop {'in use' if base['compiled'] else 'MISSING (numba)'}")
        ok = True
        for mode, name in (("parse", "parse_transaction_log_file (full parse)"),
                           ("latencies", "merged_percentiles (latencies only)")):
            runs = [child(path, mode) for _ in range(a.repeat)]
            best = min(r["s"] for r in runs)
            peak_kb = max(r["peak_kb"] for r in runs)
            ratio = best / wc
            peak = (peak_kb - base["peak_kb"]) * 1024
            mem_ratio = peak / size
            extra = f", {runs[0]['failed']} failed, {runs[0]['clients']} clients" if mode == "parse" else ""
            print(f"{name}: {runs[0]['n']} successful transactions{extra}, p99 {runs[0]['p99']:.3f} ms")
            times = " ".join(f"{r['s']:.2f}" for r in runs)
            print(f"  time: {best:.2f} s (best of {times}) = {ratio:.1f} x wc -l "
                  f"(goal <= {RATIO_GOAL:g}): {verdict(ratio <= RATIO_GOAL)}")
            print(f"  peak memory: {peak / 2**20:.0f} MB = child peak RSS {peak_kb / 1024:.0f} MB minus the baseline "
                  f"{base['peak_kb'] / 1024:.0f} MB; {mem_ratio:.2f} x the file, raw {peak_kb * 1024 / size:.2f} x "
                  f"(goal <= {MEMORY_GOAL:g}): {verdict(mem_ratio <= MEMORY_GOAL)}")
            ok = ok and ratio <= RATIO_GOAL and mem_ratio <= MEMORY_GOAL
        return 0 if ok else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
