"""dvc.yaml cannot go stale, and a stage re-runs only for what it runs.

Each stage's lib/ deps are exactly the pglab modules it imports (static imports, inside functions
too): a module missing from the deps means an edit to it does not re-run the stage; a file listed that
the stage never imports means an edit to it re-runs the stage for nothing (a collect stage re-measures).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from modgraph import closure
from pglab.studies import STUDIES

LIB = REPO / "lib"
ROOTS = {
    # `python -m pglab.app.collect <study>` loads the study's params model and runs its collect module
    "collect": ("pglab.app.collect", "pglab.studies.{study}.collect", "pglab.studies.{study}.params"),
    # the analyze stage runs the notebook, which calls pglab.app.notebook and the study's analyze module
    "analyze": ("pglab.app.notebook", "pglab.studies.{study}.analyze", "pglab.studies.{study}.params",
                "pglab.app.report"),
}


def stage_deps(stage: str, study: str) -> list[Path]:
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][stage]
    item = spec["foreach"][study] or {}
    deps = []
    for dep in spec["do"]["deps"]:
        text = dep.replace("${key}", study)
        for k, v in item.items():
            text = text.replace("${item." + k + "}", str(v))
        deps.append(REPO / text)
    return deps


def lib_files(deps: list[Path]) -> set[Path]:
    """The Python files the lib/ deps stand for (a folder: every module in it)."""
    out: set[Path] = set()
    for d in deps:
        if d.is_relative_to(LIB):
            out |= set(d.rglob("*.py")) if d.is_dir() else {d}
    return out


def needed(stage: str, study: str) -> set[Path]:
    return closure(*(r.format(study=study) for r in ROOTS[stage]))


@pytest.mark.parametrize("stage", sorted(ROOTS))
@pytest.mark.parametrize("study", STUDIES)
def test_deps_are_exactly_the_imported_modules(stage: str, study: str) -> None:
    deps = stage_deps(stage, study)
    absent = sorted(str(d.relative_to(REPO)) for d in deps if d.is_relative_to(LIB) and not d.exists())
    assert not absent, f"{stage}@{study} lists deps that do not exist: {absent}"
    listed, imported = lib_files(deps), needed(stage, study)
    missing = sorted(str(p.relative_to(REPO)) for p in imported - listed)
    assert not missing, f"{stage}@{study} imports modules that are not its deps in dvc.yaml: {missing}"
    extra = sorted(str(p.relative_to(REPO)) for p in listed - imported)
    assert not extra, f"{stage}@{study} lists deps it never imports (an edit to them re-runs it): {extra}"


def test_the_index_stage_depends_on_exactly_what_it_imports() -> None:
    """``report_index``: exactly the report module's imports."""
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["report_index"]
    listed, imported = lib_files([REPO / d for d in spec["deps"]]), closure("pglab.app.report")
    assert listed == imported, (sorted(map(str, listed - imported)), sorted(map(str, imported - listed)))
    assert {f"data/derived/{s}/comparison.csv" for s in STUDIES} <= set(spec["deps"])


@pytest.mark.parametrize(("stage", "module"), [("ledger", "pglab.ledger.shipped"),
                                                  ("history", "pglab.app.history")])
def test_a_single_stage_depends_on_exactly_what_it_imports(stage: str, module: str) -> None:
    """The stages after the analyses: exactly their module's imports, and what they read of each study."""
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][stage]
    deps = [str(d) for d in spec["deps"]]
    listed, imported = lib_files([REPO / d for d in deps]), closure(module)
    assert listed == imported, (sorted(map(str, listed - imported)), sorted(map(str, imported - listed)))
    assert spec["cmd"] == f"python -m {module}"
    if stage == "ledger":
        assert {f"data/derived/{s}/{t}" for s in STUDIES for t in ("comparison.csv", "points.csv")} <= set(deps)


@pytest.mark.parametrize("study", STUDIES)
def test_collect_imports_no_parser_lab_cli_or_analysis(study: str) -> None:
    """An edit to a parser, the lab, the CLI, analysis, figures or a notebook must not re-measure. Except what
    a study's first look reads (``pglab.workloads.adaptive``: which levels an open claim needs decides the blocks
    it adds): the claims, their intervals, and each point's measured window, nothing that draws."""
    names = {str(p.relative_to(LIB)) for p in needed("collect", study)}
    first_look = {"pglab/analysis/__init__.py", "pglab/analysis/claims.py", "pglab/analysis/effects.py",
                  "pglab/analysis/stats.py",
                  "pglab/analysis/window.py", "pglab/parsers/__init__.py", "pglab/parsers/pgbench.py",
                  "pglab/parsers/text.py"} if "pglab/workloads/adaptive.py" in names else set()
    for forbidden in ("pglab/parsers/", "pglab/hosts/lab/", "pglab/analysis/", "pglab/app/cli.py",
                      "pglab/app/notebook.py", f"pglab/studies/{study}/analyze.py"):
        assert not any(n.startswith(forbidden) for n in names - first_look), (study, forbidden)


def test_the_closure_follows_imports_inside_functions() -> None:
    """The CLI imports lazily: the closure must still see those modules."""
    files = {str(p.relative_to(LIB)) for p in closure("pglab.app.cli")}
    assert {"pglab/runs/leftovers.py", "pglab/runs/preflight.py", "pglab/parsers/detect.py",
            "pglab/hosts/lab/__init__.py"} <= files
