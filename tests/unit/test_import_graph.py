"""The import graph of skycore/ and harness/ keeps the layers of docs/layers.toml, and has no
circles.

Every import counts, wherever it runs: module-level ones (also inside ``try`` or ``if``) and
those inside functions and methods. Only annotation-only imports under ``if TYPE_CHECKING:``
are left out (they never run). ``from package import name`` points at the submodule
``package.name`` when that is a module, else at the package itself.

docs/layers.toml is the one declaration of the layers; docs/architecture.md shows it, and a
test here checks that the doc's tables say the same.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("skycore", "harness")
DECLARATION = ROOT / "docs" / "layers.toml"
DOC = ROOT / "docs" / "architecture.md"


def module_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """{dotted module name: file} for every module of the checked packages."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node``, at any depth, except in ``if TYPE_CHECKING:``
    bodies (their ``else:`` counts), in source order. Expressions hold no statements, so
    the walk does not enter them."""
    stack: list[ast.AST] = list(reversed(list(ast.iter_child_nodes(node))))
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Import | ast.ImportFrom):
            yield current
            continue
        if isinstance(current, ast.If) and _is_type_checking(current.test):
            children: list[ast.AST] = list(current.orelse)
        else:
            children = [c for c in ast.iter_child_nodes(current) if not isinstance(c, ast.expr)]
        stack.extend(reversed(children))


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The checked modules that ``module`` imports, each with the line of its first import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(module, is_package, node.level, node.module)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            if target in modules and target != module:
                found.setdefault(target, node.lineno)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """{module: {imported module: line}} for every checked module."""
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def import_circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every group of modules that import each other, round (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph[m]):
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


# --- the layers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Layers:
    """The layers of docs/layers.toml: {"<package>.<layer>": module patterns} and what each
    may import (qualified names too)."""

    modules: dict[str, list[str]]
    may_import: dict[str, set[str]]

    @classmethod
    def parse(cls, declaration: dict[str, Any]) -> Layers:
        modules: dict[str, list[str]] = {}
        may_import: dict[str, set[str]] = {}
        for package, section in declaration.items():
            for name, layer in section["layers"].items():
                key = f"{package}.{name}"
                modules[key] = list(layer["modules"])
                may_import[key] = {
                    ref if "." in ref else f"{package}.{ref}" for ref in layer["may_import"]
                }
        return cls(modules, may_import)

    def layer_of(self, module: str) -> tuple[str, str] | None:
        """(layer, the entry that put ``module`` there): the most specific matching entry."""
        matches = [
            (layer, pattern)
            for layer, patterns in self.modules.items()
            for pattern in patterns
            if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*")
        ]
        return max(matches, key=lambda m: len(m[1]), default=None)

    def allows(self, importer: str, imported: str) -> bool:
        """May layer ``importer`` import layer ``imported``?"""
        if importer == imported:
            return True
        package = imported.split(".")[0]
        allowed = self.may_import[importer]
        return imported in allowed or f"{package}.*" in allowed


def forbidden_imports(graph: dict[str, dict[str, int]], layers: Layers) -> list[str]:
    """One line per import that leaves the layers its importer may import."""
    found = []
    for module, imported in sorted(graph.items()):
        here = layers.layer_of(module)
        for target, line in sorted(imported.items()):
            there = layers.layer_of(target)
            if here and there and not layers.allows(here[0], there[0]):
                found.append(f"{module} (line {line}) -> {target}: {here[0]} -> {there[0]}")
    return found


def _declaration() -> dict[str, Any]:
    return tomllib.loads(DECLARATION.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph(module_files())


# --- the checker, on trees of its own ------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / "pkg" / f"{name}.py").write_text(text)
    return module_files(tmp_path, ("pkg",))


def test_the_checker_reads_every_import_but_annotation_only_ones(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "a": "from typing import TYPE_CHECKING\nimport pkg.b\n"
            "if TYPE_CHECKING:\n    import pkg.c\nelse:\n    import pkg.d\n",
            "b": "",
            "c": "class C:\n    def f(self):\n        if True:\n            from pkg import a\n",
            "d": "from . import c\n",
        },
    )
    graph = import_graph(modules)
    assert set(graph["pkg.a"]) == {"pkg.b", "pkg.d"}
    assert graph["pkg.c"] == {"pkg.a": 4}
    assert set(graph["pkg.d"]) == {"pkg.c"}


def test_the_checker_finds_a_function_level_circle(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path, {"a": "import pkg.b\n", "b": "def f():\n    from pkg import a\n", "c": ""}
    )
    assert import_circles(import_graph(modules)) == [["pkg.a", "pkg.b"]]


def test_the_checker_finds_a_forbidden_import(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "low": "def f():\n    import pkg.high\n",
            "high": "import pkg.low\n",
            "gate_x": "import pkg.low\n",
        },
    )
    layers = Layers.parse(
        {
            "pkg": {
                "layers": {
                    "low": {"modules": ["pkg", "pkg.low"], "may_import": []},
                    "high": {"modules": ["pkg.high", "pkg.*_x"], "may_import": ["low"]},
                }
            }
        }
    )
    assert layers.layer_of("pkg.gate_x") == ("pkg.high", "pkg.*_x")
    assert forbidden_imports(import_graph(modules), layers) == [
        "pkg.low (line 2) -> pkg.high: pkg.low -> pkg.high"
    ]


# --- the packages ---------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    """Each module is named by an entry of its own (a package root's entry covers only the
    root), so a new module is placed on purpose."""
    layers = Layers.parse(_declaration())
    unplaced = [
        m
        for m in module_files()
        if (found := layers.layer_of(m)) is None or ("." in m and "." not in found[1])
    ]
    assert not unplaced, f"Add these modules to a layer in {DECLARATION.name}: {unplaced}"


def test_layers_name_existing_layers() -> None:
    layers = Layers.parse(_declaration())
    unknown = {
        f"{layer} -> {ref}"
        for layer, refs in layers.may_import.items()
        for ref in refs
        if ref not in layers.modules and not ref.endswith(".*")
    }
    assert not unknown


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_keep_the_layers(package: str, graph: dict[str, dict[str, int]]) -> None:
    layers = Layers.parse(_declaration())
    found = [f for f in forbidden_imports(graph, layers) if f.split(".")[0] == package]
    assert not found, (
        f"These imports are not allowed by {DECLARATION.name} (import through a layer that "
        "may, move the code, or change the declaration and docs/architecture.md with a "
        "reason):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str, graph: dict[str, dict[str, int]]) -> None:
    circles = [c for c in import_circles(graph) if any(m.split(".")[0] == package for m in c)]
    assert not circles, (
        "These modules import each other in a circle, counting imports inside functions "
        "(move the shared part into a module of its own, or import for annotations only "
        "under TYPE_CHECKING): " + "; ".join(" <-> ".join(c) for c in circles)
    )


def test_only_the_declared_layers_write_statuses() -> None:
    layers = Layers.parse(_declaration())
    rule = _declaration()["skycore"]["rules"]["status_writers"]
    writers = {f"skycore.{name}" for name in rule["layers"]}
    strays = []
    for module, path in module_files().items():
        found = layers.layer_of(module)
        if not module.startswith("skycore.") or (found and found[0] in writers):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in rule["functions"]:
                    strays.append(f"{module}:{node.lineno} calls {name}")
    assert not strays, "Only core writes statuses:\n" + "\n".join(strays)


def _doc_tables() -> dict[str, tuple[set[str], set[str]]]:
    """{"<package>.<layer>": (modules, may import)} from the doc's layer tables: rows whose
    first cell is a `layer` name, then a cell of `modules`, a job, and a cell of `layers`."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    package = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (\w+):", line)
        if heading:
            package = heading.group(1)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if package and len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            names = [set(re.findall(r"`([^`]+)`", c)) for c in cells]
            found[f"{package}.{cells[0].strip('`')}"] = (names[1], names[3] - {"nothing"})
    return found


def test_the_doc_shows_the_declaration() -> None:
    layers = Layers.parse(_declaration())
    declared = {
        layer: (set(patterns), {r.removeprefix(f"{layer.split('.')[0]}.") for r in refs})
        for layer, patterns in layers.modules.items()
        for refs in [layers.may_import[layer]]
    }
    assert _doc_tables() == declared
