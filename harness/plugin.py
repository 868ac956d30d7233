"""Deprecated path: the pytest plugin is harness.testing.plugin and its store selection
harness.testing.store_selection; each old name still resolves, with a warning (this module
is not a pytest plugin)."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.testing.store_selection": (
        "CAPABILITY_MARKER", "explicit_store_selection", "selected_stores",
        "require_capability", "store_params", "all_store_params",
    ),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
