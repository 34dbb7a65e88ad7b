"""The import graph of our three packages has no circle: no module needs, when it is imported, a module that
needs it back (imports inside functions, and those only for type checkers, are not counted)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("exporters", "search_spaces", "nasrlm")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_at_import_time(path: Path, name: str, known: set[str]) -> set[str]:
    """The known modules that ``path`` (module ``name``) imports when it is imported."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.If | ast.Try | ast.With):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    stem = package[: len(package) - node.level + 1]
                    base = ".".join([*stem, base] if base else stem)
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule imported by name

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    # importing a.b.c imports the packages a and a.b first, unless the importer lives inside them
    for module in list(found):
        parts = module.split(".")
        found.update(".".join(parts[:k]) for k in range(1, len(parts)))
    return {m for m in found if m in known and m != name and not name.startswith(m + ".")}


def import_cycles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Every set of modules under ``root`` that import one another in a circle (Tarjan's strongly
    connected components of more than one module)."""
    paths = {_module_name(p, root): p for package in packages for p in (root / package).rglob("*.py")}
    graph = {name: _imported_at_import_time(path, name, set(paths)) for name, path in paths.items()}
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
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.c\n"
                                  "def later():\n    import pkg.c\nfrom . import a\nthing = 1\n")
    (package / "c.py").write_text("import pkg.b\n")  # b needs c only lazily or for type checkers: no circle
    assert import_cycles(tmp_path, ("pkg",)) == [["pkg.a", "pkg.b"]]
