"""Old import paths that still resolve: each name warns once, naming its new home.

A module whose names moved keeps a table ``DEPRECATED = {name: new module}`` (built by
:func:`moved_names` from ``{new module: names}``) and a module-level ``__getattr__`` made by
:func:`forwarder`, which calls :func:`moved`; a gone module gets both from
:class:`ForwardingLoader` (the import hook of skycore.old_paths). The warning is a
:class:`PluginAPIDeprecationWarning`, which the plug-in loader shows (Python hides a plain
``DeprecationWarning`` outside ``__main__``). Each old name warns once per process tree: the
names already shown travel to child processes (``harness conform`` runs pytest and its
workers) in ``$SKYCORE_SHOWN_DEPRECATIONS``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

SHOWN_ENV = "SKYCORE_SHOWN_DEPRECATIONS"

_lock = threading.Lock()


class PluginAPIDeprecationWarning(DeprecationWarning):
    """An outside package imported a name from a path that moved; the message names the new
    path (``skycore.plugin_api`` or ``harness.plugin_api`` where the name is public)."""


def show_deprecations() -> None:
    """Show PluginAPIDeprecationWarning (each old name warns once: see :func:`moved`) where
    only Python's default filters would hide it: never against ``-W``/``$PYTHONWARNINGS``
    or a filter someone installed for it (pytest's, a test's mark)."""
    if sys.warnoptions:
        return
    for action, message, category, module, _ in warnings.filters:
        if message is not None or module is not None:
            continue  # it applies to some warnings only
        if issubclass(PluginAPIDeprecationWarning, category):
            if action == "ignore" and category is not PluginAPIDeprecationWarning:
                warnings.filterwarnings("default", category=PluginAPIDeprecationWarning)
            return


def _shown() -> set[str]:
    return {n for n in os.environ.get(SHOWN_ENV, "").split(",") if n}


def moved(module: str, table: Mapping[str, str], name: str, stacklevel: int = 3) -> Any:
    """``module.name`` from its new home ``table[name]``, with a warning naming that home
    the first time (AttributeError when ``name`` is not in the table)."""
    new = table.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(new), name)
    old = f"{module}.{name}"
    warn_once(
        old,
        f"{old} is deprecated: import {name} from {new} (the old path will be removed)",
        stacklevel=stacklevel + 1,
    )
    return value


def warn_once(key: str, message: str, stacklevel: int = 2) -> bool:
    """Warn ``message`` as a PluginAPIDeprecationWarning the first time ``key`` is seen in
    this process tree (see :func:`moved`). True if it warned."""
    with _lock:
        shown = _shown()
        first = key not in shown
        if first:
            os.environ[SHOWN_ENV] = ",".join(sorted({*shown, key}))
    if first:
        warnings.warn(message, PluginAPIDeprecationWarning, stacklevel=stacklevel + 1)
    return first


def moved_names(homes: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """The ``DEPRECATED`` table ``{name: new module}`` of ``{new module: its names}``."""
    return {name: new for new, names in homes.items() for name in names}


def forwarder(module: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``module`` that resolves the names of ``table``
    from their new homes (see :func:`moved`)."""

    def __getattr__(name: str) -> Any:
        return moved(module, table, name)

    return __getattr__


class ForwardingLoader(importlib.abc.Loader):
    """Makes a gone module whose names resolve from their new homes (``table``): the loader
    of an import hook serving old paths (skycore.old_paths)."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = f"Deprecated path: the names of {module.__name__} moved."
        module.DEPRECATED = self.table  # type: ignore[attr-defined]
        module.__getattr__ = forwarder(module.__name__, self.table)  # type: ignore[method-assign]
