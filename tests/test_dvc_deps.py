"""dvc.yaml is written by ``python -m pglab.app.pipeline`` and cannot go stale; a stage re-runs only for what it runs.

Each stage's lib/ deps are exactly the pglab modules it imports (static imports, inside functions too): a
module missing from the deps means an edit to it does not re-run the stage; a file listed that the stage never
imports means an edit to it re-runs the stage for nothing (a collect stage re-measures). What a stage imports is
said here on its own (``ROOTS``), not taken from the generator, and checked at run time too: a stage's commands,
run as far as their imports go, load no module outside its deps (the studies' registry imports by string, which no
static walk sees). A collect stage tracks only the keys of its params file that its run reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from modgraph import closure, module_file
from pglab.app import pipeline
from pglab.studies import STUDIES

LIB = REPO / "lib"
ROOTS = {
    # `python -m pglab.app.collect <study>` loads the study's params model and runs its collect module
    "collect": ("pglab.app.collect", "pglab.studies.{study}.collect", "pglab.studies.{study}.params"),
    # the analyze stage runs the notebook (its own imports, and pglab.app.notebook, which loads the study's params
    # and analyze modules), then `python -m pglab.views.report <study>`, which reads the study's declaration
    "analyze": ("pglab.app.notebook", "pglab.studies.{study}.analyze", "pglab.studies.{study}.params",
                "pglab.app.notebook_run", "pglab.studies.{study}.declaration"),
}
# the stages after the analyses: their module, and whether it reads every study's declaration (its question)
SINGLE = {"history": ("pglab.views.history", True), "report_index": ("pglab.views.report", True)}


def stages() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def resolved(stage: str, study: str) -> dict:
    """``stage@study`` as DVC expands it: ``${key}`` and ``${item.*}`` replaced."""
    spec = stages()[stage]
    item = spec["foreach"][study]

    def sub(text: str) -> str:
        text = text.replace("${key}", study)
        for k, v in item.items():
            text = text.replace("${item." + k + "}", str(v))
        return text

    def walk(x):  # noqa: ANN001, ANN202
        if isinstance(x, str):
            return sub(x)
        if isinstance(x, list):
            return [walk(e) for e in x]
        if isinstance(x, dict):
            return {sub(k): walk(v) for k, v in x.items()}
        return x

    return walk(spec["do"])


def lib_files(deps: list[str]) -> set[Path]:
    """The Python files the lib/ deps stand for (a folder: every module in it)."""
    out: set[Path] = set()
    for d in map(REPO.joinpath, deps):
        if d.is_relative_to(LIB):
            out |= set(d.rglob("*.py")) if d.is_dir() else {d}
    return out


def needed(stage: str, study: str) -> set[Path]:
    return closure(*(r.format(study=study) for r in ROOTS[stage]), *sorted(pipeline.notebook_imports(study))
                   if stage == "analyze" else ())


def test_dvc_yaml_is_what_the_generator_writes() -> None:
    """After a change of imports, a declaration or a params file's profile: `python -m pglab.app.pipeline`."""
    assert (REPO / "dvc.yaml").read_text() == pipeline.render(), "dvc.yaml is stale: run python -m pglab.app.pipeline"
    assert pipeline.main(["--check"]) == 0


@pytest.mark.parametrize("stage", sorted(ROOTS))
@pytest.mark.parametrize("study", STUDIES)
def test_deps_are_exactly_the_imported_modules(stage: str, study: str) -> None:
    deps = resolved(stage, study)["deps"]
    absent = sorted(d for d in deps if d.startswith(("lib/", "native/")) and not (REPO / d).exists())
    assert (stage != "collect") or set(pipeline.NATIVE) <= set(deps), "a collect stage runs the flush emulation"
    assert not absent, f"{stage}@{study} lists deps that do not exist: {absent}"
    listed, imported = lib_files(deps), needed(stage, study)
    missing = sorted(str(p.relative_to(REPO)) for p in imported - listed)
    assert not missing, f"{stage}@{study} imports modules that are not its deps in dvc.yaml: {missing}"
    extra = sorted(str(p.relative_to(REPO)) for p in listed - imported)
    assert not extra, f"{stage}@{study} lists deps it never imports (an edit to them re-runs it): {extra}"


