"""The fixtures of the local cloud: the cloud itself (or a target run's stand-in for it),
skycore homes, buckets, clusters, store faults, side-by-side scenarios and node shells. Each
fixture cleans up what it made, even when some of that clean-up fails."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.paths import harness_home, home_env
from harness.testing.store_selection import require_capability, selected_stores


@pytest.fixture(scope="session")
def session_skycore_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A skycore home shared by this worker's tests (config written by the cloud)."""
    return new_session_home(harness_home(), os.environ.get("PYTEST_XDIST_WORKER", "main"))


def new_session_home(root: Path, worker: str) -> Path:
    """A new, empty folder under ``root``/test-homes for one session's skycore home. Never
    one an earlier session used: process ids come round again, and the cloud's config is
    merged into what the folder holds, so an old session's sections would come with it."""
    parent = root / "test-homes"
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-{worker}-", dir=parent))


@pytest.fixture(scope="session")
def node_engine() -> tuple[str, str]:
    """(docker host, node image tag): the engine and image, without the emulators."""
    from harness.cloud import cloud

    return cloud.up_docker(say=lambda _msg: None)


@pytest.fixture(scope="session")
def local_cloud(request: pytest.FixtureRequest, session_skycore_home: Path) -> Iterator[object]:
    """The whole local cloud (dockerd, node image, selected emulators), up once per session."""
    from harness.cloud import cloud
    from harness.testing import access

    with home_env(session_skycore_home):
        target = access.target()
        if target is not None:
            config = _target_cloud(target)
            try:
                yield config
            finally:
                config.unlink(missing_ok=True)  # the target's credentials leave no copy
            return
        stores = tuple(selected_stores(request.config))
        info = cloud.up(say=lambda _msg: None, stores=stores)
        use_recipe(request.config.getoption("recipe"))
        yield info


def use_recipe(name: str) -> None:
    """Make ``name`` the mount recipe of the current skycore home's config (checked: an
    unknown or broken recipe stops the session with the recipe's error)."""
    from skycore.config import load_config, save_config
    from skycore.storage import recipes

    config = load_config()
    if config.mount_recipe == name:
        return
    config.mount_recipe = name
    recipes.active(config)
    save_config(config)


def _target_cloud(target: Any) -> Path:
    """A target run's cloud: the local engine and node image for the nodes, and a skycore
    config whose only store section is the target's user account (never the local gate)."""
    from harness.accounts import USER
    from harness.cloud import cloud
    from skycore.config import DockerConfig, SkycoreConfig, save_config
    from skycore.stores import get_store_class

    host, image = cloud.up_docker(say=lambda _msg: None)
    section = get_store_class(target.store).config_section
    config = SkycoreConfig(
        docker=DockerConfig(host=host, image=image), **{section: target.section(USER)}
    )
    return save_config(config)


@pytest.fixture
def skycore_home(
    local_cloud: object, session_skycore_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh skycore home for one test: the cloud's config, an empty state DB and logs. In
    a target run its config (the target's credentials) is removed after the test."""
    from harness.testing import access
    from skycore.config import load_config, save_config

    home = tmp_path / "skycore-home"
    home.mkdir()
    shutil.copy2(session_skycore_home / "config.yaml", home / "config.yaml")
    monkeypatch.setenv("SKYCORE_HOME", str(home))
    config = load_config()
    config.logs_dir = str(tmp_path / "sky_logs")
    save_config(config)
    yield home
    if access.target() is not None:
        (home / "config.yaml").unlink(missing_ok=True)


@pytest.fixture
def bucket_factory(local_cloud: object, tmp_path: Path) -> Iterator[object]:
    """``make(store, kind)`` -> TestBucket; every bucket made is deleted after the test."""
    from harness.testing.buckets import make_test_bucket

    made: list = []

    def make(store: str, kind: str) -> object:
        bucket = make_test_bucket(store, kind, tmp_path)
        made.append(bucket)
        return bucket

    yield make
    _each(lambda bucket: bucket.delete(), made)


@pytest.fixture
def upload_events(local_cloud: object):
    """``upload_events(bucket)`` -> the gate's write events for a TestBucket, in order; the
    test is skipped (reason shown) if its emulator does not record events."""

    def events(bucket: Any) -> Any:
        require_capability(bucket.store, "records_events")
        return bucket.events()

    return events


@pytest.fixture
def store_faults(local_cloud: object) -> Iterator[object]:
    """Faults of the stores as context managers (harness.cloud.store_faults.StoreFaults):
    ``with store_faults.outage(store, seconds=30, bucket=b): ...``; also errors, latency,
    bandwidth, stream_bandwidth (``stream-bandwidth``), reset, deny, corrupt. Scope them to
    the test's bucket so that tests can share a store. Every fault started is cleared after
    the test."""
    from harness.cloud.store_faults import StoreFaults

    faults = StoreFaults()
    yield faults
    faults.clear_all()


@pytest.fixture
def cluster_factory(
    request: pytest.FixtureRequest, skycore_home: Path, tmp_path: Path
) -> Iterator[object]:
    """``make(prefix)`` -> a SmokeCluster with a unique name; always torn down afterwards
    (unless --keep-on-failure and the test failed)."""
    from harness.testing.clusters import SmokeCluster

    made: list[SmokeCluster] = []

    def make(prefix: str = "t") -> SmokeCluster:
        cluster = SmokeCluster.new(prefix, tmp_path)
        made.append(cluster)
        return cluster

    yield make
    if request.config.getoption("--keep-on-failure") and _failed(request):
        for cluster in made:
            print(f"\n--keep-on-failure: {cluster.describe_access()}")
    else:
        _each(lambda cluster: cluster.down(), made)


@pytest.fixture(scope="session")
def side_by_side_session(
    request: pytest.FixtureRequest,
    local_cloud: object,
    session_skycore_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[object]:
    """This worker's side-by-side packs (harness.testing.side_by_side.SideBySideSession)."""
    from harness.testing.side_by_side import SideBySideSession

    manager = SideBySideSession(
        tmp_path_factory.mktemp("side-by-side"),
        session_skycore_home / "config.yaml",
        bool(request.config.getoption("--keep-on-failure")),
    )
    try:
        yield manager
    finally:
        manager.close_all()


@pytest.fixture(scope="module")
def side_by_side(
    request: pytest.FixtureRequest, store: str, side_by_side_session: Any
) -> Iterator[object]:
    """The module's scenarios of ``store`` (tests marked ``scenario(fn)``), started together
    the first time a test asks; each test calls ``join(request)``. Parametrize ``store``
    with ``all_store_params(group=...)`` so that a store's scenarios share one worker.
    Waits for the store's scenarios at the end."""
    pack = side_by_side_session.pack(request.session, request.module, store)
    try:
        yield pack
    finally:
        side_by_side_session.close(store)


@pytest.fixture
def node_shell(local_cloud: object):
    """``node_shell(cluster, rank, cmd)`` -> (exit code, output) of ``cmd`` run on a node."""
    return lambda cluster, rank, cmd, timeout=120: cluster.shell(cmd, rank=rank, timeout=timeout)


def _each(cleanup: Callable[[Any], None], things: list[Any]) -> None:
    """Clean up every item even if some fail; then raise the first failure."""
    errors: list[BaseException] = []
    for thing in things:
        try:
            cleanup(thing)
        except Exception as e:  # keep cleaning the rest
            errors.append(e)
    if errors:
        raise errors[0]


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "rep_call", None)
    return bool(report is not None and report.failed)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Keep each phase's report on the item, so fixtures can tell a failed test."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
