"""harness's old import paths (harness.old_paths): a moved package or module still imports,
as the very module at its new home, warning once that it moved; every moved package has a
home."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator

import pytest

from harness import old_paths
from skycore.deprecation import SHOWN_ENV, PluginAPIDeprecationWarning

MOVED_MODULES = {
    "harness.cloud.procs": "harness.processes",
    "harness.emulators.registry": "harness.emulator_registry",
    "harness.emulators.s3_gate.protocol": "harness.store_gates.s3.protocol",
}


@pytest.fixture(autouse=True)
def fresh_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No old path counted as shown already, and none imported yet."""
    monkeypatch.delenv(SHOWN_ENV, raising=False)
    for name in [n for n in sys.modules if old_paths.new_path(n) is not None]:
        monkeypatch.delitem(sys.modules, name)
    yield


@pytest.mark.parametrize(("old", "new"), MOVED_MODULES.items())
def test_an_old_path_is_the_new_module_with_a_warning(old: str, new: str) -> None:
    with pytest.warns(PluginAPIDeprecationWarning, match=f"{old} is deprecated: import from {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginAPIDeprecationWarning)
        del sys.modules[old]
        assert importlib.import_module(old) is module  # shown already: silent


def test_every_moved_package_has_a_home() -> None:
    assert old_paths.MOVED_PACKAGES, "no moved package"
    for old, new in old_paths.MOVED_PACKAGES.items():
        assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no such module"
        assert importlib.util.find_spec(old) is not None  # served by the hook


def test_a_path_that_never_moved_is_not_found() -> None:
    assert old_paths.new_path("harness.emulators.nothing_gate") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("harness.emulators.nothing_gate")
