"""``pglab slo``: the command line of the rate-at-a-latency-target campaign (``pglab.app.slo_campaign``) and its
analysis (``pglab.app.slo_report``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pglab.app.paths import YOURS

ROOT = YOURS / "slo"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pglab.app.slo_campaign import PRESETS
    from pglab.app.slo_targets import TARGETS

    p.add_argument("study", nargs="?", choices=sorted(TARGETS), help="the study whose configurations are searched")
    p.add_argument("--p99", type=float, metavar="MS", help="the latency target: p99 at or under MS milliseconds")
    p.add_argument("--profile", default="quick", choices=sorted(PRESETS),
                   help="how long and how fine: smoke (seconds, one run), quick (3 runs, about 2 minutes a "
                        "configuration a run), standard (5 runs, 20 s deciding trials); default quick")
    p.add_argument("--runs", type=int, help="runs in the campaign (default: the profile's)")
    p.add_argument("--configs", help="comma-separated configurations (default: the study's; synchronous_commit: "
                                     "on,remote_write,local,off; fdw_overhead: local,FDW_local,FDW_external,"
                                     "FDW_ext_ro)")
    p.add_argument("--max-trials", type=int, help="each search's budget of trials (default: the profile's); a search "
                                                 "cut short keeps its best rate, marked not confirmed")
    p.add_argument("--seed", type=int, default=0, help="the first run's seed (its configuration order and its "
                                                       "search's confirmation order); run k has seed+k")
    p.add_argument("--out", default=str(ROOT), help=f"where the campaign folder goes (<out>/<study>/<stamp>/; "
                                                    f"default {ROOT})")
    p.add_argument("--analyse", metavar="DIR", help="analyse an earlier campaign's folder again (no measuring)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(a: argparse.Namespace) -> int:
    from pglab.app.slo_campaign import check, run_campaign
    from pglab.app.slo_report import analyse
    from pglab.errors import UserError

    if a.analyse:
        folder = Path(a.analyse)
    else:
        if not a.study or a.p99 is None:
            raise UserError("pglab slo: name a study and a target (pglab slo synchronous_commit --p99 20), or "
                            "--analyse DIR")
        configs = [c.strip() for c in a.configs.split(",")] if a.configs else None
        check(a.study, a.p99, configs, a.profile, a.runs, a.max_trials)
        folder = run_campaign(a.study, a.p99, root=Path(a.out), profile=a.profile, runs=a.runs, configs=configs,
                              seed=a.seed, max_trials=a.max_trials, progress=not a.no_progress)
    found = analyse(folder)
    for line in found["sentences"]:
        print(line)
    print(f"campaign: {folder} (page: {folder / 'report.html'})")
    return 0
