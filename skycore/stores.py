"""The registry of stores: every store class under the entry-point group ``skycore.stores``.

The built-in stores are registered exactly like a third-party one, in pyproject.toml, so
nothing here names a store. A package that adds a store declares::

    [project.entry-points."skycore.stores"]
    mystore = "my_package.store:MyStore"

and ``skycore`` (task schema, config schema, URL parsing, planning, mounting) picks it up.
A store whose package fails to load is left out (one warning line); naming it (``store:``,
its URL scheme) raises StoreLoadError with the cause and the fix, and its config.yaml
section is kept unchecked.

This module imports nothing of ``skycore.storage``: the stores come in by entry point, and
the store contract (``skycore.storage.api``) registers its base class here when it is
imported (which loading any store does first), so the config can ask which sections exist
without importing the stores layer. Its old path, ``skycore.storage.registry``, still resolves
every name, with a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skycore.errors import StoreLoadError as StoreLoadError
from skycore.errors import UnknownStoreError as UnknownStoreError
from skycore.plugins import PluginGroup

if TYPE_CHECKING:
    from skycore.config import SkycoreConfig
    from skycore.storage.api import AbstractStore

GROUP = "skycore.stores"

BackendLoadError = StoreLoadError
"""The former name of ``StoreLoadError``, kept for code that catches it."""


_STORES: PluginGroup[AbstractStore] = PluginGroup(
    GROUP, "AbstractStore", lambda cls: cls.store_name, StoreLoadError, "store", required=True
)
register_contract = _STORES.register_contract
"""Called by ``skycore.storage.api``: every store must subclass its AbstractStore."""


def store_classes() -> dict[str, type[AbstractStore]]:
    """Every registered store class by store name (sorted; loaded once per process)."""
    return _STORES.classes()


def store_names() -> list[str]:
    """The registered store names, sorted."""
    return list(store_classes())


def load_problem(name: str) -> str | None:
    """Why the store registered as ``name`` failed to load (one paragraph), or None."""
    return _STORES.broken().get(name.lower() if isinstance(name, str) else name)


def check_loaded(name: str) -> None:
    """Raise StoreLoadError if the store registered as ``name`` failed to load."""
    problem = load_problem(name)
    if problem is not None:
        raise StoreLoadError(problem)


def reset() -> None:
    """Forget the loaded registry (after installing a store package at run time)."""
    _STORES.reset()


def _known() -> str:
    return ", ".join(store_names())


def get_store_class(name: str, field: str = "store") -> type[AbstractStore]:
    """The class of store ``name``; UnknownStoreError naming ``field`` and the registered
    stores otherwise."""
    classes = store_classes()
    cls = classes.get(name.lower() if isinstance(name, str) else name)
    if cls is None:
        try:
            check_loaded(name)
        except StoreLoadError as e:
            raise StoreLoadError(f"{field}: {e}") from None
        raise UnknownStoreError(
            f"{field}: unknown store '{name}'. Registered stores: {_known()}. Use one of them, "
            "or install the package that provides the store."
        )
    return cls


def make_store(
    store: str, name: str, config: SkycoreConfig, account: str | None = None
) -> AbstractStore:
    """The store object for bucket ``name`` of store ``store`` (``account``: for stores whose
    buckets live in accounts). UnknownStoreError for a store nobody registered."""
    return get_store_class(store)(name, config, account)


def store_for_scheme(scheme: str) -> type[AbstractStore] | None:
    """The store whose URL scheme is ``scheme`` (None when no store has it; StoreLoadError
    when it is the name, so the default scheme, of a store that failed to load)."""
    for cls in store_classes().values():
        if scheme.lower() in cls.schemes:
            return cls
    check_loaded(scheme)
    return None


def schemes() -> list[str]:
    """Every URL scheme of every registered store."""
    return [s for cls in store_classes().values() for s in cls.schemes]


def store_for_cloud(cloud: str | None) -> type[AbstractStore] | None:
    """The default store of ``cloud`` (``resources.cloud``): the first registered store that
    belongs to it and declares itself its default; None when the cloud has none."""
    if not cloud:
        return None
    matches = [c for c in store_classes().values() if c.cloud == cloud.lower()]
    preferred = [c for c in matches if c.default_for_cloud] or matches
    return preferred[0] if preferred else None


def clouds() -> list[str]:
    """The clouds the registered stores belong to."""
    return sorted({cls.cloud for cls in store_classes().values()})


def section_model(section: str) -> type[AbstractStore] | None:
    """The store whose config.yaml section is ``section`` (None when none is)."""
    for cls in store_classes().values():
        if cls.config_section == section:
            return cls
    return None


def broken_store_names() -> list[str]:
    """The names of the registered stores that failed to load (each warned about once)."""
    return list(_STORES.broken())


def config_sections() -> list[str]:
    """Every store's config.yaml section name."""
    return [cls.config_section for cls in store_classes().values()]
