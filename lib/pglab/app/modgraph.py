"""The pglab modules a module imports, directly or transitively (static imports, wherever they are in the file).

``python -m pglab.app.pipeline`` uses it to write each DVC stage's deps as exactly the modules the stage runs;
tests/test_layers.py to prove that no layer imports from a layer above it (tests/modgraph.py re-exports it).
An import by string (``importlib.import_module``) is invisible here: the one module allowed to make one is the
studies' registry, and the pipeline names what a stage loads through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: the folder that holds the ``pglab`` package (``lib/`` of the checkout)
LIB = Path(__file__).resolve().parents[2]
#: the layers, lowest first: a module may import from its own layer and any before it (tests/test_layers.py);
#: ``errors`` stands for the base, the modules of ``BASE`` (what goes wrong and how pglab exits, reading a user's
#: file, ...)
LAYERS = ("errors", "hosts", "nodes", "replication", "runs", "workloads", "parsers", "analysis", "studies", "ledger",
          "views", "app")
BASE = ("errors", "exits", "userfiles", "emulated", "server_settings", "machine_rules")


def module_file(name: str) -> Path | None:
    base = LIB / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def source_imports(source: str, package: str) -> set[str]:
    """The pglab names a piece of Python source imports (``package``: where a relative import starts)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import module`
        elif isinstance(node, ast.List):  # [sys.executable, "-m", "pglab.x", ...]: a program it runs
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names.update(f"{b}.__main__" if module_file(f"{b}.__main__") else b
                         for a, b in zip(items, items[1:], strict=False)
                         if a == "-m" and isinstance(b, str) and b.startswith("pglab."))
    return {n for n in names if n == "pglab" or n.startswith("pglab.")}


def _imports(path: Path, package: str) -> set[str]:
    return source_imports(path.read_text(), package)


def closure(*roots: str) -> set[Path]:
    """Files of every pglab module reachable from ``roots`` (package __init__ files included)."""
    seen: set[Path] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:i])
            f = module_file(prefix)
            if f is None or f in seen:
                continue
            seen.add(f)
            package = prefix if f.name == "__init__.py" else ".".join(prefix.split(".")[:-1])
            todo.extend(_imports(f, package))
    return seen


def module_name(path: Path) -> str:
    rel = path.relative_to(LIB).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> list[str]:
    """Every pglab module and package, by dotted name."""
    return sorted(module_name(p) for p in (LIB / "pglab").rglob("*.py"))


def direct_imports(name: str) -> set[str]:
    """The pglab modules ``name`` imports itself (``from pkg import x`` counts as pkg.x when x is a module)."""
    f = module_file(name)
    assert f is not None, name
    package = name if f.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for imp in _imports(f, package):
        while imp and module_file(imp) is None:  # `from pglab.x import Class`: the module is pglab.x
            imp = imp.rpartition(".")[0]
        # a module's own packages run before it whatever it imports: no edge (else every package whose
        # __init__ imports its submodules would be a circle)
        if imp and imp != name and not name.startswith(imp + "."):
            out.add(imp)
    return out


def layer_of(path: Path) -> int:
    """The layer of a file or folder under lib/pglab (``pglab/__init__.py`` first, a module above every layer
    last), for listing files bottom-up."""
    name = path.relative_to(LIB / "pglab").parts[0]
    if name == "__init__.py":
        return -1
    stem = name.removesuffix(".py")
    return 0 if stem in BASE else LAYERS.index(stem) if stem in LAYERS else len(LAYERS)
