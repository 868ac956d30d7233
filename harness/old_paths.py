"""Old import paths of harness that still resolve, all in this one place.

- ``MOVED_NAMES``: modules that are gone; each old name resolves from its new home with a
  PluginAPIDeprecationWarning naming it (skycore.deprecation), the first time it is used.
- ``MOVED_PACKAGES``: packages that moved whole; importing the old path (or a module under
  it) gives the module at the new path, with a warning naming it.
- ``fleet_names``: the fleet's names, once importable from ``harness.emulators``.

:func:`install` (run by ``import harness``) puts the finder that serves them first on
``sys.meta_path``. No real module carries a forwarder of its own.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skycore.deprecation import ForwardingLoader, moved, moved_names, warn_once

MOVED_NAMES: dict[str, dict[str, str]] = {
    "harness.procs": moved_names({
        "harness.plugin_api": ("LOOPBACK", "free_port", "log_tail"),
        "harness.processes": (
            "HarnessProcessError", "Proc", "process_start_time", "is_port_conflict",
            "port_is_free", "wait_port_free", "start_process", "http_ok", "wait_healthy",
            "stop_process",
        ),
    }),
    "harness.nodes": moved_names({
        "harness.plugin_api": ("rclone_binary",),
        "harness.cloud.nodes": (
            "RECIPE_VERSION", "SUITE", "PACKAGES", "REPOSITORY", "NODE_RCLONE", "recipe_hash",
            "image_tag", "debian_mirror", "ensure_node_image", "build_rootfs",
            "user_image_tag", "ensure_user_image",
        ),
    }),
    "harness.plugin": moved_names({
        "harness.testing.store_selection": (
            "CAPABILITY_MARKER", "explicit_store_selection", "selected_stores",
            "require_capability", "store_params", "all_store_params",
        ),
    }),
    "harness.gate_protocol": moved_names({
        "harness.plugin_api": ("Exchange", "GateProtocol", "Success", "UpstreamResponse"),
        "harness.gate.protocol": ("Answer", "Corrupted"),
    }),
    "harness.gate_rules": moved_names({
        "harness.plugin_api": ("Access", "Kind", "Verdict", "decide"),
        "harness.gate.rules": ("ALLOW", "ANONYMOUS", "INVALID", "Bucket", "header", "split_path"),
    }),
    "harness.emulators.s3_protocol": moved_names({
        "harness.plugin_api": ("S3GateProtocol",),
        "harness.store_gates.s3.protocol": ("classify_s3",),
    }),
}  # fmt: skip
"""Old module -> {name: the module to import it from now}."""

STORE_GATES = Path(__file__).parent / "store_gates"

MOVED_PACKAGES: dict[str, str] = {
    # each store's gate package was harness.emulators.<store>_gate
    **{
        f"harness.emulators.{package.name}_gate": f"harness.store_gates.{package.name}"
        for package in sorted(STORE_GATES.iterdir())
        if (package / "__init__.py").is_file()
    },
    "harness.emulators.registry": "harness.emulator_registry",
    "harness.cloud.procs": "harness.processes",
}
"""Old package or module -> its new path (the modules under an old package follow it)."""

FLEET = "harness.emulators.fleet"


def new_path(old: str) -> str | None:
    """The new path of the moved module ``old`` (or of a module under a moved package)."""
    for before, after in MOVED_PACKAGES.items():
        if old == before or old.startswith(f"{before}."):
            return after + old[len(before) :]
    return None


class _Alias(importlib.abc.Loader):
    """Gives the module at a moved path's new home, warning once that the path moved."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warn_once(
            spec.name,
            f"{spec.name} is deprecated: import from {self.new} (the old path will be removed)",
            stacklevel=8,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class OldPathFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of ``MOVED_NAMES`` and ``MOVED_PACKAGES``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED_NAMES:
            return importlib.util.spec_from_loader(
                fullname, ForwardingLoader(MOVED_NAMES[fullname])
            )
        new = new_path(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new), is_package=_is_package(new))


def _is_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.submodule_search_locations is not None


def fleet_names(name: str) -> Any:
    """``harness.emulators.<name>`` for a name of the fleet's ``__all__``, with a warning."""
    missing = AttributeError(f"module 'harness.emulators' has no attribute {name!r}")
    # Dunders and the package's own modules are the import system's business: looking them
    # up must never import the fleet (which imports them).
    if name.startswith("_") or importlib.util.find_spec(f"harness.emulators.{name}") is not None:
        raise missing
    if name not in importlib.import_module(FLEET).__all__:
        raise missing
    return moved("harness.emulators", {name: FLEET}, name)


def install() -> None:
    """Serve the old paths (once per process)."""
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())
