"""The layers of DESIGN.md as folders: each imports only from itself and the layers below, in no circle.

A module's layer is its folder under lib/pglab (``errors.py`` and ``userfiles.py``, how a user's file
is read, are the base every layer may use). The
rule covers every static import, inside functions and under TYPE_CHECKING too: a lazy import upwards
is still a dependency upwards (and would make a DVC stage depend on code it should not).
"""

from __future__ import annotations

import pytest
from modgraph import LIB, direct_imports, modules

# lowest first; a module may import from its own layer and from any layer before it
LAYERS = ("errors", "hosts", "nodes", "replication", "runs", "workloads", "parsers", "analysis", "studies", "ledger",
          "app")
BASE = ("errors", "userfiles")  # the two modules of the base layer: what goes wrong, and reading a user's file
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
