"""The pglab modules a module imports, transitively (static imports only, wherever they are in the file).

tests/test_dvc_deps.py uses it to prove that every module a DVC stage runs is one of its dependencies.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"


def module_file(name: str) -> Path | None:
    base = LIB / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(path: Path, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
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
    return {n for n in names if n == "pglab" or n.startswith("pglab.")}


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
