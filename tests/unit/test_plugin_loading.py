"""A store package that fails to load stops only its own store.

Real entry points: a folder on ``sys.path`` holds three installed distributions (a
``*.dist-info`` with ``entry_points.txt`` each): a working store and emulator (written
against an old import path), one whose module fails to import, and one whose entry point
names something that is not a store. The registries are reset before and after.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import emulator_registry as emulators
from skycore import config as config_module
from skycore import plugins, stores
from skycore.config import SkycoreConfig
from skycore.deprecation import SHOWN_ENV
from skycore.errors import StoreLoadError, TaskError
from skycore.storage.common import parse_url
from skycore.task import Task
from tests.unit.harness_in_one_process import run_harness

REPO = Path(__file__).resolve().parents[2]

# The working plug-in imports an old path on purpose (the first test checks its warning).
pytestmark = pytest.mark.filterwarnings("ignore::skycore.deprecation.PluginAPIDeprecationWarning")

GOOD = """
from harness.emulators.s3 import S3Emulator
from harness.procs import LOOPBACK
from skycore.plugin_api import S3Store


class GoodStore(S3Store):
    store_name = "goodstore"
    schemes = ("goodstore",)
    cloud = "goodcloud"
    config_section = "goodstore"


class GoodEmulator(S3Emulator):
    store = "goodstore"
    cli_alias = None
    scheme = "goodstore"
    host = LOOPBACK


NOT_A_CLASS = 42
"""

BROKEN = "from harness.nothing_here import LOOPBACK\n"

DISTS = {
    "skycore_goodstore": (
        "goodstore_plugin",
        GOOD,
        "[skycore.stores]\ngoodstore = goodstore_plugin:GoodStore\n"
        "[harness.emulators]\ngoodstore = goodstore_plugin:GoodEmulator\n",
    ),
    "skycore_linode": (
        "linode_broken",
        BROKEN,
        "[skycore.stores]\nlinode = linode_broken:LinodeStore\n"
        "[harness.emulators]\nlinode = linode_broken:LinodeEmulator\n",
    ),
    "skycore_notastore": (
        "goodstore_plugin",
        GOOD,
        "[skycore.stores]\nnotastore = goodstore_plugin:NOT_A_CLASS\n",
    ),
}
IMPORT_ERROR = "No module named 'harness.nothing_here'"


def install(site: Path) -> None:
    """The three distributions, installed into ``site`` as pip would lay them out."""
    for dist, (module, source, points) in DISTS.items():
        (site / f"{module}.py").write_text(source)
        info = site / f"{dist}-0.1.dist-info"
        info.mkdir()
        name = dist.replace("_", "-")
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(points)


def _reset() -> None:
    stores.reset()
    emulators.reset()
    for module in ("goodstore_plugin", "linode_broken"):
        sys.modules.pop(module, None)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The folder of the three distributions on ``sys.path``; fresh registries and
    warnings."""
    install(tmp_path)
    monkeypatch.setattr(plugins, "_warned", set())
    monkeypatch.delenv(SHOWN_ENV, raising=False)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    _reset()
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        importlib.invalidate_caches()
        _reset()


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning: skipping")]


