"""pytest plugin of the harness (registered by the ``pytest11`` entry point).

Options ``--aws --gcp --azure`` select stores (none given: all three); a test marked for a
store that was not selected is deselected, never silently passed. Fixtures bring the local
cloud up once per session (safe under pytest-xdist: ``cloud.up`` takes a file lock and is
idempotent) and give each test its own skycore home.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

STORE_OPTIONS = {"aws": "s3", "gcp": "gcs", "azure": "azure"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skycore harness")
    for flag in STORE_OPTIONS:
        group.addoption(
            f"--{flag}", action="store_true", default=False, help=f"run tests for {flag}"
        )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed test's cluster up for debugging",
    )


def pytest_configure(config: pytest.Config) -> None:
    for flag in STORE_OPTIONS:
        config.addinivalue_line("markers", f"{flag}: needs the {flag} store")
    config.addinivalue_line("markers", "slow: slow end-to-end test")
    config.addinivalue_line("markers", "cloud: needs dockerd and the node image")


def selected_clouds(config: pytest.Config) -> list[str]:
    """The clouds chosen on the command line (all when none was chosen)."""
    chosen = [flag for flag in STORE_OPTIONS if config.getoption(f"--{flag}")]
    return chosen or list(STORE_OPTIONS)


def selected_stores(config: pytest.Config) -> list[str]:
    """The store names (s3, gcs, azure) of the selected clouds."""
    return [STORE_OPTIONS[flag] for flag in selected_clouds(config)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = set(selected_clouds(config))
    keep, drop = [], []
    for item in items:
        marked = {flag for flag in STORE_OPTIONS if item.get_closest_marker(flag)}
        (drop if marked and not marked & chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def session_skycore_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A skycore home shared by this worker's tests (config written by the cloud)."""
    root = Path(os.environ.get("HARNESS_HOME", "~/.skycore-harness")).expanduser()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    home = root / "test-homes" / f"{os.getpid()}-{worker}"
    home.mkdir(parents=True, exist_ok=True)
    return home


@pytest.fixture(scope="session")
def node_engine() -> tuple[str, str]:
    """(docker host, node image tag): the engine and image, without the emulators."""
    from harness import cloud

    return cloud.up_docker(say=lambda _msg: None)


@pytest.fixture(scope="session")
def local_cloud(request: pytest.FixtureRequest, session_skycore_home: Path) -> Iterator[object]:
    """The whole local cloud (dockerd, node image, selected emulators), up once per session."""
    from harness import cloud

    previous = os.environ.get("SKYCORE_HOME")
    os.environ["SKYCORE_HOME"] = str(session_skycore_home)
    try:
        stores = tuple(selected_stores(request.config))
        info = cloud.up(say=lambda _msg: None, stores=stores)
        yield info
    finally:
        if previous is None:
            os.environ.pop("SKYCORE_HOME", None)
        else:
            os.environ["SKYCORE_HOME"] = previous


@pytest.fixture
def skycore_home(
    local_cloud: object, session_skycore_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A fresh skycore home for one test: the cloud's config, an empty state DB and logs."""
    from skycore.config import load_config, save_config

    home = tmp_path / "skycore-home"
    home.mkdir()
    shutil.copy2(session_skycore_home / "config.yaml", home / "config.yaml")
    monkeypatch.setenv("SKYCORE_HOME", str(home))
    config = load_config()
    config.logs_dir = str(tmp_path / "sky_logs")
    save_config(config)
    return home
