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

from skycore.deprecation import ForwardingLoader, moved_names

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