@pytest.mark.parametrize("stage", sorted(SINGLE))
def test_a_single_stage_depends_on_exactly_what_it_imports(stage: str) -> None:
    """The stages after the analyses: exactly their module's imports, and what they read of each study."""
    module, questions = SINGLE[stage]
    spec = stages()[stage]
    deps = [str(d) for d in spec["deps"]]
    imported = closure(module, *(f"pglab.studies.{s}.declaration" for s in STUDIES if questions))
    listed = lib_files(deps)
    assert listed == imported, (sorted(map(str, listed - imported)), sorted(map(str, imported - listed)))
    args = {"report_index": " --index", "history": " --ledger data/ledger/reference.sqlite.gz"}.get(stage, "")
    assert spec["cmd"] == f"python -m {module}{args}"
    if stage == "history":  # the shipped runs' history alone: what a user adds never changes a DVC output
        assert deps[0] == "data/ledger/reference.sqlite.gz"
    else:
        assert {f"data/raw/{s}/manifest.json" for s in STUDIES} <= set(deps)
        assert {f"data/derived/{s}/comparison.csv" for s in STUDIES} <= set(deps)


@pytest.mark.parametrize("study", STUDIES)
def test_collect_imports_no_parser_lab_cli_or_analysis(study: str) -> None:
    """An edit to a parser, the lab, the CLI, analysis, figures, a notebook, a study's declaration or another study
    must not re-measure. Except what a study's first look reads (``pglab.workloads.adaptive``: which levels an open
    claim needs decides the blocks it adds): the claims, their intervals, and each point's measured window, nothing
    that draws."""
    names = {str(p.relative_to(LIB)) for p in needed("collect", study)}
    first_look = {"pglab/analysis/__init__.py", "pglab/analysis/claims.py", "pglab/analysis/effects.py",
                  "pglab/analysis/stats.py",
                  "pglab/analysis/window.py", "pglab/parsers/__init__.py", "pglab/parsers/pgbench.py",
                  "pglab/parsers/text.py"} if "pglab/workloads/adaptive.py" in names else set()
    others = tuple(f"pglab/studies/{s}/" for s in STUDIES if s != study)
    for forbidden in ("pglab/parsers/", "pglab/hosts/lab/", "pglab/analysis/", "pglab/app/cli.py",
                      "pglab/app/notebook.py", "pglab/views/report.py", f"pglab/studies/{study}/analyze.py",
                      f"pglab/studies/{study}/declaration.py", *others):
        assert not any(n.startswith(forbidden) for n in names - first_look), (study, forbidden)


@pytest.mark.parametrize("study", STUDIES)
def test_analyze_imports_no_collect_code(study: str) -> None:
    """An edit to a study's collect module (or to how a notebook measures) re-runs its collect stage alone: the
    analyze stage runs the notebook with ``collect False``, so the notebook's measuring branch is not its dep."""
    names = {str(p.relative_to(LIB)) for p in needed("analyze", study)}
    assert not names & {f"pglab/studies/{study}/collect.py", "pglab/app/collect.py", "pglab/app/notebook_collect.py",
                        "pglab/hosts/lab/__init__.py", "pglab/app/cli.py"}, study
    assert not any(n.startswith(f"pglab/studies/{s}/") for s in STUDIES if s != study for n in names), study


# what each stage's commands do, run as far as their imports go: the registry's imports by string included
AT_RUN_TIME = {
    "collect": """
        from pglab.app import collect
        from pglab.studies import module
        collect.load_params({study!r}, None, None)
        module({study!r}, "collect")""",
    "analyze": """
        {notebook}
        from pglab.app import notebook
        from pglab.views import report
        from pglab.studies import module
        module({study!r}, "params"), module({study!r}, "analyze")
        assert report.question({study!r})""",
}


