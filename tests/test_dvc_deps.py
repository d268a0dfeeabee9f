"""dvc.yaml cannot go stale: every pglab module a stage runs is one of that stage's dependencies.

A module missing from a stage's deps means a change to it does not re-run the stage, and `dvc repro`
reports "up to date" for outputs the code would now compute differently.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from modgraph import closure
from pglab.studies import STUDIES

ROOTS = {
    # `pglab collect <study>` runs the CLI, the study's collect module and the store's publish
    "collect": ("pglab.cli", "pglab.store", "pglab.studies.{study}.collect"),
    # the analyze stage runs the notebook, which calls pglab.notebook and the study's analyze module
    "analyze": ("pglab.notebook", "pglab.studies.{study}.analyze"),
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


def covered(path: Path, deps: list[Path]) -> bool:
    return any(path == d or d in path.parents for d in deps)


@pytest.mark.parametrize("stage", sorted(ROOTS))
@pytest.mark.parametrize("study", STUDIES)
def test_every_imported_module_is_a_dependency(stage: str, study: str) -> None:
    deps = stage_deps(stage, study)
    needed = closure(*(r.format(study=study) for r in ROOTS[stage]))
    missing = sorted(str(p.relative_to(REPO)) for p in needed if not covered(p, deps))
    assert not missing, f"{stage}@{study} imports modules that are not its deps in dvc.yaml: {missing}"
    absent = sorted(str(d.relative_to(REPO)) for d in deps if d.is_relative_to(REPO / "lib") and not d.exists())
    assert not absent, f"{stage}@{study} lists deps that do not exist: {absent}"


def test_analysis_code_is_not_a_collect_dependency() -> None:
    """Changing a plot must not re-measure: no analyze module is a collect dependency."""
    for study in STUDIES:
        deps = stage_deps("collect", study)
        for name in ("analyze.py", "stats.py", "figures.py", "notebook.py"):
            assert not any(d.name == name for d in deps), (study, name)


def test_the_check_sees_a_missing_module(tmp_path: Path) -> None:
    """The closure follows imports inside functions too (the CLI imports lazily)."""
    files = {p.name for p in closure("pglab.cli")}
    assert {"cleanup.py", "preflight.py", "inventory.py", "detect.py"} <= files
