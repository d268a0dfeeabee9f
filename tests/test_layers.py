"""The layers of DESIGN.md as folders: each imports only from itself and the layers below, in no circle.

A module's layer is its folder under lib/pglab (``errors.py`` and ``userfiles.py``, how a user's file
is read, are the base every layer may use). The
rule covers every static import, inside functions and under TYPE_CHECKING too: a lazy import upwards
is still a dependency upwards (and would make a DVC stage depend on code it should not). Two more rules keep
the import graph the whole truth, which dvc.yaml is generated from (``python -m pglab.app.pipeline``): no study
imports another, and no module imports by string (``importlib.import_module``, ``__import__``) but the studies'
registry, ``pglab/studies/__init__.py``, whose two such imports the pipeline knows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from modgraph import BASE, LAYERS, LIB, direct_imports, modules

# LAYERS, lowest first: a module may import from its own layer and from any layer before it (pglab.app.modgraph,
# which also lists dvc.yaml's deps in that order); BASE: the two modules of the base layer, what goes wrong and
# reading a user's file
REGISTRY = LIB / "pglab" / "studies" / "__init__.py"  # the one module that imports by string
BY_STRING = {"import_module", "__import__", "spec_from_file_location", "module_from_spec", "exec_module",
             "load_module", "run_module", "run_path"}
TOP = ("pglab", "pglab.__main__")  # the package itself and `python -m pglab`: above every layer
MAX_LINES = 400


def layer(module: str) -> int:
    if module in TOP:
        return len(LAYERS)
    first = module.split(".")[1]
    if first in BASE:
        return 0
    assert first in LAYERS, f"{module} is in no layer: put it in one of {LAYERS} (tests/test_layers.py)"
    return LAYERS.index(first)


def upward_imports() -> list[str]:
    found = []
    for mod in modules():
        for imp in direct_imports(mod):
            if imp != "pglab" and layer(imp) > layer(mod):
                found.append(f"{mod} ({LAYERS[layer(mod)]}) imports {imp} ({LAYERS[layer(imp)]})")
    return sorted(found)


def test_no_module_imports_from_a_higher_layer() -> None:
    found = upward_imports()
    assert not found, "imports from a higher layer:\n  " + "\n  ".join(found)


def test_no_import_circle() -> None:
    graph = {m: {i for i in direct_imports(m) if i in set(modules())} for m in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


@pytest.mark.parametrize("top", LAYERS[1:])
def test_every_layer_is_a_folder_with_a_docstring(top: str) -> None:
    init = LIB / "pglab" / top / "__init__.py"
    assert init.exists(), f"layer {top} is not a package"
    assert init.read_text().lstrip().startswith('"""'), f"{init} says nothing about its layer"


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(LIB)): n for p in (LIB / "pglab").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def study_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


def test_no_study_imports_another() -> None:
    """A study is its folder: what two studies share belongs to a lower layer (a study importing another would make
    the other's edits re-measure it, and its folder no longer the whole of it)."""
    found = sorted(f"{m} imports {i}" for m in modules() if study_of(m)
                   for i in direct_imports(m) if study_of(i) and study_of(i) != study_of(m))
    assert not found, "a study imports another:\n  " + "\n  ".join(found)


def imports_by_string(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in BY_STRING:
                found.append(f"line {node.lineno}: {name}(...)")
        elif isinstance(node, ast.ImportFrom) and node.module in ("importlib", "importlib.util", "runpy"):
            found += [f"line {node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if a.name in BY_STRING]
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import runpy" for a in node.names if a.name == "runpy"]
    return found


def test_only_the_registry_imports_by_string() -> None:
    """An import by string is invisible to the import graph, so a DVC stage generated from it would miss the module.
    The studies' registry is the one place (``module``, ``declaration``), and the pipeline says which parts of a
    study each stage loads through it."""
    found = {str(p.relative_to(LIB)): hits for p in sorted((LIB / "pglab").rglob("*.py"))
             if p != REGISTRY and (hits := imports_by_string(p))}
    assert not found, f"imports by string outside {REGISTRY.relative_to(LIB)}: {found}"
    assert imports_by_string(REGISTRY), "the registry's import by string is not seen: the check sees nothing"


#: what decides a verdict (the analysis's rules, over one run's blocks or over a campaign's runs): the views tell
#: verdicts and never call these, so no view can tell a story of its own
DECIDES = {"claims": {"verdict", "comparison_row", "ordering_row", "order_verdict", "is_open", "comparison_frame"},
           "over_runs": {"rule_verdict", "decide", "decide_many", "decide_sittings", "claim_row", "comparison"}}


def verdicts_decided(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.attr in DECIDES.get(node.value.id, ()):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").rsplit(".", 1)[-1] in DECIDES:
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if a.name in DECIDES[(node.module or "").rsplit(".", 1)[-1]]]
    return found


def test_no_view_decides_a_verdict(tmp_path: Path) -> None:
    """Every page, table and printed summary is drawn by ``pglab.views`` from verdicts the analysis or the ledger
    keep; a view that decided one itself (as history.html once did from each run's few blocks) would tell its own
    story. The commands (``pglab.app``) may compute verdicts over runs a user groups and hand them to a view."""
    views = LIB / "pglab" / "views"
    found = {p.name: hits for p in sorted(views.rglob("*.py")) if (hits := verdicts_decided(p))}
    assert not found, f"views that decide verdicts: {found}"
    bad = tmp_path / "v.py"
    bad.write_text("from pglab.analysis.over_runs import comparison\nfrom pglab.analysis import claims\n"
                   "x = claims.verdict(1, 2, None)\n")
    assert len(verdicts_decided(bad)) == 2, "the check sees nothing"


def test_the_checks_would_fail(tmp_path: Path) -> None:
    """Each rule catches what it is for: a lazy importlib call, ``__import__``, another study's module."""
    src = tmp_path / "m.py"
    src.write_text("def f(name):\n    import importlib\n    return importlib.import_module(name), __import__(name)\n")
    assert [h.split(": ")[1] for h in imports_by_string(src)] == ["import_module(...)", "__import__(...)"]
    assert study_of("pglab.studies.fdw_overhead.claims") == "fdw_overhead" and study_of("pglab.studies") is None
