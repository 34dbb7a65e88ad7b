"""The import graph of our three packages has no circle: no module imports a module that imports it back,
counting every import: at module level, inside a function, or only for type checkers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("exporters", "search_spaces", "nasrlm")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The known modules that ``path`` (module ``name``) imports anywhere in its text."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                stem = package[: len(package) - node.level + 1]
                base = ".".join([*stem, base] if base else stem)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule imported by name
    # importing a.b.c imports the packages a and a.b first, unless the importer lives inside them
    for module in list(found):
        parts = module.split(".")
        found.update(".".join(parts[:k]) for k in range(1, len(parts)))
    return {m for m in found if m in known and m != name and not name.startswith(m + ".")}


def import_cycles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Every set of modules under ``root`` that import one another in a circle (Tarjan's strongly
    connected components of more than one module)."""
    paths = {_module_name(p, root): p for package in packages for p in (root / package).rglob("*.py")}
    graph = {name: _imports(path, name, set(paths)) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            connect(name)
    return cycles


def test_our_packages_import_in_no_circle() -> None:
    assert import_cycles(ROOT, PACKAGES) == []


def test_a_circle_is_found(tmp_path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("from . import a\nthing = 1\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n")
    (package / "d.py").write_text("def later():\n    import pkg.c\n")
    (package / "e.py").write_text("import pkg.a\n")  # imports into the circle, but nothing imports it back
    assert import_cycles(tmp_path, ("pkg",)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