def test_the_working_store_loads_and_each_broken_package_warns_once(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.warns(DeprecationWarning, match=r"harness\.procs\.LOOPBACK .* harness\.plugin_api"):
        names = stores.store_names()
    assert "goodstore" in names and "s3" in names
    assert "linode" not in names and "notastore" not in names
    assert "goodstore" in emulators.store_names() and "linode" not in emulators.store_names()
    stores.store_names(), emulators.store_names()  # loaded again: no second warning
    lines = warning_lines(capsys.readouterr().err)
    assert len(lines) == 2, lines
    linode, notastore = sorted(lines)
    assert "'linode' of package skycore-linode" in linode and IMPORT_ERROR in linode
    assert "linode_broken:LinodeStore" in linode
    assert "notastore" in notastore and "not a AbstractStore subclass" in notastore


def test_asking_for_the_broken_store_names_its_failure_and_the_fix(site: Path) -> None:
    with pytest.raises(StoreLoadError) as store:
        stores.get_store_class("linode", "file_mounts./data.store")
    message = str(store.value)
    assert message.startswith("file_mounts./data.store: The store 'linode'")
    assert IMPORT_ERROR in message and "Fix or uninstall" in message and "\n" not in message
    with pytest.raises(emulators.EmulatorLoadError, match=IMPORT_ERROR):
        emulators.get_emulator_class("linode")
    with pytest.raises(StoreLoadError, match=IMPORT_ERROR):
        parse_url("linode://bucket/key")
    with pytest.raises(emulators.UnknownEmulatorError):
        emulators.get_emulator_class("nosuchstore")  # an unknown store is still unknown


def test_a_task_naming_the_broken_store_gets_the_load_error(site: Path) -> None:
    with pytest.raises(TaskError) as info:
        Task.from_dict({"file_mounts": {"/a": {"name": "abc", "store": "linode"}}})
    assert "file_mounts./a.store" in str(info.value) and IMPORT_ERROR in str(info.value)
    task = Task.from_dict({"file_mounts": {"/a": {"name": "abc", "store": "goodstore"}}})
    assert task.storage_mounts["/a"].store == "goodstore"


def test_the_broken_stores_config_section_is_kept_unchecked(
    site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "_warned", set())
    stores.store_names()
    capsys.readouterr()  # the packages' own warnings
    config = SkycoreConfig.model_validate({"linode": {"endpoint_url": "http://x"}})
    assert config.section("linode") == {"endpoint_url": "http://x"}
    assert capsys.readouterr().err == ""  # the package's warning already named it
    # a section of a store no package here registers: kept the same way, with its warning
    config = SkycoreConfig.model_validate({"nosuchstore": {"key": "x"}})
    assert config.section("nosuchstore") == {"key": "x"}
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: config.yaml: section 'nosuchstore' is kept but unused")


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SHOWN_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    env["HARNESS_HOME"] = str(site / "harness-home")
    env["COLUMNS"] = "1000"  # rich wraps the error paragraph at the terminal's width
    return env


def _cli(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=_env(site), timeout=120
    )


def test_harness_up_and_conform_for_the_broken_store_are_one_paragraph(site: Path) -> None:
    commands: list[tuple[list[str], list[str]]] = [
        ([], ["up", "--store", "linode"]),
        ([], ["conform", "--store", "linode", "-y"]),
    ]
    up, conform = run_harness(commands, _env(site))
    assert up["code"] == 1, up
    assert "Traceback" not in up["stderr"]
    (error,) = [line for line in up["stderr"].splitlines() if line.startswith("Error:")]
    assert "The emulator 'linode'" in error and IMPORT_ERROR in error, up
    assert len(warning_lines(up["stderr"])) == 1, up  # and the warning line once
    assert conform["code"] == 1 and "Traceback" not in conform["stderr"], conform
    stderr = conform["stderr"]
    assert "Error: The emulator 'linode' (entry point" in stderr and IMPORT_ERROR in stderr


def test_a_process_loading_the_plugins_shows_each_warning_once(site: Path) -> None:
    code = (
        "from harness.emulator_registry import store_names as e\n"
        "from skycore.stores import store_names as s\n"
        "print(sorted(set(s()) & set(e())))\n"
    )
    r = _cli(site, "-c", code)
    assert r.returncode == 0, r.stderr
    assert "'goodstore'" in r.stdout and "linode" not in r.stdout
    assert len(warning_lines(r.stderr)) == 2, r.stderr  # linode (both groups), notastore
    deprecations = [line for line in r.stderr.splitlines() if "is deprecated" in line]
    assert len(deprecations) == 1 and "harness.procs.LOOPBACK" in deprecations[0], r.stderr
