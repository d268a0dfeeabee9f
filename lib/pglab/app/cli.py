"""``pglab``: collect, analyze, compare, spread, ledger, slo, parse, check, cleanup, lab.

User errors (bad parameters, a file that is not tool output) exit 2 with one message and no
traceback; process errors exit 1 and say which command failed.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pglab import exits
from pglab.errors import PglabError, UserError


def collect(a: argparse.Namespace) -> int:
    """``pglab.app.collect.collect``, imported when run: ``pglab parse`` needs none of what it imports."""
    from pglab.app import collect as collect_module

    return collect_module.collect(a)


def cmd_collect(a: argparse.Namespace) -> int:
    """One run (``pglab.app.collect``), or with ``--repeat N`` N whole runs and their spread (``pglab.app.repeat``);
    then each run it made goes into the ledger (its record; ``--repeat`` adds each analysis as it is made)."""
    from pglab.app.ledger_cli import archived
    from pglab.app.paths import YOURS_DATA
    from pglab.ledger.book import record

    if a.publish_root is None and Path(a.data_root) == Path("data"):  # the shipped run in data/raw stays as it is
        a.publish_root = str(YOURS_DATA)
    before = set(archived(Path(a.data_root), a.study))
    try:
        if a.repeat is None:
            return collect(a)
        from pglab.app.repeat import collect_repeated

        return collect_repeated(a)
    finally:  # a failed or interrupted run is a run too: its record says how it ended
        for run in sorted(set(archived(Path(a.data_root), a.study)) - before):
            record(run, data_root=a.data_root)


def _repro() -> Any:
    from pglab.app import repro

    return repro


def cmd_spread(a: argparse.Namespace) -> int:
    from pglab.app.spread import cmd_spread as spread

    return spread(a)


def cmd_analyze(a: argparse.Namespace) -> int:
    """The run folder checked first (``pglab.runs.reading.checked_published``): a run of another study, a manifest,
    meta.json or campaign.json cut short or hand-edited, a campaign's run missing, is refused in one line naming the
    file, before the analysis reads anything else or writes anything."""
    from pglab.app.paths import YOURS_DATA
    from pglab.runs.reading import analysis_run, archive_dir, checked_published, latest_run

    root = Path(a.data_root or YOURS_DATA)
    run = Path(a.run) if a.run else analysis_run(root, a.study)
    if run is None and a.data_root is None:
        run = latest_run(archive_dir("data", a.study))
    if run is None:
        raise UserError(f"no complete run of {a.study} under {root / 'raw' / a.study} or {root / 'runs' / a.study}"
                        + ("" if a.data_root else f" or {archive_dir('data', a.study)}")
                        + ": run `pglab collect` first (`dvc pull` gets the shipped run, in data/raw/, "
                        "which `--data-root data` analyses)")
    checked_published(run, a.study)  # a campaign's record, every run's manifest and metas: refused before any output
    from pglab.app.paths import output_dir

    derived = output_dir(root / "derived" / a.study, "--data-root")  # a file there: refused before analysing
    figures = output_dir(Path(a.figures or root.parent / "figures") / a.study, "--figures")
    from pglab.app.campaign import analyze_any

    result = analyze_any(a.study, run, derived, figures, Path(a.reference))
    from pglab.ledger.book import record

    record(run, derived, data_root=a.data_root or "data")
    print(json.dumps(result.metrics, indent=2))
    print(f"tables: {derived}, figures: {figures}; the report with them: `pglab report {a.study}`", file=sys.stderr)
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    """The differences first; refused (exit 2) unless --allow-mixed, after the facts side by side, then the tables."""
    from pglab.analysis import comparable
    from pglab.runs.reading import load_manifest
    from pglab.views import side_by_side

    runs = [comparable.find_run(a.data_root, r) for r in (a.run_a, a.run_b)]
    manifests = [load_manifest(r) for r in runs]
    for label, run, m in zip("ab", runs, manifests, strict=True):
        print(f"{label}: {run} ({m.get('study')}, run {m.get('run_id')}, {m.get('status')})")
    diffs = comparable.differences(*manifests)
    print(comparable.report(diffs))
    refused = bool(comparable.refused(diffs)) and not a.allow_mixed
    if comparable.refused(diffs) and a.allow_mixed:
        print(f"pglab: {comparable.mixing_message(diffs)}")
    for name, table in side_by_side.side_by_side(*runs, reference_dir=a.reference, effects=not refused).items():
        sources = table.attrs.get("sources")
        print(f"\n{name}" + (f" (a: {sources['a']}; b: {sources['b']})" if sources else "") + ":")
        print(table.to_string(index=False) if len(table) else "(none)")
    if refused:
        comparable.check_comparable(*manifests)  # raises NotComparableError: exit 2, every refused field named
    return 0


def cmd_parse(a: argparse.Namespace) -> int:
    """``json.dumps(..., indent=2)``'s text, written in batches of pieces: an aggregate log's JSON (an object
    per interval, 30 MB for a day) is not held whole, nor as the list of its pieces dumps joins (2.7x less
    memory for such a log)."""
    from itertools import islice

    from pglab.parsers.detect import parse_many

    out = parse_many(a.files)
    pieces = json.JSONEncoder(indent=2).iterencode(out[0] if len(out) == 1 else out)
    while batch := list(islice(pieces, 1 << 16)):
        sys.stdout.write("".join(batch))
    sys.stdout.write("\n")
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    from pglab.app.collect import load_params
    from pglab.hosts import builds, netcheck
    from pglab.hosts.inventory import load_inventory
    from pglab.runs import preflight

    if a.params and len(a.studies) != 1:
        raise UserError("--params names one study's params file: give that one study (`pglab check STUDY "
                        "--params FILE`)")
    inventory = load_inventory(a.inventory)
    problems, hosts = preflight.host_problems(inventory, inventory.hosts)
    try:
        for name, host in hosts.items():
            facts = host.facts()
            bindir = inventory.entry(name).bindir
            version = host.run([f"{bindir}/postgres", "--version"], check=False).stdout.strip()
            print(f"ok   host {name}: {facts.get('cores')} cores, {facts.get('user')}@{facts.get('hostname')}, "
                  f"{version}")
            port = host.free_port(*inventory.entry(name).port_range)
            print(f"ok   host {name}: free port found ({port})")
        # data addresses, and TCP from every host to every other host's data address
        for line in netcheck.check(inventory, hosts):
            if line.ok:
                print(f"ok   {line.text}", flush=True)
            else:
                problems.append(line.text)
    finally:
        for host in hosts.values():
            host.close()
    for tool, path in preflight.local_tools().items():
        print(f"{'ok  ' if path else 'warn'} client {tool}: {path or 'not found'}")
    for build in builds.catalogue().values():  # the servers a profile's `postgres:` (or --postgres) may name
        if builds.present(build):
            print(f"ok   postgres {build.id}: {build.version or builds.server_version(build)} ({build.family} build), "
                  f"{builds.bindir(build)}")
        else:
            print(f"info postgres {build.id}: not fetched (fetched by the first run that names it, or "
                  f"`pglab builds fetch {build.major}`)")
    for study in a.studies:
        try:
            _, p, inv = load_params(study, a.params, a.profile)
            from pglab.studies import module

            skipped = module(study, "collect").check(p, inv) or {}
            preflight.require(preflight.setting_name_problems(p, inv, preflight.builds_named(p)))
            print(f"ok   study {study}: parameters valid, preflight passed")
            for name, reason in skipped.items():
                print(f"warn study {study}: {name} will be skipped: {reason}")
        except PglabError as exc:
            problems.append(str(exc))
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


def cmd_cleanup(a: argparse.Namespace) -> int:
    """One line per action, then a summary; exit 1 when something could not be stopped, 2 when only a manifest
    was unreadable (the other runs are cleaned all the same)."""
    from pglab.hosts.inventory import load_inventory
    from pglab.hosts.lab import cleanup_orphans
    from pglab.runs.leftovers import cleanup_leftovers

    report = cleanup_leftovers(Path(a.data_root), load_inventory(a.inventory), force=a.force,
                               echo=lambda line: print(line, flush=True))
    # after the runs (their hosts may be lab hosts): labs whose owner process is gone; the verdict
    # comes last and covers both
    report.lab_failures = cleanup_orphans(echo=lambda line: print(line, flush=True))
    print(report.summary())
    return report.exit_code


def cmd_lab(a: argparse.Namespace) -> int:
    from pglab.hosts import lab

    if a.lab_command == "up":
        lb = lab.up(a.n, name=a.name, inventory_path=a.inventory, owner_pid=a.owner_pid,
                    echo=lambda line: print(line, flush=True))
        print(f"lab {lb.name}: {len(lb.hosts)} hosts on {lb.subnet} (this machine: {lb.bridge_address} on "
              f"bridge {lb.bridge}), ssh as root with {lb.key_filename}")
        print(f"inventory: {lb.inventory_path}")
        for h in lb.hosts:
            print(f"{h.name}  {h.address}  namespace {h.namespace}  sshd pid {h.sshd_pid}  workdir {h.workdir}")
        return 0
    if a.lab_command == "status":
        st = lab.status(a.name)
        for line in st.lines():
            print(line)
        return 0 if st.healthy else 1
    lab.down(a.name, echo=lambda line: print(line, flush=True))
    return 0


def _add_parse(sub: Any) -> None:
    p = sub.add_parser("parse", help="parse pgbench / sysbench output files into JSON")
    p.add_argument("files", nargs="+", metavar="FILE", help="pgbench or sysbench output, a pgbench log (-l) or "
                   "aggregate log; each one's kind is detected")
    p.set_defaults(func=cmd_parse)


DATA_ROOT_HELP = "the data folder: runs under <data-root>/runs/<study>/, the pipeline's under raw/ (default data)"
REFERENCE_HELP = "the published numbers the claims are judged against (default data/reference)"
INVENTORY_HELP = "host inventory (default params/hosts.yaml; everything on this machine when it is absent)"


def _version() -> str:
    """The installed package's version, and the checkout's commit when there is one."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("pglab")
    except PackageNotFoundError:
        v = "(not installed)"
    head = Path(__file__).resolve().parents[3] / ".git"
    if head.is_dir():
        import subprocess

        res = subprocess.run(["git", "--git-dir", str(head), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
        if res.returncode == 0:
            v += f" (git {res.stdout.strip()})"
    return v


def build_parser(only_parse: bool = False) -> argparse.ArgumentParser:
    """Every command's arguments; ``only_parse``: the parse command's alone, without importing what the
    others need (the collect arguments' module loads the inventory's pydantic models: 0.2 s of a
    ``pglab parse`` that takes 0.5 s on a 256 MB log)."""
    ap = argparse.ArgumentParser(prog="pglab", description="pglab: reproducible PostgreSQL deployment benchmarks "
                                 "(collect, analyze, compare, spread, ledger, emulation, parse, check, cleanup, lab)")
    ap.add_argument("--version", action="version", version=f"pglab {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    if only_parse:
        _add_parse(sub)
        return ap
    from pglab.app.collect import add_arguments
    from pglab.studies import STUDIES

    c = sub.add_parser("collect", help="run a study's measurements into data/runs/<study>/<run-id>/ "
                                       "(kept for good) and copy the run for analysis to yours/data/raw/<study>/ "
                                       "(with --data-root X: X/raw/<study>); the shipped run in data/raw/ is never "
                                       "replaced")
    add_arguments(c)
    c.add_argument("--repeat", type=int, metavar="N", help="a campaign of N runs for this once (the profile's runs "
                   "set to N; each a seed of its own), published together; each run also analysed into "
                   "data/repeats/<study>/<first-run-id>/<run-id>/ with their run-to-run spread (spread.csv there)")
    c.add_argument("--reference", default="data/reference", help="published numbers (with --repeat)")
    c.set_defaults(func=cmd_collect)
    r = sub.add_parser("repro", help="every study (or those named) measured on this machine and reported beside the "
                                     "shipped reference, into yours/ (what `make repro` runs; no tracked file changes)")
    r.add_argument("studies", nargs="*", metavar="STUDY", help=f"studies to run (default: all: {', '.join(STUDIES)})")
    r.add_argument("--profile", help="the profile of every study (default: each params file's `profile:`)")
    r.add_argument("--estimate", action="store_true", help="say what it would cost (time, disk), and stop")
    r.set_defaults(func=lambda a: _repro().cmd_repro(a))
    t = sub.add_parser("report", help="your run of a study (yours/data/raw/<study>) analysed by its notebook into "
                                      "yours/reports/<study>.html, beside the shipped reference")
    t.add_argument("study", choices=STUDIES, help="the study to report")
    t.set_defaults(func=lambda a: _repro().cmd_report(a))
    z = sub.add_parser("analyze", help="derived tables, metrics and figures from a raw run")
    z.add_argument("study", choices=STUDIES, help="the study whose run is analysed")
    z.add_argument("--run", help="raw run folder (default: your newest, yours/data/raw/<study>, else the newest "
                   "complete run archived in data/runs/<study>)")
    z.add_argument("--data-root", help="a data root whose raw/<study> is analysed into its derived/<study> and "
                   "metrics/ (default: yours/data, so the shipped data/ is never written)")
    z.add_argument("--figures", help="where the figures go (<figures>/<study>/; default: figures/ beside the data "
                   "root, yours/figures)")
    z.add_argument("--reference", default="data/reference", help=REFERENCE_HELP)
    z.set_defaults(func=cmd_analyze)
    v = sub.add_parser("compare", help="two runs side by side: host facts, placement, tools, parameters, effects; "
                                       "refused (exit 2) when they differ in what the measurement depends on")
    v.add_argument("run_a", metavar="RUN_A", help="a run folder, or a run id under data/runs/<study>/")
    v.add_argument("run_b", metavar="RUN_B", help="the other run, the same way")
    v.add_argument("--allow-mixed", action="store_true", help="compare runs that differ in host facts, placement, "
                                                              "tool versions or parameters (the output says which)")
    v.add_argument("--data-root", default="data", help=DATA_ROOT_HELP)
    v.add_argument("--reference", default="data/reference", help=REFERENCE_HELP)
    v.set_defaults(func=cmd_compare)
    s = sub.add_parser("spread", help="the run-to-run spread of existing runs of one study (runs of other days "
                                      "too): each analysed, one row per claim with each run's value and verdict, "
                                      "and the verdicts decided over them (verdicts.csv)")
    s.add_argument("study", choices=STUDIES, help="the study the runs belong to")
    s.add_argument("runs", nargs="+", metavar="RUN", help="a run folder, or a run id under data/runs/<study>/")
    s.add_argument("--out", help="where the analyses and spread.csv go (default "
                                 "data/repeats/<study>/<first run's id>)")
    s.add_argument("--allow-mixed", action="store_true", help="runs that `pglab compare` would refuse to compare")
    s.add_argument("--data-root", default="data", help=DATA_ROOT_HELP)
    s.add_argument("--reference", default="data/reference", help=REFERENCE_HELP)
    s.set_defaults(func=cmd_spread)
    _add_parse(sub)
    from pglab.app.ledger_cli import add_parser as add_ledger

    add_ledger(sub, DATA_ROOT_HELP, REFERENCE_HELP)
    from pglab.app.emulation_cli import add_parser as add_emulation

    add_emulation(sub)
    from pglab.app import builds_cli

    builds_cli.add_arguments(sub.add_parser("builds", help="PostgreSQL builds of other majors (13-18): list them, "
                                                           "or fetch them once (a profile's `postgres:` names one)"))
    sub.choices["builds"].set_defaults(func=builds_cli.run)
    from pglab.app import majors

    majors.add_arguments(sub.add_parser("majors", help="one study on PostgreSQL 13 to 18 (the registry's builds), then "
                                                       "its claims x majors page (yours/reports/majors_<study>.html)"))
    sub.choices["majors"].set_defaults(func=majors.run)
    from pglab.app import slo_cli

    slo_cli.add_arguments(sub.add_parser("slo", help="the highest rate each configuration of a study sustains at a "
                                                     "p99 target, searched in every run of a campaign, with an "
                                                     "interval over runs (yours/slo/<study>/<stamp>/report.html)"))
    sub.choices["slo"].set_defaults(func=slo_cli.run)
    sub.add_parser("papermill", help="papermill NOTEBOOK OUTPUT [-p NAME VALUE] [-y YAML]...: a study's notebook run "
                   "with papermill's own options, a refusal or a failed cell said in pglab's one line (no traceback)")
    k = sub.add_parser("check", help="preflight: binaries, hosts, host keys, ports, study parameters")
    k.add_argument("studies", nargs="*", default=list(STUDIES), help="studies to check (default: all five)")
    k.add_argument("--inventory", default="params/hosts.yaml", help=INVENTORY_HELP)
    k.add_argument("--profile", help="the profile to check (default: each params file's `profile:`)")
    k.add_argument("--params", help="the params file to check (one study; default params/<study>.yaml): a "
                                    "target or a variant checked without editing the pipeline's params")
    k.set_defaults(func=cmd_check)
    u = sub.add_parser("cleanup", help="stop servers and processes a killed run left behind (runs under "
                                       "--data-root and every run in the per-user runs index); exit 1 if "
                                       "something could not be stopped, 2 if only a manifest was unreadable")
    u.add_argument("--data-root", default="data", help=DATA_ROOT_HELP)
    u.add_argument("--inventory", default="params/hosts.yaml", help=INVENTORY_HELP)
    u.add_argument("--force", action="store_true", help="also runs whose process still exists")
    u.set_defaults(func=cmd_cleanup)
    b = sub.add_parser("lab", help="a lab of real SSH hosts on this machine: network namespaces in 198.18.0.0/15 "
                                   "on one bridge, one sshd each (needs root)")
    bsub = b.add_subparsers(dest="lab_command", required=True)
    bu = bsub.add_parser("up", help="make (or repair, or grow) a lab of N hosts and write its inventory")
    bu.add_argument("n", type=int, help="number of hosts (lab1..labN)")
    bu.add_argument("--inventory", help="where to write the inventory (default params/lab.yaml, "
                                        "params/lab-NAME.yaml for another --name)")
    bu.add_argument("--owner-pid", type=int, help="`pglab cleanup` removes the lab once this process is gone "
                                                  "(default: none, the lab lives until `pglab lab down`)")
    bs = bsub.add_parser("status", help="each host: namespace, address, sshd, a real SSH login; exit 1 unless healthy")
    bd = bsub.add_parser("down", help="remove the lab: sshds, namespaces, links, keys, state, its inventory")
    for x in (bu, bs, bd):
        x.add_argument("--name", default="lab", help="which lab (default: lab)")
    b.set_defaults(func=cmd_lab)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    program = argv is None  # the process's own command line: it ends when this returns
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["papermill"] and argv[1:2] not in (["-h"], ["--help"]):  # papermill's own options, as it takes them
        from pglab.app import papermill_cli

        return papermill_cli.run(argv[1:])
    args = build_parser(only_parse=argv[:1] == ["parse"]).parse_args(argv)
    code = exits.run(args.func, args)
    if program and args.command == "parse":
        # nothing of a parse needs cleaning up (its files are closed, stdout is flushed at exit whatever the
        # collector does): the interpreter's final collection of every object numpy and llvmlite made
        # would cost 0.03 s of a 0.5 s command
        gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
