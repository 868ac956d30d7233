"""Deprecated path: the pytest plugin is harness.testing.plugin; each old name still resolves,
with a warning (this module is not a pytest plugin)."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "CAPABILITY_MARKER": "harness.testing.plugin",
    "explicit_store_selection": "harness.testing.plugin",
    "selected_stores": "harness.testing.plugin",
    "require_capability": "harness.testing.plugin",
    "store_params": "harness.testing.plugin",
    "all_store_params": "harness.testing.plugin",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
