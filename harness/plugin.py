"""pytest plugin of the harness (registered by the ``pytest11`` entry point).

Options ``--aws --gcp --azure`` select stores (none given: all three); a test marked for a
store that was not selected is deselected, never silently passed. Fixtures bring the local
cloud up once per session (safe under pytest-xdist: ``cloud.up`` takes a file lock and is
idempotent) and give each test its own skycore home.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.paths import harness_home
from harness.report_collector import ReportCollector

STORE_OPTIONS = {"aws": "s3", "gcp": "gcs", "azure": "azure"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skycore harness")
    for flag in STORE_OPTIONS:
        group.addoption(
            f"--{flag}", action="store_true", default=False, help=f"run tests for {flag}"
        )
    group.addoption(
        "--matrix-report",
        metavar="PATH",
        default=None,
        help="write the mount matrix and upload-order timeline as HTML (+ .md, .png) to PATH",
    )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed test's cluster up for debugging",
    )


_REPORT: dict[str, ReportCollector] = {}


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--matrix-report", default=None)
    if target and not hasattr(config, "workerinput"):
        _REPORT["collector"] = ReportCollector(Path(target))
    for flag in STORE_OPTIONS:
        config.addinivalue_line("markers", f"{flag}: needs the {flag} store")
    config.addinivalue_line("markers", "slow: slow end-to-end test")
    config.addinivalue_line("markers", "cloud: needs dockerd and the node image")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect outcomes for --matrix-report (runs in the controller under xdist)."""
    collector = _REPORT.get("collector")
    if collector is not None:
        collector.add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write --matrix-report once, from the controller."""
    collector = _REPORT.pop("collector", None)
    if collector is not None and not hasattr(session.config, "workerinput"):
        path = collector.write()
        session.config.get_terminal_writer().line(f"matrix report: {path}")


def selected_clouds(config: pytest.Config) -> list[str]:
    """The clouds chosen on the command line (all when none was chosen)."""
    chosen = [flag for flag in STORE_OPTIONS if config.getoption(f"--{flag}")]
    return chosen or list(STORE_OPTIONS)


def selected_stores(config: pytest.Config) -> list[str]:
    """The store names (s3, gcs, azure) of the selected clouds."""
    return [STORE_OPTIONS[flag] for flag in selected_clouds(config)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = set(selected_clouds(config))
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = {flag for flag in STORE_OPTIONS if item.get_closest_marker(flag)}
        (drop if marked and not marked & chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def session_skycore_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A skycore home shared by this worker's tests (config written by the cloud)."""
    root = harness_home()
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


# --- stores, buckets, clusters -------------------------------------------------------------

CLOUD_OF_STORE = {store: flag for flag, store in STORE_OPTIONS.items()}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``store`` over the selected stores, each param marked with its cloud."""
    explicit = any(
        "store" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")
    )
    if "store" in metafunc.fixturenames and not explicit:
        params = [
            pytest.param(
                store, marks=getattr(pytest.mark, CLOUD_OF_STORE[store]), id=CLOUD_OF_STORE[store]
            )
            for store in selected_stores(metafunc.config)
        ]
        metafunc.parametrize("store", params, scope="module")


@pytest.fixture
def bucket_factory(local_cloud: object, tmp_path: Path) -> Iterator[object]:
    """``make(store, kind)`` -> TestBucket; every bucket made is deleted after the test."""
    from harness.buckets import make_test_bucket

    made: list = []

    def make(store: str, kind: str) -> object:
        bucket = make_test_bucket(store, kind, tmp_path)
        made.append(bucket)
        return bucket

    yield make
    _each(lambda bucket: bucket.delete(), made)


@pytest.fixture
def upload_events(local_cloud: object):
    """``upload_events(bucket)`` -> the gate's write events for a TestBucket, in order."""
    return lambda bucket: bucket.events()


@pytest.fixture
def cluster_factory(
    request: pytest.FixtureRequest, skycore_home: Path, tmp_path: Path
) -> Iterator[object]:
    """``make(prefix)`` -> a SmokeCluster with a unique name; always torn down afterwards
    (unless --keep-on-failure and the test failed)."""
    from harness.clusters import SmokeCluster

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
