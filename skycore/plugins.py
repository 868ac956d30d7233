"""Plug-ins found through an entry-point group: one class per name, loaded once per process.

skycore's stores (group ``skycore.stores``) and harness's emulators (``harness.emulators``)
are both registered this way; each registry says what a plug-in must be and how to name it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class PluginGroup(Generic[T]):
    """The classes registered under one entry-point group, keyed by entry-point name.

    ``base`` returns the class every plug-in must subclass (a callable, so the registry can
    import it lazily); ``name_of`` reads a plug-in's own name, which must equal its entry
    point's; ``error`` makes the exception for a plug-in that breaks the contract; ``kind``
    is what a plug-in is called in messages ("store", "emulator"); ``required``: no plug-in
    at all is an error too.
    """

    def __init__(
        self,
        group: str,
        base: Callable[[], type[T]],
        name_of: Callable[[type[T]], str],
        error: Callable[[str], Exception],
        kind: str,
        required: bool = False,
    ) -> None:
        self.group = group
        self._base = base
        self._name_of = name_of
        self._error = error
        self.kind = kind
        self._required = required
        self._lock = threading.Lock()
        self._cache: dict[str, type[T]] | None = None

    def classes(self) -> dict[str, type[T]]:
        """Every registered class by name, sorted (loaded on first use)."""
        with self._lock:
            if self._cache is None:
                self._cache = self._load()
            return dict(self._cache)

    def add(self, cls: type[T]) -> None:
        """Register ``cls`` under its own name in this process only (a plug-in that no
        installed package declares, e.g. a test's)."""
        classes = self.classes()
        classes[self._name_of(cls)] = cls
        with self._lock:
            self._cache = dict(sorted(classes.items()))

    def reset(self) -> None:
        """Forget what was loaded (after installing a package at run time)."""
        with self._lock:
            self._cache = None

    def _load(self) -> dict[str, type[T]]:
        base = self._base()
        found: dict[str, type[T]] = {}
        for ep in entry_points(group=self.group):
            where = f"entry point '{ep.name}' of group {self.group} ({ep.value})"
            try:
                cls = ep.load()
            except Exception as e:
                raise self._error(
                    f"The {self.kind} '{ep.name}' ({ep.value}) failed to import: {e}. Fix or "
                    "uninstall the package that registers it."
                ) from None
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise self._error(
                    f"The {where} is not a {base.__name__} subclass. Fix or uninstall the "
                    "package that registers it; docs/backends.md has the contract."
                )
            if self._name_of(cls) != ep.name:
                raise self._error(
                    f"The {where} loads a {self.kind} named '{self._name_of(cls)}'; the entry "
                    f"point's name must be the {self.kind}'s name."
                )
            if found.get(ep.name, cls) is not cls:
                raise self._error(
                    f"Two {self.kind}s are registered as '{ep.name}': "
                    f"{found[ep.name].__module__} and {ep.value}. Uninstall one of them."
                )
            found[ep.name] = cls
        if self._required and not found:
            raise self._error(
                f"No {self.kind} is registered (entry-point group {self.group}). Install "
                "skycore into the environment you run it from ('pip install -e .' or "
                "'make venv')."
            )
        return dict(sorted(found.items()))
