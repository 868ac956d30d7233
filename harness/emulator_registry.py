"""The registry of emulators: every class under the entry-point group ``harness.emulators``,
keyed by the name of its store (the same name as in skycore's ``skycore.stores``).

The built-in emulators are registered exactly like a third-party one, in pyproject.toml, so
nothing here names a store and nothing is found but through the entry points (a source
checkout needs ``pip install -e .``). A store package declares::

    [project.entry-points."harness.emulators"]
    mystore = "my_package.emulator:MyEmulator"

An emulator whose package fails to load is left out (one warning line); asking for its store
raises EmulatorLoadError with the cause and the fix.
"""

from __future__ import annotations

from typing import Any

from harness.errors import CloudError
from skycore.plugins import PluginGroup

GROUP = "harness.emulators"

RunningEmulator = Any
"""An emulator class: a subclass of harness.emulators.base.RunningEmulator, the contract that
registers itself here (this bottom module imports nothing of the emulators)."""


class UnknownEmulatorError(ValueError):
    """A store that no registered emulator serves."""


class EmulatorLoadError(CloudError, RuntimeError):
    """A registered emulator could not be imported or does not follow the contract (a
    CloudError, so the CLI shows its one paragraph)."""


_EMULATORS: PluginGroup[RunningEmulator] = PluginGroup(
    GROUP, "RunningEmulator", lambda cls: cls.store, EmulatorLoadError, "emulator"
)
register_contract = _EMULATORS.register_contract
"""Called by ``harness.emulators.base``: every emulator must subclass its RunningEmulator."""


def emulator_classes() -> dict[str, type[RunningEmulator]]:
    """Every registered emulator, by store name (sorted)."""
    return _EMULATORS.classes()


def store_names() -> tuple[str, ...]:
    """The names of every registered store."""
    return tuple(emulator_classes())


def get_emulator_class(store: str) -> type[RunningEmulator]:
    """The emulator of ``store``; UnknownEmulatorError names it and lists the registered."""
    try:
        return emulator_classes()[store]
    except KeyError:
        check_loaded(store)
        raise UnknownEmulatorError(_unknown(store)) from None


def check_loaded(store: str) -> None:
    """Raise EmulatorLoadError if the emulator registered for ``store`` failed to load."""
    _EMULATORS.check(store)


def check_stores(stores: tuple[str, ...] | list[str]) -> None:
    """Raise UnknownEmulatorError if any of ``stores`` has no emulator."""
    for store in stores:
        get_emulator_class(store)


def aliases() -> dict[str, str]:
    """alias -> store: each emulator's ``cli_alias`` (its cloud), the one source of them."""
    return {c.cli_alias: s for s, c in emulator_classes().items() if c.cli_alias}


def find_store(name: str) -> str | None:
    """The registered store that ``name`` names, by its name or its alias, in any case
    (None if none)."""
    classes, by_alias = emulator_classes(), aliases()
    for candidate in dict.fromkeys((name, name.lower())):
        store = candidate if candidate in classes else by_alias.get(candidate)
        if store is not None:
            return store
    return None


def resolve_store(name: str) -> str:
    """The store that ``name`` (a store's name or alias) names: every harness command and
    option that takes a store resolves it here. UnknownEmulatorError lists the stores with
    their aliases; EmulatorLoadError if the store's package failed to load."""
    store = find_store(name)
    if store is None:
        check_loaded(name)
        raise UnknownEmulatorError(_unknown(name))
    return store


def described_stores() -> str:
    """The registered stores, each with its alias when it has another: ``NAME (ALIAS), ...``."""
    by_store = {store: alias for alias, store in aliases().items() if alias != store}
    named = [f"{s} ({by_store[s]})" if s in by_store else s for s in emulator_classes()]
    return ", ".join(named) or "none"


def _unknown(name: str) -> str:
    return (
        f"Unknown store '{name}': no emulator is registered for it. Registered stores: "
        f"{described_stores()}; a store's package registers it under the entry-point group "
        f"'{GROUP}'."
    )


def add_emulator(cls: type[RunningEmulator]) -> None:
    """Register an emulator in this process only (one no installed package declares)."""
    _EMULATORS.add(cls)


def reset() -> None:
    """Forget the loaded registry (after installing a store package at run time)."""
    _EMULATORS.reset()
