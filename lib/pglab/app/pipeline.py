"""``python -m pglab.app.pipeline [--check]``: dvc.yaml, written from the studies' declarations and the import graph.

Why generated: every study had about fourteen hand-padded lines of deps per stage, its tables and figures, its
plot and its share of the last three stages' deps in dvc.yaml, each to be kept exactly in step with the code.
Now a stage's ``lib/`` deps are computed: the closure of the modules its command imports
(``pglab.app.modgraph``), plus what it loads through the studies' registry (``STAGES`` says which parts).
The studies come from ``pglab.studies.STUDIES``, their tables, figures and plots from their declarations, and
the params a collect stage tracks from its params file: ``profile``, ``inventory`` and the active profile
(``profiles.<profile>``), so that an edit to another profile re-measures nothing.

The collect and analyze stages stay ``foreach`` stages, because only ``foreach`` makes the names
``collect@<study>`` that dvc.lock holds (DVC refuses ``@`` in a plain stage's name), and ``foreach`` cannot
interpolate a list: so each study's item carries what it needs beyond every study's (``lib1``..., ``table1``...),
padded to one count with a file it lists anyway (DVC keeps one copy of a repeated dep or output).

``--check`` compares dvc.yaml with what this writes (tests/test_dvc_deps.py); after a change of imports, a
declaration or a profile, run it without ``--check`` and commit dvc.yaml. It writes each ratio plot's template
beside it too (``plot_templates``: the reports' colours and names in ``dvc plots show``).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from pglab.analysis import over_runs
from pglab.app import plot_templates
from pglab.app.modgraph import LIB, closure, layer_of, source_imports
from pglab.runs import campaign
from pglab.runs.params import load_study_file
from pglab.studies import COMMON_TABLES, STUDIES, declaration

ROOT = LIB.parent
KEY = "${key}"


@dataclass(frozen=True)
class Runs:
    """What a stage's commands import: modules by name, parts of its own study and of every study loaded through
    the registry (``pglab.studies.module``: an import by string, invisible to the import graph)."""

    modules: tuple[str, ...]
    parts: tuple[str, ...] = ()
    every_study: tuple[str, ...] = ()
    notebook: bool = False  # the study's notebook (papermill runs it): its imports too


STAGES = {
    # `python -m pglab.app.collect <study>` loads the study's params model and runs its collect module
    "collect": Runs(("pglab.app.collect",), parts=("params", "collect")),
    # `python -m pglab.app.notebook_run <study>`: papermill runs the notebook (pglab.app.notebook: the study's params
    # and analyze modules), then pglab.views.report writes its report with the study's question
    "analyze": Runs(("pglab.app.notebook_run",), parts=("params", "analyze", "declaration"), notebook=True),
    "history": Runs(("pglab.views.history",), every_study=("declaration",)),  # each study's question
    "report_index": Runs(("pglab.views.report",), every_study=("declaration",)),
}


class _Analysing(ast.NodeTransformer):
    """A notebook as its analyze stage runs it (``-p collect False``): without the branch that measures,
    ``if notebook.collecting(...):``, whose imports (the host and node layers) the analysis must not depend on."""

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:  # noqa: N802 (ast's name)
        calls = [n for n in ast.walk(node.test) if isinstance(n, ast.Call)]
        if any(getattr(c.func, "attr", getattr(c.func, "id", "")) == "collecting" for c in calls):
            return node.orelse
        return self.generic_visit(node)


def notebook_imports(study: str) -> set[str]:
    """The pglab modules the code cells of notebooks/<study>.ipynb import when it analyses only (IPython's % and !
    lines left out)."""
    nb = json.loads((ROOT / "notebooks" / f"{study}.ipynb").read_text())
    code = "\n".join("".join(line for line in c["source"] if not line.lstrip().startswith(("%", "!")))
                     for c in nb["cells"] if c["cell_type"] == "code")
    return source_imports(ast.unparse(_Analysing().visit(ast.parse(code))), "")


def stage_files(stage: str, study: str | None = None) -> set[Path]:
    """The files of every pglab module ``stage`` (of ``study``) runs."""
    runs = STAGES[stage]
    roots = [*runs.modules, *(f"pglab.studies.{s}.{p}" for s in STUDIES for p in runs.every_study)]
    if study is not None:
        roots += [f"pglab.studies.{study}.{p}" for p in runs.parts]
        roots += sorted(notebook_imports(study)) if runs.notebook else []
    return closure(*roots)


def _order(path: str) -> tuple[int, str]:
    return layer_of(ROOT / path), path.replace(KEY, "~")  # a study's own files after the registry


def listed(files: set[Path]) -> list[str]:
    """``files`` as dvc.yaml deps, bottom layer first. Never a folder for its files: a folder would stand for a
    module the stage does not import as soon as one is added to it, and whether a folder could stand for a study's
    files would depend on the other studies (adding one would rewrite, and re-run, the others' stages)."""
    return sorted((f.relative_to(ROOT).as_posix() for f in files), key=_order)


def templated(paths: Iterable[str], study: str) -> list[str]:
    own = f"lib/pglab/studies/{study}/"
    return [p.replace(own, f"lib/pglab/studies/{KEY}/", 1) for p in paths]


def per_study(stage: str) -> tuple[list[str], dict[str, list[str]]]:
    """(the deps every study's ``stage`` lists, written with ``${key}``; the real paths each lists beyond them)."""
    per = {s: templated(listed(stage_files(stage, s)), s) for s in STUDIES}
    common = set.intersection(*(set(v) for v in per.values())) if per else set()
    return (sorted(common, key=_order),
            {s: [p.replace(KEY, s) for p in v if p not in common] for s, v in per.items()})


def q(value: str) -> str:
    """A YAML scalar: plain when it reads back as itself, else double-quoted."""
    plain = (value and value[0] not in "-?:,[]{}#&*!|>'\"%@`" and ": " not in value and " #" not in value
             and not value.endswith(":") and yaml.safe_load(value) == value)
    return value if plain else json.dumps(value, ensure_ascii=False)


def items(name: str, lists: dict[str, list[str]], pad: dict[str, str]) -> tuple[list[str], dict[str, list[str]]]:
    """Slot names ``name1..nameN`` and each study's values, padded to N with ``pad[study]``."""
    n = max((len(v) for v in lists.values()), default=0)
    return [f"{name}{i}" for i in range(1, n + 1)], {s: v + [pad[s]] * (n - len(v)) for s, v in lists.items()}


def lines(indent: int, entries: Iterable[str], comment: str = "") -> list[str]:
    out = [f"{' ' * indent}- {q(e)}" for e in entries]
    if out and comment:
        out[0] += f"  # {comment}"
    return out


HEADER = """\
# Written by `python -m pglab.app.pipeline` from the studies' declarations (lib/pglab/studies/*/declaration.py),
# their params files and the import graph: do not edit it, run that (tests/test_dvc_deps.py fails while this
# file differs from what it writes).
# collect touches hosts: `python -m pglab.app.collect` (what `pglab collect` runs) archives the new run in
# data/runs/<study>/<run-id>/ (never a DVC output, so no DVC or git command can delete it) and copies
# it to data/raw/<study>/, this stage's output: the run the pipeline analyzes, cached and pushed.
# It tracks only the keys of the params file its run reads: `profile`, `inventory` and the active profile
# (`profiles.<profile>`), so that an edit to another profile re-measures nothing.
# analyze is pure: that run in; tables, metrics, figures and the executed notebook out.
# Each stage's lib/ deps are exactly the modules it imports, no more and no fewer
# (tests/test_dvc_deps.py): an edit to a parser, the lab, the CLI or a figure re-runs no collect stage.
stages:"""
PAD_NOTE = "padding: nothing more"
#: the keys of a study's params file its collect stage tracks: the run reads these and nothing else of it
TRACKED = ("profile", "inventory", "profiles.${item.profile}")


def params_item(path: Path) -> dict[str, str]:
    """What a collect stage's item says of its params file: the active profile and the inventory it names."""
    data = load_study_file(path)
    missing = [k for k in ("profile", "inventory") if k not in data]
    if missing:
        raise SystemExit(f"{path}: add {' and '.join(missing)} (its collect stage tracks them by name)")
    return {"profile": data["profile"], "inventory": data["inventory"]}

FIRST_LOOK = "lib/pglab/workloads/adaptive.py"
#: the flush emulation's C sources (``make setup`` builds them into /usr/local/lib/pglab): a run under an emulated
#: disk measures what they make, so an edit to them re-runs every collect stage, as an edit to its Python does
NATIVE = ("native/pglab_flush.c", "native/flushprobe.c")


def collect_stage() -> list[str]:
    common, extra = per_study("collect")
    slots, values = items("lib", extra, {s: f"lib/pglab/studies/{s}/__init__.py" for s in STUDIES})
    out = ["  collect:",
           "    foreach:  # profile: the params file's active profile; inventory: the host inventory it names;",
           "      # lib1...: what the study's collect imports beyond what every study's does (padded: DVC cannot",
           "      # interpolate a list into deps)"]
    for s in STUDIES:
        item = params_item(ROOT / "params" / f"{s}.yaml")
        look = ("  # its first look (pglab.workloads.adaptive) decides from the claims and the measured window"
                if FIRST_LOOK in values[s] else "")
        out += [f"      {s}:{look}", *(f"        {k}: {q(v)}" for k, v in item.items())]
        out += [f"        {k}: {q(v)}" + (f"  # {PAD_NOTE}" if i == len(extra[s]) else "")
                for i, (k, v) in enumerate(zip(slots, values[s], strict=True))]
    out += ["    do:", f"      cmd: python -m pglab.app.collect {KEY}",
            "      deps:  # exactly the files `python -m pglab.app.collect <study>` imports (tests/test_dvc_deps.py),",
            "        # and the flush emulation's sources (native/: what `make setup` builds and a run may preload)",
            *lines(8, [*common, *(f"${{item.{k}}}" for k in slots), *NATIVE]),
            "      params:", f"        - params/{KEY}.yaml:", *(f"            - {k}" for k in TRACKED),
            "        - ${item.inventory}:",
            "      outs:", f"        - data/raw/{KEY}"]
    return out


#: a study's shipped claims x majors table, which its report shows (``pglab.views.majors_table``)
MAJORS = "data/majors/{study}.csv"


def analyze_stage() -> list[str]:
    common, extra = per_study("analyze")
    slots, values = items("lib", extra, {s: f"lib/pglab/studies/{s}/__init__.py" for s in STUDIES})
    declared = {s: declaration(s) for s in STUDIES}
    tables = {s: list(d.tables) for s, d in declared.items()}
    tslots, tvalues = items("table", tables, {s: (t[0] if t else "details.json") for s, t in tables.items()})
    out = ["  analyze:",
           "    foreach:  # majors: its claims x PostgreSQL majors, where shipped; table1...: the study's own derived",
           "      # tables (or a folder of them), from its declaration;",
           "      # lib1...: what its analysis imports beyond what every study's does (both padded: DVC cannot",
           "      # interpolate a list)"]
    for s in STUDIES:
        out.append(f"      {s}:")
        shipped = (ROOT / MAJORS.format(study=s)).exists()
        out.append(f"        majors: {MAJORS.format(study=s) if shipped else 'data/reference'}"
                   + ("  # its claims x PostgreSQL majors (pglab majors --ship)" if shipped
                      else "  # padding: none shipped"))
        out += [f"        {k}: {q(v)}" + (f"  # {declared[s].tables[v]}" if i < len(tables[s]) else "")
                for i, (k, v) in enumerate(zip(tslots, tvalues[s], strict=True))]
        out += [f"        {k}: {q(v)}" + (f"  # {PAD_NOTE}" if i == len(extra[s]) else "")
                for i, (k, v) in enumerate(zip(slots, values[s], strict=True))]
    derived = f"data/derived/{KEY}"
    outs = [*(f"{derived}/{t}" for t in COMMON_TABLES if t != "details.json"),
            # each run's own verdicts, and their tables (a campaign: pglab.app.campaign; one run: its comparison)
            f"{derived}/{over_runs.RUNS_CSV}", f"{derived}/{campaign.OWN}",
            *(f"{derived}/${{item.{k}}}" for k in tslots), f"figures/{KEY}", f"{derived}/details.json",
            f"reports/{KEY}.ipynb", f"reports/{KEY}.html"]
    out += ["    do:  # papermill runs the notebook on data/ (reports/<study>.ipynb), then the report is written",
            f"      cmd: python -m pglab.app.notebook_run {KEY}",
            "      deps:  # the run, the published numbers, the notebook, and exactly the files the notebook and the "
            "report import",
            *lines(8, [f"data/raw/{KEY}", "data/reference", "${item.majors}", f"notebooks/{KEY}.ipynb", *common,
                       *(f"${{item.{k}}}" for k in slots)]),
            "      outs:", *lines(8, outs),
            "      metrics:  # the same ten short keys for every study (analysis/result.py headline)",
            f"        - data/metrics/{KEY}.json:", "            cache: false"]
    return out


def single_stage(name: str, comment: str, data: list[str], outs: list[str]) -> list[str]:
    module = STAGES[name].modules[0]
    args = {"report_index": " --index", "history": " --ledger data/ledger/reference.sqlite.gz"}.get(name, "")
    return [*(f"  # {c}" for c in comment.splitlines()), f"  {name}:", f"    cmd: python -m {module}{args}",
            "    deps:", *lines(6, data),
            *lines(6, listed(stage_files(name)), f"exactly what `python -m {module}` imports (tests/test_dvc_deps.py)"),
            "    outs:", *outs]


def last_stages() -> list[str]:
    manifests = [f"data/raw/{s}/manifest.json" for s in STUDIES]
    history = single_stage(
        "history", "reports/history.html: per claim every shipped run's value and interval over time, by machine and\n"
        "PostgreSQL build, from the reference ledger (in git; `pglab ledger import-dvc` adds each shipped run to it)",
        ["data/ledger/reference.sqlite.gz"], ["      - reports/history.html"])
    index = single_stage(
        "report_index", "every study on one page: their verdicts, runs, machine, PostgreSQL version and date, with "
        "links", [*manifests, *(f"data/derived/{s}/comparison.csv" for s in STUDIES),
                  *(MAJORS.format(study=s) for s in STUDIES if (ROOT / MAJORS.format(study=s)).exists())],
        ["      - reports/index.html"])
    return [*history, *index]


def plots() -> list[str]:
    out = ["# `dvc plots show` / `dvc plots diff`: each study's line plots (a line per column of one of its tables),",
           "# then every figure of every study.", "plots:"]
    for s in STUDIES:
        for p in declaration(s).plots:
            out += [f"  - {p.name}:", f"      template: {q(p.name)}", f"      title: {q(p.title)}",
                    f"      x: {q(p.x)}", f"      x_label: {q(p.x_label)}", f"      y_label: {q(p.y_label)}",
                    "      y:", f"        data/derived/{s}/{p.table}: [{', '.join(q(c) for c in p.y)}]"]
    out += [f"  - figures/{s}/{f}.png" for s in STUDIES for f in declaration(s).figures]
    return out


def render() -> str:
    """dvc.yaml as this checkout's studies, code and params files make it."""
    return "\n".join([HEADER, *collect_stage(), *analyze_stage(), *last_stages(), *plots()]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.app.pipeline", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="only compare dvc.yaml and the plots' templates with what would be written (exit 1 and the "
                         "difference when they differ)")
    ap.add_argument("--out", type=Path, default=ROOT / "dvc.yaml", help="where to write (default: the checkout's)")
    a = ap.parse_args(argv)
    files = {a.out: render(), **{a.out.parent / k: v for k, v in plot_templates.templates().items()}}
    if not a.check:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
        return 0
    stale = 0
    for path, text in files.items():
        current = path.read_text() if path.exists() else ""
        if current != text:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(path),
                                                       "python -m pglab.app.pipeline"))
            print(f"{path} is stale: run `python -m pglab.app.pipeline` and commit it", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
