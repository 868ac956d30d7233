"""What ``harness down`` leaves behind, and its options to remove it: a stopped store's
section in the skycore config (``--forget``) and a persistent emulator's data in
``$HARNESS_HOME`` (``--wipe``)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import emulator_registry as registry
from harness.emulators.records import EmulatorError, state_file
from harness.errors import CloudError
from harness.paths import harness_home
from skycore.config import config_path, forget_sections, store_sections

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

OWN_FOLDERS = (
    "logs",
    "emulators",
    "bin",
    "npm",
    "prepare",
    "contract",
    "docker",
    "images",
    "test-homes",
)
"""Folders of ``$HARNESS_HOME`` that hold the harness's own files (installs, logs, records,
the engine), never an emulator's data, whatever its command names."""


def config_line(
    stores: Sequence[str], forget: bool, named: bool = True, path: Path | None = None
) -> str:
    """The one line on ``stores``' sections in the skycore config: removed (``forget``), or
    kept and the command that removes them (``named``: the stores were named with --store),
    or that it has none."""
    path = path or config_path()
    sections = list(dict.fromkeys(s for store in stores for s in store_sections(store, path)))
    if not sections:
        return f"skycore config {path}: no section of {_names(stores)}; nothing left there."
    names = ", ".join(sections)
    if forget:
        gone = forget_sections(sections, path)
        return f"skycore config {path}: removed the section(s) {', '.join(gone)}."
    again = "".join(f"--store {s} " for s in stores) if named else ""
    return (
        f"skycore config {path}: kept the section(s) {names} (the stopped emulators' "
        "endpoints; an environment without their store package warns about them); "
        f"'harness down {again}--forget' removes them."
    )


def data_paths(store: str, home: Path) -> list[Path]:
    """What ``store``'s emulator keeps in ``home`` across restarts: its gate state and,
    for a persistent emulator, the folders its start command serves from inside ``home``
    (or those its class names with ``data_paths(home)``); only those that exist."""
    cls = registry.get_emulator_class(store)
    found = [home / "emulators" / f"{store}-gate-state.json"]  # the launcher's gate state
    declared = getattr(cls, "data_paths", None)
    if callable(declared):
        found += [Path(p) for p in declared(home)]
    elif cls.persistent:
        found += _served_folders(cls, home)
    return [p for p in dict.fromkeys(found) if p.exists()]


def _served_folders(cls: type[RunningEmulator], home: Path) -> list[Path]:
    """The folders inside ``home`` (not the harness's own) that the emulator's command names."""
    try:
        argv, _env = cls.command(home, 0, 0)
    except (EmulatorError, CloudError, OSError):
        return []
    own = [(home / name).resolve() for name in OWN_FOLDERS]
    root = home.resolve()
    found: list[Path] = []
    for arg in argv:
        for word in (arg, arg.partition("=")[2]):
            if not word or "/" not in word:
                continue
            path = Path(word).resolve()
            inside = path != root and path.is_relative_to(root)
            if inside and path.is_dir() and not any(path.is_relative_to(o) for o in own):
                found.append(Path(word))
    return found


def wipe(store: str, home: Path) -> str:
    """Remove ``store``'s emulator data from ``home`` (its emulator must be stopped); one
    line saying what went."""
    if not registry.emulator_classes().get(store):
        return (
            f"{store}: data not wiped: no package in this environment registers its emulator; "
            f"run 'harness down --store {store} --wipe' where that package is installed."
        )
    if state_file(home, store).exists():
        return f"{store}: data not wiped: its emulator is still recorded as running."
    paths = data_paths(store, home)
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if not paths:
        return f"{store}: nothing to wipe (no data of its emulator in {home})."
    return f"{store}: wiped {', '.join(str(p) for p in paths)}."


def unstoppable(store: str) -> str:
    """What ``down`` says of ``store``, which no package here registers: whether an emulator
    of it is recorded as running (only an environment with its package can stop it)."""
    if state_file(harness_home(create=False), store).exists():
        return (
            "emulator still recorded as running: no package in this environment registers "
            f"it; run 'harness down --store {store}' where that package is installed."
        )
    return "no emulator of it recorded as running here (its package is not installed here)."


def _names(stores: Sequence[str]) -> str:
    return ", ".join(f"'{s}'" for s in stores) or "any store"