@pytest.mark.parametrize("stage", sorted(AT_RUN_TIME))
@pytest.mark.parametrize("study", STUDIES)
def test_a_stage_loads_no_module_beyond_its_deps(stage: str, study: str) -> None:
    """No other study's module, and no declaration in a collect stage: the registry finds the studies without
    importing one, and imports only the part asked for."""
    notebook = "\n".join(f"import {m}" for m in sorted(pipeline.notebook_imports(study)) if module_file(m))
    code = textwrap.dedent(AT_RUN_TIME[stage]).format(study=study, notebook=notebook)
    code += "\nimport sys, json; print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values())" \
            " if getattr(m, '__file__', None) and m.__name__.startswith('pglab'))))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(LIB)}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = {Path(f) for f in json.loads(out.stdout.splitlines()[-1])}
    beyond = sorted(str(p.relative_to(REPO)) for p in loaded - lib_files(resolved(stage, study)["deps"]))
    assert not beyond, f"{stage}@{study} loads modules that are not its deps: {beyond}"


@pytest.mark.parametrize("study", STUDIES)
def test_collect_tracks_only_the_active_profile(study: str) -> None:
    """``profile``, ``inventory`` and ``profiles.<profile>`` of its params file, and the inventory it names, whole:
    so an edit to another profile re-measures nothing (tests/test_dvc.py shows it with `dvc status`)."""
    data = yaml.safe_load((REPO / "params" / f"{study}.yaml").read_text())
    params = resolved("collect", study)["params"]
    assert params == [{f"params/{study}.yaml": ["profile", "inventory", f"profiles.{data['profile']}"]},
                      {data["inventory"]: None}]
    assert all(f"profiles.{p}" not in str(params) for p in data["profiles"] if p != data["profile"])


def test_the_generator_follows_the_profile_a_params_file_names(tmp_path: Path) -> None:
    """Switch a params file to another profile and the collect stage tracks that profile instead."""
    data = yaml.safe_load((REPO / "params" / "synchronous_commit.yaml").read_text())
    data["profile"], data["inventory"] = "paper", "params/lab.yaml"
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    item = pipeline.params_item(tmp_path / "p.yaml")
    assert item == {"profile": "paper", "inventory": "params/lab.yaml"}
    assert [k.replace("${item.profile}", item["profile"]) for k in pipeline.TRACKED] == \
        ["profile", "inventory", "profiles.paper"]
    del data["inventory"]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit, match="add inventory"):
        pipeline.params_item(tmp_path / "p.yaml")


def test_the_plots_are_the_declared_ones() -> None:
    """Every figure a study declares, and its line plots, on the columns of its ratio_lines.csv."""
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["plots"]
    figures = [p for p in spec if isinstance(p, str)]
    assert len(figures) == len(set(figures)) and all(f.startswith("figures/") and f.endswith(".png") for f in figures)
    assert {f.split("/")[1] for f in figures} == set(STUDIES)
    vega = {k: v for p in spec if isinstance(p, dict) for k, v in p.items()}
    assert set(vega) == {"synchronous_commit_ratio_to_on", "logical_replication_ratio_to_streaming"}
    assert vega["synchronous_commit_ratio_to_on"]["y"] == {
        "data/derived/synchronous_commit/ratio_lines.csv": ["on", "remote_apply", "remote_write", "local", "off"]}


def test_the_closure_follows_imports_inside_functions() -> None:
    """The CLI imports lazily: the closure must still see those modules."""
    files = {str(p.relative_to(LIB)) for p in closure("pglab.app.cli")}
    assert {"pglab/runs/leftovers.py", "pglab/runs/preflight.py", "pglab/parsers/detect.py",
            "pglab/hosts/lab/__init__.py"} <= files


