"""The import graph of skycore/ and harness/ has no circles.

Only imports that run when a module is imported count: module-level ones (also inside ``try``
or ``if``), not those inside functions, nor annotation-only ones under ``if TYPE_CHECKING:``.
``from package import name`` points at the submodule ``package.name`` when that is a module,
else at the package itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("skycore", "harness")


def module_files() -> dict[str, Path]:
    """{dotted module name: file} for every module of the checked packages."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` that run when the module is imported, nested ones too."""
    for node in body:
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _run_at_import(node.body)
            yield from _run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _run_at_import(block)
            for handler in node.handlers:
                yield from _run_at_import(handler.body)
        else:
            yield node


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The checked modules that ``module`` imports when it is imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _run_at_import(tree.body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != module}


def import_circles() -> list[list[str]]:
    """Every group of modules that import each other, round (Tarjan's strongly connected
    components of more than one module)."""
    modules = module_files()
    graph = {m: sorted(imports_of(m, p, modules)) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in graph[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for m in graph:
        if m not in index:
            visit(m)
    return circles


def test_the_checker_finds_a_circle(tmp_path: Path) -> None:
    """The parser sees module-level imports and skips function-level and TYPE_CHECKING ones."""
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nimport pkg.b\nif TYPE_CHECKING:\n    import pkg.c\n"
    )
    (tmp_path / "c.py").write_text("def f():\n    import pkg.a\n")
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py", "pkg.c": tmp_path / "c.py"}
    assert imports_of("pkg.a", modules["pkg.a"], modules) == {"pkg.b"}
    assert imports_of("pkg.c", modules["pkg.c"], modules) == set()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str) -> None:
    circles = [c for c in import_circles() if any(m.split(".")[0] == package for m in c)]
    assert not circles, (
        "These modules import each other in a circle (move the shared part into a module of "
        "its own, or import for annotations only under TYPE_CHECKING): "
        + "; ".join(" <-> ".join(c) for c in circles)
    )
