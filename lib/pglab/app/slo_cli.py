"""``pglab slo``: the command line of the rate-at-a-latency-target campaign (``pglab.app.slo_campaign``) and its
analysis (``pglab.views.slo_report``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import Field

from pglab.app.paths import YOURS
from pglab.runs.bounds import Checked

ROOT = YOURS / "slo"


class Defaults(Checked):
    """A study's ``slo:`` section in ``params/<study>.yaml``: what ``pglab slo STUDY`` asks when the command line
    does not (the command line wins). Checked like every params model: strict types, unknown keys refused."""

    p99_ms: float | None = Field(default=None, gt=0, le=60_000)
    profile: str = "quick"
    runs: int | None = Field(default=None, ge=1, le=50)
    configs: list[str] | None = None


def defaults(study: str, params_file: str | None = None) -> Defaults | None:
    """The study's ``slo:`` section, validated (ParameterError naming the file and key), or None without one."""
    from pglab.errors import ParameterError
    from pglab.runs.params import load_study_file, validate
    from pglab.userfiles import kind

    path = Path(params_file or f"params/{study}.yaml")
    if not path.exists():
        return None
    section = load_study_file(path).get("slo")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ParameterError(str(path), [f"slo: a YAML {kind(section)} where a mapping (p99_ms, profile, runs, "
                                         "configs) belongs"])
    return validate(Defaults, section, f"{path} (slo)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pglab.app.slo_campaign import PRESETS
    from pglab.app.slo_targets import TARGETS

    p.add_argument("study", nargs="?", choices=sorted(TARGETS), help="the study whose configurations are searched")
    p.add_argument("--p99", type=float, metavar="MS", help="the latency target: p99 at or under MS milliseconds "
                                                           "(default: the slo: section of params/<study>.yaml)")
    p.add_argument("--profile", choices=sorted(PRESETS),
                   help="how long and how fine: smoke (seconds, one run), quick (3 runs, about 2 minutes a "
                        "configuration a run), standard (5 runs, 20 s deciding trials); default: the params "
                        "file's slo.profile, else quick")
    p.add_argument("--params", help="the study's params file whose slo: section gives the defaults "
                                    "(default params/<study>.yaml)")
    p.add_argument("--runs", type=int, help="runs in the campaign (default: the profile's)")
    p.add_argument("--configs", help="comma-separated configurations (default: the study's; synchronous_commit: "
                                     "on,remote_write,local,off; fdw_overhead: local,FDW_local,FDW_external)")
    p.add_argument("--max-trials", type=int, help="each search's budget of trials (default: the profile's); a search "
                                                 "cut short keeps its best rate, marked not confirmed")
    p.add_argument("--seed", type=int, default=0, help="the first run's seed (its configuration order and its "
                                                       "search's confirmation order); run k has seed+k")
    p.add_argument("--out", default=str(ROOT), help=f"where the campaign folder goes (<out>/<study>/<stamp>/; "
                                                    f"default {ROOT})")
    p.add_argument("--ledger", metavar="URL", help="the ledger each run goes into (default: yours, "
                                                   "data/ledger.sqlite, or $PGLAB_LEDGER)")
    p.add_argument("--analyse", metavar="DIR", help="analyse an earlier campaign's folder again (no measuring)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(a: argparse.Namespace) -> int:
    from pglab.app import slo_ledger
    from pglab.app.slo_campaign import check, run_campaign
    from pglab.errors import UserError
    from pglab.ledger.backend import location
    from pglab.views.slo_report import analyse

    if a.analyse:
        folder = Path(a.analyse)
    else:
        given = defaults(a.study, a.params) if a.study else None
        p99 = a.p99 if a.p99 is not None else (given.p99_ms if given else None)
        if not a.study or p99 is None:
            raise UserError("pglab slo: name a study and a target (pglab slo synchronous_commit --p99 20, or an slo: "
                            "section with p99_ms in params/<study>.yaml), or --analyse DIR")
        configs = [c.strip() for c in a.configs.split(",")] if a.configs else (given.configs if given else None)
        profile = a.profile or (given.profile if given else "quick")
        runs = a.runs if a.runs is not None else (given.runs if given else None)
        check(a.study, p99, configs, profile, runs, a.max_trials)
        folder = run_campaign(a.study, p99, root=Path(a.out), profile=profile, runs=runs, configs=configs,
                              seed=a.seed, max_trials=a.max_trials, progress=not a.no_progress)
    found = analyse(folder)
    for line in found["sentences"]:
        print(line)
    added = slo_ledger.record(folder, found["runs"], found["trials"], found["target_ms"], url=a.ledger)
    if added:
        print(f"ledger: {len(added)} run(s) in {location(a.ledger)} (`pglab ledger show RUN`; `pglab ledger "
              "history` draws each rate by run)")
    print(f"campaign: {folder} (page: {folder / 'report.html'})")
    return 0
