"""How long adding 1,000 runs to a SQLite ledger takes, and how large the ledger grows.

Why: the ledger is filled after every run and every analysis (``pglab.ledger.book.add``), and a lab that
has run for a while, or a team merging its machines' ledgers, holds thousands of runs; adding them must
stay a matter of seconds, not something people skip. The runs are the five pipeline runs
(``data/raw/<study>``, analysed in ``data/derived/<study>``: ``dvc pull``) copied under new run ids
(a manifest each in a run folder of its own, in a temporary folder), the studies in turn: 36 to 174 points
and 4 or 5 claims a run, as real runs have. Each is added as a user adds one, ``book.add(ledger, run folder,
analysis folder)``: the manifest checked and read, ``points.csv`` and ``comparison.csv`` parsed, the rows
written, one transaction a run. Then the five reference queries (``pglab.ledger.queries``) are timed on
the full ledger. Goal: at most 30 s for 1,000 runs on a 2-core machine (at another ``--runs``, the time
is scaled to 1,000 runs before it is judged).

Run from the project root::

    .venv/bin/python bench/ledger_add.py
    .venv/bin/python bench/ledger_add.py --runs 5000 --keep /tmp/ledger.sqlite
    .venv/bin/python bench/ledger_add.py --tiny      # 20 runs: does the script still work?

Exit code 1 when the goal is missed; 2 when there is no pipeline run to copy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pglab.app.paths import repo_root
from pglab.ledger import book, queries
from pglab.ledger.backend import Ledger
from pglab.studies import STUDIES
from tiny import parse

GOAL_S = 30.0  # for GOAL_RUNS runs
GOAL_RUNS = 1000
START = datetime(2027, 1, 1, tzinfo=UTC)


def pipeline_runs(data_root: Path, into: Path) -> list[tuple[str, dict[str, Any], Path]]:
    """(study, manifest, analysis folder) of each pipeline run whose analysis is of that very run; the
    analysis's two tables copied into ``into`` (``dvc repro`` may rewrite data/derived meanwhile)."""
    found = []
    for study in STUDIES:
        run, derived = data_root / "raw" / study, data_root / "derived" / study
        try:
            manifest = json.loads((run / "manifest.json").read_text())
            details = json.loads((derived / "details.json").read_text())
        except (OSError, ValueError):
            continue
        if details.get("run_id") != manifest.get("run_id"):
            continue
        (into / study).mkdir(parents=True)
        for table in ("points.csv", "comparison.csv"):
            shutil.copy(derived / table, into / study / table)
        found.append((study, manifest, into / study))
    return found


def run_folders(source: list[tuple[str, dict[str, Any], Path]], n: int, into: Path) -> list[tuple[Path, Path]]:
    """``n`` run folders (a manifest each: all that ``book.add`` reads of a run), the pipeline runs in turn
    under new run ids, one a minute from START; with the analysis folder of each."""
    out = []
    for i in range(n):
        study, manifest, derived = source[i % len(source)]
        start = START + timedelta(minutes=i)
        run_id = f"{start:%Y%m%dT%H%M%SZ}-{i:06x}"
        folder = into / run_id
        folder.mkdir(parents=True)
        try:
            wall = datetime.fromisoformat(manifest["end"]) - datetime.fromisoformat(manifest["start"])
        except (KeyError, TypeError, ValueError):
            wall = timedelta(0)
        (folder / "manifest.json").write_text(json.dumps({**manifest, "run_id": run_id, "start": start.isoformat(),
                                                          "end": (start + wall).isoformat()}))
        out.append((folder, derived))
    return out


def size_on_disk(path: Path) -> int:
    """The ledger file and any journal beside it."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=GOAL_RUNS, help=f"runs to add; default {GOAL_RUNS}")
    ap.add_argument("--data-root", default=str(repo_root() / "data"),
                    help="where data/raw and data/derived are (the pipeline runs: dvc pull)")
    ap.add_argument("--keep", help="copy the ledger here at the end (default: removed with the temporary folder)")
    a = parse(ap, argv, runs=20)
    with tempfile.TemporaryDirectory(prefix="pglab-ledger-bench-") as tmp_s:
        tmp = Path(tmp_s)
        source = pipeline_runs(Path(a.data_root), tmp / "derived")
        if not source:
            print(f"no pipeline run with its analysis under {a.data_root} (dvc pull)")
            return 2
        runs = run_folders(source, a.runs, tmp / "runs")
        path = tmp / "ledger.sqlite"
        with Ledger(str(path)) as ledger:
            t0 = time.perf_counter()
            for run, derived in runs:
                book.add(ledger, run, derived)
            took = time.perf_counter() - t0
            counts = {t: ledger.query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("runs", "points", "claims")}
            asked = {}
            for name in queries.QUERIES:
                q0 = time.perf_counter()
                n_rows = len(queries.answer(ledger, name))
                asked[name] = (time.perf_counter() - q0, n_rows)
        size = size_on_disk(path)
        if a.keep:
            shutil.copy(path, a.keep)
    scaled = took * GOAL_RUNS / a.runs
    ok = scaled <= GOAL_S
    print(f"added {a.runs:,} runs ({', '.join(s for s, _, _ in source)} in turn): {counts['runs']:,} runs, "
          f"{counts['points']:,} points ({counts['points'] / a.runs:.0f} a run), {counts['claims']:,} claims "
          f"({counts['claims'] / a.runs:.1f} a run)")
    print(f"time {took:.1f} s ({1000 * took / a.runs:.1f} ms a run)"
          + (f", {scaled:.1f} s scaled to {GOAL_RUNS:,} runs" if a.runs != GOAL_RUNS else ""))
    print(f"ledger size on disk {size / 2**20:.1f} MiB ({size / a.runs / 1024:.1f} KiB a run)")
    for name, (secs, n_rows) in asked.items():
        print(f"  query {name:<18} {1000 * secs:8.1f} ms, {n_rows} rows")
    print(f"goal: at most {GOAL_S:.0f} s for {GOAL_RUNS:,} runs on a 2-core machine: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
