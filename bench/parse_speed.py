"""Parsing a pgbench per-transaction log at the speed of the disk: time vs `wc -l`, memory vs file size.

Why: a paper-profile point writes a log of about 1 GB. The first parser kept every row as a list of
strings (72 s and 5 GB for 256 MB); ``pglab.parsers.txlog`` reads it vectorised in chunks and keeps only
the latencies. This script generates a log of ``--size-mb`` (default 256) with realistic lines (16
clients, a few failed and serialization rows), times ``wc -l`` on it (the second of two runs, so the
file is in the page cache for both), times the parser (``merged_percentiles``), and measures the
parser's peak memory in a child process (its ru_maxrss minus that of a child that only imports the
same modules). Goals: parse time / ``wc -l`` time <= 10, peak memory / file size <= 2.

Run from the project root::

    .venv/bin/python bench/parse_speed.py                 # 256 MB in a temporary folder
    .venv/bin/python bench/parse_speed.py --size-mb 1024 --path /tmp/big.log

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

RATIO_GOAL = 10.0
MEMORY_GOAL = 2.0
CHILD = """
import json, resource, sys, time
from pglab.parsers.txlog import merged_percentiles
t0 = time.perf_counter()
out = merged_percentiles([sys.argv[1]]) if sys.argv[2] == "parse" else {}
print(json.dumps({"s": time.perf_counter() - t0, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "n": out.get("n"), "p99": out.get(99)}))
"""


def generate(path: Path, size_mb: int, seed: int = 1) -> None:
    """Lines as pgbench 15 writes them (``client tx time script epoch us``), written in vectorised batches."""
    rng = np.random.default_rng(seed)
    target = size_mb * 1024 * 1024
    epoch, n_tx = 1795266855, 0
    with open(path, "w") as f:
        while f.tell() < target:
            n = 200_000
            client = rng.integers(0, 16, n)
            lat = rng.lognormal(7.5, 0.6, n).astype(np.int64)
            words = np.where(rng.random(n) < 0.001, "serialization", np.where(rng.random(n) < 0.0005, "failed", ""))
            time_field = np.where(words == "", lat.astype(str), words)
            us = rng.integers(0, 1_000_000, n)
            tx = np.arange(n_tx, n_tx + n)
            lines = [f"{c} {t} {tf} 0 {epoch + i // 20000} {u}" for i, (c, t, tf, u)
                     in enumerate(zip(client, tx, time_field, us, strict=True))]
            f.write("\n".join(lines) + "\n")
            n_tx += n


def child(path: Path, mode: str) -> dict:
    res = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--path", help="reuse (or create) this log instead of a temporary one")
    a = ap.parse_args(argv)
    tmp = None
    if a.path:
        path = Path(a.path)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pglab-parse-")
        path = Path(tmp.name) / "pgbench_log.1"
    try:
        if not path.exists() or path.stat().st_size < a.size_mb * 1024 * 1024 * 0.99:
            t0 = time.perf_counter()
            generate(path, a.size_mb)
            print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - t0:.1f} s")
        size = path.stat().st_size
        wc = []
        for _ in range(2):
            t0 = time.perf_counter()
            res = subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True, check=True)
            lines = res.stdout.split()[0]
            wc.append(time.perf_counter() - t0)
        base = child(path, "import")
        parsed = child(path, "parse")
        ratio = parsed["s"] / wc[1]
        peak = (parsed["maxrss_kb"] - base["maxrss_kb"]) * 1024
        mem_ratio = peak / size
        print(f"file: {size / 2**20:.0f} MB, {lines} lines; parsed {parsed['n']} successful transactions, "
              f"p99 {parsed['p99']:.3f} ms")
        print(f"wc -l: {wc[1]:.3f} s (cached); parse: {parsed['s']:.2f} s; ratio {ratio:.1f} (goal <= {RATIO_GOAL:g}): "
              f"{'PASS' if ratio <= RATIO_GOAL else 'FAIL'}")
        print(f"peak memory of the parser: {peak / 2**20:.0f} MB (child ru_maxrss {parsed['maxrss_kb'] / 1024:.0f} MB "
              f"minus {base['maxrss_kb'] / 1024:.0f} MB for the interpreter and imports) = {mem_ratio:.2f} x the file "
              f"(goal <= {MEMORY_GOAL:g}): {'PASS' if mem_ratio <= MEMORY_GOAL else 'FAIL'}")
        return 0 if ratio <= RATIO_GOAL and mem_ratio <= MEMORY_GOAL else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1] / "lib"))
    sys.exit(main())
