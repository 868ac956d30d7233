"""skycore's old import paths (skycore.old_paths): a gone module's names still resolve, to the
same objects, each warning once that it moved."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator

import pytest

from skycore import old_paths
from skycore.deprecation import SHOWN_ENV, PluginAPIDeprecationWarning


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No old name counted as shown already (each test sees the first use)."""
    monkeypatch.delenv(SHOWN_ENV, raising=False)
    yield


@pytest.mark.parametrize(
    ("path", "name"), [(p, n) for p, table in old_paths.MOVED_NAMES.items() for n in table]
)
def test_an_old_name_resolves_from_its_new_home_with_a_warning(path: str, name: str) -> None:
    module = importlib.import_module(path)
    new = old_paths.MOVED_NAMES[path][name]
    assert module.DEPRECATED[name] == new
    with pytest.warns(PluginAPIDeprecationWarning) as caught:
        value = getattr(module, name)
    (warning,) = caught
    assert str(warning.message).startswith(f"{path}.{name} is deprecated: import {name} from {new}")
    assert value is getattr(importlib.import_module(new), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginAPIDeprecationWarning)
        assert getattr(module, name) is value  # shown already: silent


def test_the_old_modules_have_no_files_and_the_hook_is_installed_once() -> None:
    for path in old_paths.MOVED_NAMES:
        module = importlib.import_module(path)
        assert getattr(module, "__file__", None) is None, f"{path} is a real module again"
    old_paths.install()
    assert sum(isinstance(f, old_paths.OldPathFinder) for f in sys.meta_path) == 1


def test_a_name_that_never_moved_is_an_attribute_error() -> None:
    module = importlib.import_module("skycore.storage.registry")
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        module.nothing  # noqa: B018
