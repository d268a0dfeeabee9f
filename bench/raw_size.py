"""What a run's raw files cost in git, today and with pgbench's per-transaction logs thinned.

Why: every shipped run's raw files are carried in git (the DVC remote is committed), and nine tenths of
their bytes were ``pgbench -l`` logs that only latency percentiles read. Collect now keeps, per point
folder, a latency histogram and a 1-in-100 sample instead (``pglab.workloads.txlog_thin``). For every
study with a run under ``data/raw/<study>`` (``dvc pull`` fetches the shipped runs) or ``--data-root``,
this script prints the bytes of its raw files as they are and as they would be thinned (the log folders
converted in a temporary copy, each point's meta given its ``txlog_kept`` record), each also compressed
with zlib at level 6 as git stores a blob: an estimate of how much one run adds to the git pack (git's
delta compression and DVC's deduplication of identical files can only make it smaller). The goal: a
re-collect of all five studies with 3 runs each adds at most 60 MB.

Run from the project root::

    .venv/bin/python bench/raw_size.py
    .venv/bin/python bench/raw_size.py --tiny      # a few point folders per study: does it still work?

Exit code 1 when the goal is missed (not judged with --tiny or --points); 2 when there is no run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from pglab.app.paths import repo_root
from pglab.studies import STUDIES
from pglab.workloads import txlog_thin
from tiny import parse

GOAL_MB = 60.0
RUNS = 3
MB = 1e6


@dataclass
class Size:
    """Bytes of some files as they are, and zlib-compressed at level 6 (a git blob)."""

    files: int = 0
    raw: int = 0
    packed: int = 0

    def add(self, data: bytes) -> None:
        self.files += 1
        self.raw += len(data)
        self.packed += len(zlib.compress(data, 6))

    def __iadd__(self, other: Size) -> Size:
        self.files, self.raw, self.packed = self.files + other.files, self.raw + other.raw, self.packed + other.packed
        return self


def measure(run: Path, points: int | None, tmp: Path) -> tuple[Size, Size, Size, float, int]:
    """The run's files today, thinned, the logs alone today; seconds spent thinning, bytes of logs thinned.

    ``points``: only the first that many point folders with logs (and every file outside them)."""
    today, thinned, logs = Size(), Size(), Size()
    seconds, log_bytes = 0.0, 0
    with_logs = sorted({d.parent for d in run.glob("*/txlog*") if d.is_dir()})
    skip = set(with_logs[points:]) if points is not None else set()
    for f in sorted(p for p in run.rglob("*") if p.is_file()):
        if skip & set(f.parents):
            continue
        data = f.read_bytes()
        today.add(data)
        if f.parent.name.startswith("txlog") and f.parent.parent.parent == run:  # <point>/txlog*/
            logs.add(data)
        elif not (f.name == "meta.json" and f.parent in with_logs):
            thinned.add(data)
    for point in with_logs:
        if point in skip:
            continue
        meta = json.loads((point / "meta.json").read_text())
        for d in sorted(point.glob("txlog*")):
            copy = tmp / point.name / d.name
            shutil.copytree(d, copy)
            t0 = time.perf_counter()
            kept, record = txlog_thin.thin(copy, sorted(copy.glob("pgbench_log*")))
            seconds += time.perf_counter() - t0
            log_bytes += record.get("log_bytes", 0)
            meta.setdefault("txlog_kept", {})[d.name] = {**record, "thin_s": 0.0}
            if isinstance(meta.get("txlogs"), dict):  # several nodes: txlog_<node>
                meta["txlogs"][d.name.removeprefix("txlog_")] = kept
            else:
                meta["txlogs"] = kept
            for k in kept:
                thinned.add((copy / k).read_bytes())
            shutil.rmtree(copy)
        thinned.add(json.dumps(meta, indent=2, sort_keys=True).encode())
    # DVC's listing of the run (one .dir object: md5 and path per file)
    today.add(json.dumps([{"md5": "0" * 32, "relpath": "x" * 40}] * today.files).encode())
    thinned.add(json.dumps([{"md5": "0" * 32, "relpath": "x" * 40}] * thinned.files).encode())
    return today, thinned, logs, seconds, log_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=str(repo_root() / "data"))
    ap.add_argument("--study", action="append", choices=STUDIES, help="default: every study with a run")
    ap.add_argument("--points", type=int, default=None, help="only this many point folders with logs per study")
    a = parse(ap, argv, points=3)
    total_today, total_thin = Size(), Size()
    seconds, log_bytes, measured = 0.0, 0, 0
    print(f"{'study':<22} {'files':>6} {'raw MB':>8} {'git MB':>8} {'logs MB':>8}   {'thinned: files':>14} "
          f"{'raw MB':>8} {'git MB':>8}")
    for study in a.study or STUDIES:
        run = Path(a.data_root) / "raw" / study  # the shipped run (the pipeline's): what git carries
        if not (run / "manifest.json").exists():
            print(f"{study:<22} no run under {a.data_root} (dvc pull, or pglab collect)")
            continue
        with tempfile.TemporaryDirectory(prefix="pglab-raw-size-") as tmp:
            today, thinned, logs, s, b = measure(run, a.points, Path(tmp))
        total_today += today
        total_thin += thinned
        seconds, log_bytes, measured = seconds + s, log_bytes + b, measured + 1
        print(f"{study:<22} {today.files:>6} {today.raw / MB:>8.1f} {today.packed / MB:>8.1f} {logs.packed / MB:>8.1f}"
              f"   {thinned.files:>14} {thinned.raw / MB:>8.1f} {thinned.packed / MB:>8.1f}")
    if not measured:
        return 2
    print(f"{'all':<22} {total_today.files:>6} {total_today.raw / MB:>8.1f} {total_today.packed / MB:>8.1f} "
          f"{'':>8}   {total_thin.files:>14} {total_thin.raw / MB:>8.1f} {total_thin.packed / MB:>8.1f}")
    if log_bytes:
        rate = log_bytes / MB / max(seconds, 1e-9)
        print(f"thinning: {seconds:.1f} s for {log_bytes / MB:.0f} MB of logs ({rate:.0f} MB/s, gunzipping the stored "
              "logs included; collect thins the plain logs it fetched)")
    print("git MB: zlib level 6 of every file, as git stores a blob (an upper bound of the pack's growth per run)")
    partial = a.points is not None or a.study is not None
    goal = RUNS * total_thin.packed / MB
    verdict = "not judged: only part of the runs" if partial else "PASS" if goal <= GOAL_MB else "FAIL"
    print(f"{RUNS} runs of {'these studies' if partial else 'every study'}: {RUNS * total_today.packed / MB:.1f} MB "
          f"today, {goal:.1f} MB thinned (goal <= {GOAL_MB:.0f} MB): {verdict}")
    return 1 if verdict == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
