"""``pglab collect STUDY --repeat N``: the whole run N times, one after the other, and the run-to-run spread.

Kept out of ``pglab.app.collect``: that module's imports are exactly a DVC collect stage's deps, and
repeating (which analyses) is no part of what a stage runs. Each repetition is an ordinary archived run
(its own ``data/runs/<study>/<run-id>/``, nothing overwritten); each is analysed into
``data/repeats/<study>/<first run id>/<run-id>/``, and ``spread.csv`` there sets them side by side
(``pglab.app.spread``). Run i uses the profile's seed plus i - 1. ``data/raw/<study>`` gets the last run
``pglab collect`` would have published, once, at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from pglab.app import exits, spread
from pglab.app.collect import load_params
from pglab.app.paths import output_dir
from pglab.errors import PglabError, UserError
from pglab.runs.reading import load_manifest, not_publishable, pipeline_dir, points_not_ok_summary
from pglab.runs.store import publish
from pglab.studies import module


def check_arguments(a: argparse.Namespace) -> None:
    """What ``--repeat`` cannot do, refused before parameters are even read."""
    if a.repeat < 1:
        raise UserError(f"--repeat {a.repeat}: the number of runs must be at least 1")
    if a.resume is not None and a.repeat > 1:
        raise UserError("--resume continues one run; it cannot be combined with --repeat "
                        f"{a.repeat} (resume it first, then `pglab spread {a.study} RUN ...` over the runs)")


def publishable(run: Path, accept_failed: bool) -> bool:
    """The rule of ``pglab collect``: a complete run, or a partial one with ``--accept-failed``."""
    status = load_manifest(run).get("status")
    return not_publishable(run, status) is None or (status == "partial" and accept_failed)


def collect_repeated(a: argparse.Namespace) -> int:
    """N runs, each analysed as it ends; then the spread over the usable ones and the publishing of the last.

    A run that raises (it could not go on) ends the repetition: the runs before it are still tabulated
    and published as usual, then its error is reported (exit 1). Exit 3 when a run ended partial and
    ``--accept-failed`` was not given, as for one run."""
    check_arguments(a)
    name, p, inventory = load_params(a.study, a.params, a.profile, a.inventory)
    collect = module(a.study, "collect").collect
    runs: list[Path] = []
    frames: dict[str, pd.DataFrame] = {}
    out: Path | None = None
    error: PglabError | None = None
    for i in range(1, a.repeat + 1):
        print(f"pglab: run {i} of {a.repeat} of {a.study} ({name})", file=sys.stderr, flush=True)
        try:
            # a seed of its own (seed, seed + 1...): the spread is then over the point order too, which a
            # run's blocks average out but one seed fixes for all repetitions
            run = collect(p.model_copy(update={"seed": p.seed + i - 1}), data_root=a.data_root, profile=name,
                          inventory=inventory, progress=not a.quiet, resume=_resumed(a))
        except PglabError as exc:
            error = exc
            print(f"pglab: run {i} of {a.repeat} failed; the runs before it are tabulated", file=sys.stderr)
            break
        except KeyboardInterrupt:
            if runs:
                print(f"pglab: interrupted in run {i} of {a.repeat}; the runs that ended: pglab spread {a.study} "
                      + " ".join(spread.label(r) for r in runs), file=sys.stderr)
            raise
        runs.append(run)
        out = out or output_dir(Path(a.data_root) / "repeats" / a.study / spread.label(run), "the spread's folder")
        if publishable(run, a.accept_failed):
            # now: a broken analysis shows at once
            frames.update(spread.analyse(a.study, [run], out, a.reference, a.data_root))
    usable = [r for r in runs if publishable(r, a.accept_failed)]
    for r in runs:
        if r not in usable:
            print(f"pglab: {not_publishable(r, load_manifest(r).get('status'))}; left out of the spread"
                  + (" (pass --accept-failed to count partial runs)" if _status(r) == "partial" else ""),
                  file=sys.stderr)
    if usable and out is not None:
        spread.write(a.study, usable, frames, out)
        dest = pipeline_dir(a.data_root, a.study)
        if _status(usable[-1]) == "partial":
            print(f"pglab: publishing partial run {usable[-1]} as asked (--accept-failed): "
                  f"{points_not_ok_summary(usable[-1])}", file=sys.stderr)
        publish(usable[-1], dest)
        print(f"{len(runs)} run{'s' if len(runs) > 1 else ''} archived in {Path(a.data_root) / 'runs' / a.study}; "
              f"the pipeline's copy is {dest} (run {spread.label(usable[-1])})")
    elif runs:
        print(f"pglab: no run to tabulate; the runs stay in the archive and none was published to "
              f"{pipeline_dir(a.data_root, a.study)}", file=sys.stderr)
    if error is not None:
        raise error
    return 0 if len(usable) == len(runs) else exits.PARTIAL


def _resumed(a: argparse.Namespace) -> Path | None:
    """The run ``--resume`` names (only with ``--repeat 1``), found as ``pglab collect`` finds it."""
    if a.resume is None:
        return None
    from pglab.runs.resume import find

    run = find(a.data_root, a.study, a.resume or None)
    print(f"resuming {run}", file=sys.stderr)
    return run


def _status(run: Path) -> str | None:
    return load_manifest(run).get("status")
