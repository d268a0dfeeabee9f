"""How long analysis takes from raw runs, and whether a second analysis gives the same bytes.

Why: analysis must be cheap enough to rerun on every change (``dvc repro`` reruns it whenever a
notebook or the library changes) and deterministic (DVC and git see a changed figure as a change).
For every study with a run under ``data/raw/<study>`` (``dvc pull`` fetches the reference runs) or
the given ``--data-root``, this script analyzes the run twice into temporary folders, prints each
study's time and the total (goal: under 60 s for all studies at the quick profile), and compares every
derived table and figure of the two analyses byte for byte.

Run from the project root::

    .venv/bin/python bench/analyze_speed.py
    .venv/bin/python bench/analyze_speed.py --data-root data --study synchronous_commit
    .venv/bin/python bench/analyze_speed.py --tiny     # one study: does the script still work?

Exit code 1 when the goal is missed or the two analyses differ; 2 when there is no run to analyze.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
import time
from pathlib import Path

from pglab.app.paths import repo_root
from pglab.runs.reading import analysis_run
from pglab.studies import STUDIES, module
from tiny import parse

GOAL_S = 60.0
TINY_STUDY = "cloud_providers"  # the quickest to analyze (about 10 s for both analyses)


def differing(a: Path, b: Path) -> list[str]:
    """Files under ``a`` whose twin under ``b`` is missing or has other bytes."""
    out = []
    for f in sorted(p for p in a.rglob("*") if p.is_file()):
        twin = b / f.relative_to(a)
        if not twin.exists() or not filecmp.cmp(f, twin, shallow=False):
            out.append(str(f.relative_to(a)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=str(repo_root() / "data"))
    ap.add_argument("--study", action="append", choices=STUDIES, help="default: every study with a run")
    a = parse(ap, argv)  # --tiny: only the study below, unless --study names others
    if a.tiny and not a.study:
        a.study = [TINY_STUDY]
    reference = repo_root() / "data" / "reference"
    total, bad, analyzed = 0.0, [], 0
    for study in a.study or STUDIES:
        run = analysis_run(a.data_root, study)
        if run is None:
            print(f"{study:<22} no run under {a.data_root} (dvc pull, or pglab collect)")
            continue
        times = []
        with tempfile.TemporaryDirectory(prefix="pglab-analyze-") as tmp:
            for i in (1, 2):
                t0 = time.perf_counter()
                module(study, "analyze").analyze(run, Path(tmp) / f"d{i}", Path(tmp) / f"f{i}", reference)
                times.append(time.perf_counter() - t0)
            diff = differing(Path(tmp) / "d1", Path(tmp) / "d2") + differing(Path(tmp) / "f1", Path(tmp) / "f2")
        points = sum(1 for _ in run.glob("*/meta.json"))
        total += times[0]
        analyzed += 1
        print(f"{study:<22} {times[0]:6.1f} s first, {times[1]:6.1f} s second, {points} point folders "
              f"({run}); second analysis {'byte-identical' if not diff else 'DIFFERS: ' + ', '.join(diff)}")
        if diff:
            bad.append(study)
    if not analyzed:
        return 2
    ok = total < GOAL_S and not bad
    speed = "PASS" if total < GOAL_S else "FAIL"
    same = "PASS" if not bad else "FAIL (" + ", ".join(bad) + ")"
    print(f"total {total:.1f} s for {analyzed} studies (goal < {GOAL_S:.0f} s): {speed}; deterministic: {same}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
