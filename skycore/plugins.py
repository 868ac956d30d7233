"""Plug-ins found through an entry-point group: one class per name, loaded once per process.

skycore's stores (group ``skycore.stores``) and harness's emulators (``harness.emulators``)
are both registered this way; each registry says what a plug-in must be and how to name it.

A plug-in that fails to load (its import raises, or it breaks the contract) stops only its
own name: the others load, one warning line on stderr (once per process and package) names
it and its error, and asking for that name raises the group's error with the same cause.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar, cast

from skycore.deprecation import show_deprecations

T = TypeVar("T")

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _package(ep: EntryPoint) -> str:
    """The distribution that declares ``ep`` (its module's top package when unknown)."""
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else ep.value.split(":")[0].split(".")[0]


def warn_broken(ep: EntryPoint, kind: str, problem: str) -> None:
    """One stderr line, once per process for a package's ``ep.name``, naming the package,
    the entry point and its problem."""
    key = (_package(ep), ep.name)
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    sys.stderr.write(
        f"warning: skipping store '{ep.name}' of package {key[0]} (its {kind}, {ep.value}): "
        f"{problem} Every other store works; fix or uninstall that package.\n"
    )


@dataclass
class PluginGroup(Generic[T]):
    """The classes registered under one entry-point group, keyed by entry-point name.

    ``contract`` names the class every plug-in must subclass; the module that defines it
    registers it with :meth:`register_contract` (so the registry never imports it, and a
    plug-in, which imports it to subclass it, always finds it registered). ``name_of`` reads
    a plug-in's own name, which must equal its entry point's; ``error`` makes the exception
    for a plug-in that breaks the contract; ``kind`` is what a plug-in is called in messages
    ("store", "emulator"); ``required``: no plug-in at all is an error too.
    """

    group: str
    contract: str
    name_of: Callable[[type[T]], str]
    error: Callable[[str], Exception]
    kind: str
    required: bool = False
    _base: type | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _cache: dict[str, type[T]] | None = field(default=None, init=False, repr=False)
    _broken: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def register_contract(self, base: type) -> None:
        """Every plug-in of this group must subclass ``base`` (called by its module)."""
        self._base = base

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
        classes[self.name_of(cls)] = cls
        with self._lock:
            self._cache = dict(sorted(classes.items()))
            self._broken.pop(self.name_of(cls), None)

    def broken(self) -> dict[str, str]:
        """The names whose plug-in failed to load, each with its one-paragraph error."""
        self.classes()
        with self._lock:
            return dict(self._broken)

    def check(self, name: str) -> None:
        """Raise the group's error if the plug-in registered as ``name`` failed to load."""
        problem = self.broken().get(name)
        if problem is not None:
            raise self.error(problem)

    def reset(self) -> None:
        """Forget what was loaded (after installing a package at run time)."""
        with self._lock:
            self._cache = None
            self._broken = {}

    def _problem(self, ep: EntryPoint, cls: object, found: dict[str, type[T]]) -> str | None:
        """Why ``cls``, loaded from ``ep``, cannot be the plug-in ``ep.name`` (None: it can)."""
        base = self._base
        if base is None or not (isinstance(cls, type) and issubclass(cls, base)):
            return f"it is not a {self.contract} subclass (docs/backends.md has the contract)."
        name = self.name_of(cast("type[T]", cls))
        if name != ep.name:
            return (
                f"it loads a {self.kind} named '{name}'; the entry point's name "
                f"must be the {self.kind}'s name."
            )
        if found.get(ep.name, cls) is not cls:
            return (
                f"another {self.kind} is registered as '{ep.name}' too "
                f"({found[ep.name].__module__}); uninstall one of them."
            )
        return None

    def _load(self) -> dict[str, type[T]]:
        show_deprecations()
        found: dict[str, type[T]] = {}
        for ep in entry_points(group=self.group):
            try:
                cls = ep.load()
            except Exception as e:
                problem: str | None = f"it failed to import: {e}."
            else:
                problem = self._problem(ep, cls, found)
            if problem is not None:
                found.pop(ep.name, None)
                warn_broken(ep, self.kind, problem)
                self._broken[ep.name] = (
                    f"The {self.kind} '{ep.name}' (entry point {ep.value} of group "
                    f"{self.group}, package {_package(ep)}) cannot be used: {problem} Fix or "
                    "uninstall the package that registers it; docs/backends.md has the "
                    "contract and the public API."
                )
                continue
            if ep.name not in self._broken:
                found[ep.name] = cls
        if self.required and not found:
            raise self.error(
                f"No {self.kind} is registered (entry-point group {self.group}). Install "
                "skycore into the environment you run it from ('pip install -e .' or "
                "'make venv')."
            )
        return dict(sorted(found.items()))
