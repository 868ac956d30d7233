"""The registry of emulators: every class under the entry-point group ``harness.emulators``,
keyed by the name of its store (the same name as in skycore's ``skycore.stores``).

The built-in emulators are registered exactly like a third-party one, in pyproject.toml, so
nothing here names a store and nothing is found but through the entry points (a source
checkout needs ``pip install -e .``). A store package declares::

    [project.entry-points."harness.emulators"]
    mystore = "my_package.emulator:MyEmulator"
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

GROUP = "harness.emulators"

_LOCK = threading.Lock()
_CACHE: dict[str, type[RunningEmulator]] | None = None


class UnknownEmulatorError(ValueError):
    """A store that no registered emulator serves."""


class EmulatorLoadError(RuntimeError):
    """A registered emulator could not be imported or does not follow the contract."""


def _check(name: str, where: str, cls: object) -> type[RunningEmulator]:
    from harness.emulators.base import RunningEmulator

    if not (isinstance(cls, type) and issubclass(cls, RunningEmulator)):
        raise EmulatorLoadError(
            f"The emulator '{name}' ({where}) is not a RunningEmulator subclass. Fix or "
            "uninstall the package that registers it."
        )
    if cls.store != name:
        raise EmulatorLoadError(
            f"The emulator registered as '{name}' ({where}) serves store '{cls.store}'; the "
            "entry-point name must be the store's name."
        )
    return cls


def _load() -> dict[str, type[RunningEmulator]]:
    found: dict[str, type[RunningEmulator]] = {}
    for ep in entry_points(group=GROUP):
        try:
            cls = ep.load()
        except Exception as e:
            raise EmulatorLoadError(
                f"The emulator '{ep.name}' ({ep.value}) failed to import: {e}. Fix or "
                "uninstall the package that registers it."
            ) from None
        cls = _check(ep.name, ep.value, cls)
        if found.get(ep.name, cls) is not cls:
            raise EmulatorLoadError(
                f"Two emulators are registered for store '{ep.name}': "
                f"{found[ep.name].__module__} and {ep.value}. Uninstall one of them."
            )
        found[ep.name] = cls
    return dict(sorted(found.items()))


def emulator_classes() -> dict[str, type[RunningEmulator]]:
    """Every registered emulator, by store name (sorted)."""
    global _CACHE
    with _LOCK:
        if _CACHE is None:
            _CACHE = _load()
        return dict(_CACHE)


def store_names() -> tuple[str, ...]:
    """The names of every registered store."""
    return tuple(emulator_classes())


def get_emulator_class(store: str) -> type[RunningEmulator]:
    """The emulator of ``store``; UnknownEmulatorError names it and lists the registered."""
    classes = emulator_classes()
    try:
        return classes[store]
    except KeyError:
        raise UnknownEmulatorError(
            f"Unknown store '{store}': no emulator is registered for it. Registered stores: "
            f"{', '.join(classes) or 'none'} (entry-point group '{GROUP}')."
        ) from None


def check_stores(stores: tuple[str, ...] | list[str]) -> None:
    """Raise UnknownEmulatorError if any of ``stores`` has no emulator."""
    for store in stores:
        get_emulator_class(store)


def store_of_alias(alias: str) -> str | None:
    """The store whose emulator has ``alias`` as its cli_alias (None if none has)."""
    return next((s for s, c in emulator_classes().items() if c.cli_alias == alias), None)


def reset() -> None:
    """Forget the loaded registry (after installing a store package at run time)."""
    global _CACHE
    with _LOCK:
        _CACHE = None
