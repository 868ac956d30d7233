"""Deprecated path: the store registry is ``skycore.stores`` (a leaf module the config can
use without importing the stores layer); each old name still resolves, with a warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "skycore.stores": (
        "GROUP", "BackendLoadError", "StoreLoadError", "UnknownStoreError", "broken_store_names",
        "check_loaded", "clouds", "config_sections", "get_store_class", "load_problem",
        "make_store", "reset", "schemes", "section_model", "store_classes", "store_for_cloud",
        "store_for_scheme", "store_names",
    ),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
