"""Old import paths of skycore that still resolve, all in this one place.

``MOVED_NAMES``: modules that are gone; each old name resolves from its new home with a
PluginAPIDeprecationWarning naming it (skycore.deprecation), the first time it is used.
:func:`install` (run by ``import skycore``) puts the finder that serves them first on
``sys.meta_path``. No real module carries a forwarder of its own; ``skycore.plugin_api``,
the public API itself, keeps its own ``DEPRECATED`` table.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

from skycore.deprecation import forwarder, moved_names

MOVED_NAMES: dict[str, dict[str, str]] = {
    # the store registry, a leaf module the config can use without importing the stores layer
    "skycore.storage.registry": moved_names({
        "skycore.stores": (
            "GROUP", "BackendLoadError", "StoreLoadError", "UnknownStoreError",
            "broken_store_names", "check_loaded", "clouds", "config_sections", "get_store_class",
            "load_problem", "make_store", "reset", "schemes", "section_model", "store_classes",
            "store_for_cloud", "store_for_scheme", "store_names",
        ),
    }),
}  # fmt: skip
"""Old module -> {name: the module to import it from now}."""


class ForwardingLoader(importlib.abc.Loader):
    """Makes a gone module whose names resolve from their new homes (``table``)."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = f"Deprecated path: the names of {module.__name__} moved."
        module.DEPRECATED = self.table  # type: ignore[attr-defined]
        module.__getattr__ = forwarder(module.__name__, self.table)  # type: ignore[method-assign]


class OldPathFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of ``MOVED_NAMES``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_NAMES:
            return None
        return importlib.util.spec_from_loader(fullname, ForwardingLoader(MOVED_NAMES[fullname]))


def install() -> None:
    """Serve the old paths (once per process)."""
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())
