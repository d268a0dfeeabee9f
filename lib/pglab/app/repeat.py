"""``pglab collect STUDY --repeat N``: a campaign of N runs for this once (the profile's ``runs`` set to N), and
the run-to-run spread.

Kept out of ``pglab.app.collect``: that module's imports are exactly a DVC collect stage's deps, and analysing is no
part of what a stage runs. The runs are measured and published as any campaign (``pglab.app.collect``: every run
archived, the campaign published whole to ``data/raw/<study>`` only when every run may be published, each run with a
seed drawn for it). Each run is then analysed into ``data/repeats/<study>/<first run id>/<run-id>/``, and
``spread.csv`` there sets them side by side (``pglab.app.spread``); ``pglab analyze`` decides over the runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pglab.app import spread
from pglab.app.collect import collect_campaign, load_params
from pglab.app.paths import output_dir
from pglab.errors import UserError
from pglab.runs.reading import load_manifest


def check_arguments(a: argparse.Namespace) -> None:
    """What ``--repeat`` cannot do, refused before parameters are even read."""
    if a.repeat < 1:
        raise UserError(f"--repeat {a.repeat}: the number of runs must be at least 1")
    if a.resume is not None and a.repeat > 1:
        raise UserError("--resume continues one run; it cannot be combined with --repeat "
                        f"{a.repeat} (resume it first, then `pglab spread {a.study} RUN ...` over the runs)")


def collect_repeated(a: argparse.Namespace) -> int:
    """The campaign measured and published (``collect_campaign``), then each run that ended analysed and the spread
    over them written. Exit as the campaign's: 3 when a run ended partial and ``--accept-failed`` was not given."""
    check_arguments(a)
    name, p, inventory = load_params(a.study, a.params, a.profile, a.inventory)
    code, runs = collect_campaign(a, name, p.model_copy(update={"runs": a.repeat}), inventory)
    usable = [r for r in runs if load_manifest(r).get("status") in spread.USABLE]
    if usable:
        out = output_dir(Path(a.data_root) / "repeats" / a.study / spread.label(usable[0]), "the spread's folder")
        spread.write(a.study, usable, spread.analyse(a.study, usable, out, a.reference, a.data_root), out)
    return code