SKELETON = {
    "__init__.py": '"""Study 6: a skeleton."""\n\nSTUDY = "zz_skeleton"\n',
    "declaration.py": 'from pglab.studies import Study\nfrom pglab.studies.zz_skeleton import STUDY\n\n'
                      'DECLARATION = Study(name=STUDY, question="Does it?", article="999: none", '
                      'tables={"own.csv": "its own"}, figures=("published_vs_reproduced",))\n',
    "params.py": "from pglab.runs.params import StudyParams  # noqa: F401\n",
    "collect.py": "from pglab.studies.zz_skeleton.params import StudyParams  # noqa: F401\n",
    "analyze.py": "from pglab.analysis import result  # noqa: F401\n",
}


def test_a_new_study_changes_no_other_studys_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sixth study is its folder, its params file and its notebook (and its docs): the generator gives it its
    two stages, and every other study's collect and analyze stage runs what it ran before (the same deps, params,
    outputs and command, however the items are padded): adding a study re-measures none of the others."""
    for d in ("lib", "params", "notebooks"):
        shutil.copytree(REPO / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "data/majors").mkdir(parents=True)  # the shipped claims x majors tables: analyze deps
    for table in (REPO / "data/majors").glob("*.csv"):
        shutil.copy(table, tmp_path / "data/majors" / table.name)
    folder = tmp_path / "lib/pglab/studies/zz_skeleton"
    folder.mkdir()
    for name, text in SKELETON.items():
        (folder / name).write_text(text)
    shutil.copy(REPO / "params/fdw_overhead.yaml", tmp_path / "params/zz_skeleton.yaml")
    shutil.copy(REPO / "notebooks/fdw_overhead.ipynb", tmp_path / "notebooks/zz_skeleton.ipynb")
    out = subprocess.run([sys.executable, "-m", "pglab.app.pipeline", "--out", str(tmp_path / "dvc.yaml")],
                         cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "lib")})
    assert out.returncode == 0, out.stderr
    before = {(stage, s): resolved(stage, s) for stage in ROOTS for s in STUDIES}
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert set(stages()["collect"]["foreach"]) == set(stages()["analyze"]["foreach"]) == {*STUDIES, "zz_skeleton"}
    for (stage, study), old in before.items():
        new = resolved(stage, study)
        assert {**new, "deps": set(new["deps"]), "outs": set(map(str, new["outs"]))} == \
            {**old, "deps": set(old["deps"]), "outs": set(map(str, old["outs"]))}, (stage, study)


def test_each_ratio_plot_has_the_reports_colours_and_names() -> None:
    """``dvc plots show`` colours and names each line as the study's figures do (``PALETTE``, ``label``): the
    template the pipeline writes for each plot maps every column to its figure colour and display name."""
    from matplotlib.colors import to_hex
    from pglab.app import plot_templates
    from pglab.studies import declaration, module

    made = plot_templates.templates()
    assert made, "no ratio plot"
    for study in STUDIES:
        figures = module(study, "figures")
        for plot in declaration(study).plots:
            spec = json.loads(made[plot_templates.PLOTS / f"{plot.name}.json"])
            colour = spec["layer"][0]["encoding"]["color"]
            assert colour["scale"]["domain"] == list(plot.y)
            assert colour["scale"]["range"] == [to_hex(figures.PALETTE[c]) for c in plot.y], study
            shown, label = colour.get("legend", {}).get("labelExpr", ""), getattr(figures, "label", lambda x: x)
            for c in plot.y:
                assert label(c) == c or json.dumps(label(c)) in shown, (study, c)
            assert spec["layer"][1]["encoding"]["y"] == {"datum": 1}  # the baseline's rule at 1
            assert (REPO / plot_templates.PLOTS / f"{plot.name}.json").read_text() == \
                made[plot_templates.PLOTS / f"{plot.name}.json"], "run `python -m pglab.app.pipeline`"
