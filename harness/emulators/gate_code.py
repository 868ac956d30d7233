"""The code that runs inside an emulator's gate, and its version.

The gate process (``python -m harness.gate``) runs the gate package, the modules it imports
(harness.processes, harness.emulator_registry, the account names, skycore's leaves...)
and the store's gate protocol with what that imports. ``gate_files`` follows those imports
(the static ones, in functions too; those only under ``if TYPE_CHECKING:`` never run), so
the list is whatever the gate imports, never a hand-kept one. The emulators' own modules
(their test helpers) are loaded by the registry at run time, not imported by the gate's
code: an edit of them never restarts a gate.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import harness
import skycore


class GateConfigured(Protocol):
    """An emulator class, as far as its gate's code needs it."""

    @classmethod
    def gate_protocol(cls) -> object: ...


GATE_PACKAGE = Path(harness.__file__).parent / "gate"
"""``python -m harness.gate``: every module of it runs in the gate."""


def class_files(classes: Iterable[type]) -> list[Path]:
    """The source files of ``classes`` (standard-library ones left out)."""
    files = []
    for cls in classes:
        if cls.__module__.split(".")[0] in sys.stdlib_module_names:
            continue
        module = sys.modules.get(cls.__module__)
        if module is not None and getattr(module, "__file__", None):
            files.append(Path(str(module.__file__)))
    return files


def _module_name(path: Path, roots: Mapping[str, Path]) -> tuple[str, bool] | None:
    """(dotted name, is a package) of the file ``path`` under one of ``roots``."""
    for top, folder in roots.items():
        if path.is_relative_to(folder):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                return ".".join(parts[:-1]), True
            return ".".join(parts), False
    return None


def _module_file(name: str, roots: Mapping[str, Path]) -> Path | None:
    """The file of module ``name`` if it lies under one of ``roots``."""
    top, *rest = name.split(".")
    folder = roots.get(top)
    if folder is None:
        return None
    base = folder.joinpath(*rest)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth (not those under ``if
    TYPE_CHECKING:``; its ``else:`` counts)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr))


_IMPORTS: dict[tuple[Path, int, int], list[str]] = {}


_PARSING = threading.Lock()
"""CPython 3.11's ast.parse is not safe in threads at once (its recursion check can fail
with "SystemError: AST constructor recursion depth mismatch"); emulators start in parallel."""


def _parse(source: bytes) -> ast.Module:
    """``ast.parse(source)``, one thread at a time."""
    with _PARSING:
        return ast.parse(source)


def _imported_names(path: Path, name: str, is_package: bool) -> list[str]:
    """The modules (and ``package.name`` candidates) that the file ``path`` imports."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _IMPORTS:
        names: list[str] = []
        for node in _import_nodes(_parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
                continue
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
        _IMPORTS[key] = names
    return _IMPORTS[key]


def imported_files(start: Iterable[Path], roots: Mapping[str, Path]) -> list[Path]:
    """``start`` and every module under ``roots`` (top-level name -> its folder) that they
    import, directly or not, with the ``__init__`` of each package on the way."""
    seen: dict[Path, None] = {}
    todo = [p.resolve() for p in start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        named = _module_name(path, roots)
        if named is None:
            continue
        name, is_package = named
        wanted = list(_imported_names(path, name, is_package))
        parts = name.split(".")
        wanted += [".".join(parts[:i]) for i in range(1, len(parts))]
        for module in wanted:
            found = _module_file(module, roots)
            if found is not None:
                todo.append(found.resolve())
    return sorted(seen)


def gate_files(emulator: type[GateConfigured]) -> list[Path]:
    """The code that runs inside ``emulator``'s gate: the gate package, its gate protocol's
    modules (the classes of its MRO) and every module of harness, skycore or the protocol's
    own package that these import; never the emulator's test helpers."""
    protocol_files = class_files(type(emulator.gate_protocol()).__mro__)
    roots = {"harness": Path(harness.__file__).parent, "skycore": Path(skycore.__file__).parent}
    for path in protocol_files:
        named = _module_name(path.resolve(), roots)
        if named is None:
            top = _top_package(path)
            if top is not None:
                roots.setdefault(*top)
    roots = {top: folder.resolve() for top, folder in roots.items()}
    start = [*sorted(GATE_PACKAGE.glob("*.py")), *protocol_files]
    for path in protocol_files:
        if _is_gate_package(path.parent):  # all of it, whatever it loads
            start += sorted(path.parent.glob("*.py"))
    return imported_files(start, roots)


STORE_GATES = Path(harness.__file__).parent / "store_gates"
"""The built-in stores' gate packages (harness.store_gates.<store>)."""


def _is_gate_package(folder: Path) -> bool:
    """A store's gate package: one of harness.store_gates or an outside ``*_gate`` one."""
    return folder.name.endswith("_gate") or folder.resolve().parent == STORE_GATES.resolve()


def _top_package(path: Path) -> tuple[str, Path] | None:
    """(name, folder) of the top-level package that holds the module file ``path``."""
    folder = path.parent
    if not (folder / "__init__.py").exists():
        return None
    while (folder.parent / "__init__.py").exists():
        folder = folder.parent
    return folder.name, folder


def _settings(value: Any) -> Any:
    """``value`` (a protocol's configuration: keys, tokens, region) as plain, stable data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return sorted((repr(k), _settings(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return [_settings(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(repr(_settings(v)) for v in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return type(value).__qualname__


def gate_code_mtime(emulator: type[GateConfigured]) -> float:
    """The newest modification time of the gate's code for ``emulator`` (and of the
    emulator's own modules, which configure its protocol): a caller whose code is older than
    the running gate's (a long-running process that loaded the harness before an edit)
    never restarts it, so two versions cannot restart each other's gate in turn."""
    files = gate_files(emulator) + class_files(emulator.__mro__)
    return max((p.stat().st_mtime for p in files if p.exists()), default=0.0)


def gate_version(emulator: type[GateConfigured]) -> str:
    """A hash of what runs inside ``emulator``'s gate: its code (see gate_files) and its
    protocol's configuration (the keys or tokens the emulator gives it). A running gate with
    another version is restarted; an edit of the emulator's test helpers changes nothing."""
    digest = hashlib.sha256()
    for path in gate_files(emulator):
        digest.update(path.read_bytes())
    settings = _settings(getattr(emulator.gate_protocol(), "__dict__", {}))
    digest.update(repr(settings).encode())
    return digest.hexdigest()[:16]
