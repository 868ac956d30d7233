"""pytest plugin of the harness (registered by the ``pytest11`` entry point).

``--store NAME`` (repeatable; choices: the registered stores, harness.emulators.registry) selects
stores; each emulator's ``cli_alias`` is an alias option (``--<alias>``), its pytest marker
and its test id. None given: every registered store. A test marked for a store that was not
selected is deselected, never silently passed; a test marked
``requires_capability(NAME)`` (or calling :func:`require_capability`) is skipped, with the
reason shown, on an emulator that lacks the capability. Fixtures bring the local cloud up
once per session (safe under pytest-xdist: ``cloud.up`` takes a file lock and is idempotent)
and give each test its own skycore home.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.emulators import registry
from harness.emulators.base import CAPABILITIES
from harness.paths import harness_home, home_env
from harness.testing.redaction import Redactor
from harness.testing.report_collector import ReportCollector

CAPABILITY_MARKER = "requires_capability"


def _aliases() -> dict[str, str]:
    """alias option name -> store, from the emulators' ``cli_alias``."""
    return {c.cli_alias: s for s, c in registry.emulator_classes().items() if c.cli_alias}


def _markers() -> dict[str, str]:
    """store -> its pytest marker (and test id)."""
    return {s: c.marker() for s, c in registry.emulator_classes().items()}


def _store_option(value: str) -> str:
    """--store's value: a store name or an emulator's alias, optionally as 'smoke-NAME' (the
    per-store tox envs pass their own name); anything else lists the registered stores."""
    import argparse

    name = value.removeprefix("smoke-")
    store = name if name in registry.store_names() else registry.store_of_alias(name)
    if store is None:
        known = ", ".join(registry.store_names())
        aliases = ", ".join(sorted(_aliases()))
        raise argparse.ArgumentTypeError(
            f"unknown store '{value}'; registered stores: {known} (aliases: {aliases})"
        )
    return store


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skycore harness")
    names = registry.store_names()
    group.addoption(
        "--store",
        action="append",
        default=[],
        metavar="NAME",
        type=_store_option,
        help=f"run tests for store NAME or its alias (repeatable; default: all of "
        f"{', '.join(names)}); 'smoke-NAME' (a tox env name) is read as NAME",
    )
    for alias, store in _aliases().items():
        group.addoption(
            f"--{alias}", action="store_true", default=False, help=f"the same as --store {store}"
        )
    group.addoption(
        "--matrix-report",
        metavar="PATH",
        default=None,
        help="write the mount matrix and upload-order timeline as HTML (+ .md, .png) to PATH",
    )
    group.addoption(
        "--target",
        metavar="FILE",
        default=None,
        help="run against the endpoint and accounts of a target file instead of the local "
        "cloud ('local', the default); see docs/conformance.md",
    )
    group.addoption(
        "--run-id",
        metavar="ID",
        default=None,
        help="the run id every bucket of a target run carries (default: a new one)",
    )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed test's cluster up for debugging",
    )


_REPORT: dict[str, ReportCollector] = {}
_REDACTOR: dict[str, Redactor] = {}
ORDER_POLL_PROPERTY = "upload_order_poll"
"""A user property of the upload-order tests in a target run: how the order was observed."""
_ORDER_POLLS: list[tuple[str, str]] = []


def _activate_target(config: pytest.Config) -> None:
    """Load ``--target`` (refused with one clear line if unusable) and point this process at
    it. The run id is the controller's (``--run-id`` or a new one); its xdist workers get it
    through ``workerinput`` (pytest_configure_node), so they name buckets as it cleans up."""
    from harness.targets import TargetError, check_run_id, load_target, new_run_id
    from harness.testing import access

    workerinput = getattr(config, "workerinput", None)
    given = config.getoption("--run-id", default=None)
    try:
        if workerinput is not None and workerinput.get(RUN_ID_KEY):
            run_id = workerinput[RUN_ID_KEY]
        else:
            run_id = check_run_id(given) if given else new_run_id()
    except TargetError as e:
        raise pytest.UsageError(str(e)) from None
    config.option.run_id = run_id
    path = config.getoption("--target", default=None)
    target = None
    if path and path != "local":
        try:
            target = load_target(path)
        except TargetError as e:
            raise pytest.UsageError(str(e)) from None
        chosen = explicit_store_selection(config)
        if chosen and chosen != [target.store]:
            raise pytest.UsageError(
                f"--store {' '.join(chosen)} conflicts with the target file {path}, which is "
                f"for store '{target.store}'; drop --store or use a target of that store."
            )
        _REDACTOR["target"] = Redactor(target.secrets())
    access.activate(target, run_id)


RUN_ID_KEY = "skycore_run_id"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the controller's run id to a worker."""
    node.workerinput[RUN_ID_KEY] = node.config.option.run_id


def pytest_report_header(config: pytest.Config) -> list[str]:
    """In a target run: where it runs, the run's bucket names and what it creates."""
    from harness.conformance import plan
    from harness.testing import access

    target = access.target()
    if target is None:
        return []
    lines = [
        f"target: {target.path} (store {target.store}); every bucket of this run carries "
        f"{access.bucket_tag()} and is deleted when the run ends"
    ]
    if not os.environ.get(plan.PLAN_SHOWN_ENV):  # harness conform showed it before asking
        lines.append(plan.describe([target.store], f"the endpoint in {target.path}"))
    return lines


def pytest_configure(config: pytest.Config) -> None:
    from harness import env_keys, failure_logs

    env_keys.keep_current_test_key()
    _activate_target(config)

    if not config.pluginmanager.is_registered(failure_logs):
        config.pluginmanager.register(failure_logs, "harness.failure_logs")
    target = config.getoption("--matrix-report", default=None)
    if target and not hasattr(config, "workerinput"):
        _REPORT["collector"] = ReportCollector(Path(target))
    for store, marker in _markers().items():
        config.addinivalue_line("markers", f"{marker}: needs the {store} store")
    config.addinivalue_line(
        "markers",
        f"{CAPABILITY_MARKER}(name): skip for a store whose emulator lacks capability name "
        f"(one of {', '.join(CAPABILITIES)})",
    )
    config.addinivalue_line("markers", "slow: slow end-to-end test")
    config.addinivalue_line(
        "markers",
        "scenario(fn): the test's body fn(store, kit) runs side by side with the module's "
        "other scenarios of its store (harness.testing.side_by_side; the side_by_side fixture)",
    )
    config.addinivalue_line("markers", "cloud: needs dockerd and the node image")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """In an xdist worker with ``--dist loadgroup``: refuse the run if the xdist_group marks
    had no effect (pytest-xdist groups tests by renaming their nodeids; under pytest 9 that
    silently does nothing, and tests meant to share a worker, a module fixture or an
    emulator would run split across workers)."""
    config = session.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    grouped = [item for item in session.items if item.get_closest_marker("xdist_group")]
    if grouped and not any("@" in item.nodeid for item in grouped):
        raise pytest.UsageError(
            f"--dist loadgroup ignores the xdist_group marks with pytest {pytest.__version__} "
            "and this pytest-xdist (nodeids cannot be renamed), so grouped tests would be "
            "split across workers. Install the versions pyproject.toml pins (make venv)."
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect outcomes for --matrix-report (runs in the controller under xdist)."""
    for name, value in report.user_properties:
        if name == ORDER_POLL_PROPERTY and report.when == "call":
            _ORDER_POLLS.append((report.nodeid, str(value)))
    collector = _REPORT.get("collector")
    if collector is not None:
        collector.add(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How a target run observed upload order (poll interval, resolution), per test."""
    if _ORDER_POLLS:
        terminalreporter.section("upload order, observed by polling the bucket")
        for nodeid, line in _ORDER_POLLS:
            terminalreporter.line(f"{nodeid.split('::')[-1]}: {line}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write --matrix-report once, from the controller; in a target run, delete every
    bucket of this run that a test left behind (also after a failure or Ctrl-C)."""
    from harness.testing import access

    target = access.target()
    if target is not None and not hasattr(session.config, "workerinput"):
        from harness.conformance.cleanup import delete_run_buckets

        writer = session.config.get_terminal_writer()
        try:
            for line in delete_run_buckets(target, access.run_id()):
                writer.line(line)
        except Exception as e:  # say what is left; the report below is still written
            redactor = _REDACTOR.get("target")
            message = f"{type(e).__name__}: {e}"
            writer.line(
                f"clean-up of run {access.bucket_tag()} failed ("
                f"{redactor.text(message) if redactor else message}); delete what is left "
                f"with 'harness conform --sweep --target {target.path}' after an hour",
                red=True,
            )
    collector = _REPORT.pop("collector", None)
    if collector is not None and not hasattr(session.config, "workerinput"):
        path = collector.write()
        session.config.get_terminal_writer().line(f"matrix report: {path}")


def explicit_store_selection(config: pytest.Config) -> list[str]:
    """The stores chosen with --store and the alias options, in order (empty when none)."""
    chosen = list(config.getoption("--store", default=None) or [])
    for alias, store in _aliases().items():
        if config.getoption(f"--{alias}", default=False) and store not in chosen:
            chosen.append(store)
    return chosen


def selected_stores(config: pytest.Config) -> list[str]:
    """The stores chosen with --store and the alias options (all registered when none); in a
    target run, the target's store alone."""
    from harness.testing import access

    target = access.target()
    if target is not None:
        return [target.store]
    return explicit_store_selection(config) or list(registry.store_names())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markers = _markers()
    chosen = {markers[s] for s in selected_stores(config)}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = {m for m in markers.values() if item.get_closest_marker(m)}
        (drop if marked and not marked & chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def require_capability(store: str, capability: str) -> None:
    """Skip the running test, with the reason, if ``store``'s emulator lacks ``capability``."""
    cls = registry.get_emulator_class(store)
    if not cls.supports(capability):
        pytest.skip(
            f"the {store} emulator ({cls.__name__}) lacks capability '{capability}' that this "
            "test needs"
        )


LOCAL_CLOUD_FIXTURES = {
    "store_faults": "fault injection needs the local cloud",
    "side_by_side": "fault injection needs the local cloud",
    "upload_events": "the gate's write events need the local cloud",
    "emulators": "the emulators' own processes need the local cloud",
}
"""Fixtures that exist only on the local cloud: a test using one is skipped in a target run,
with the reason."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip, in a target run, a test that needs the local cloud; apply
    ``requires_capability`` markers to the test's ``store`` (or ``store_name``)."""
    from harness.testing import access

    if access.target() is not None:
        for name in getattr(item, "fixturenames", ()):
            if name in LOCAL_CLOUD_FIXTURES:
                pytest.skip(f"{LOCAL_CLOUD_FIXTURES[name]} (this run's target is a target file)")
    params = getattr(getattr(item, "callspec", None), "params", {})
    marks = list(item.iter_markers(CAPABILITY_MARKER))
    if not marks:
        return
    store = params.get("store", params.get("store_name"))
    if store is None:
        raise pytest.UsageError(
            f"{item.nodeid} is marked {CAPABILITY_MARKER} but has no 'store' parameter"
        )
    for mark in marks:
        for capability in mark.args:
            require_capability(store, capability)


@pytest.fixture(autouse=True)
def _emulator_contract_kept(request: pytest.FixtureRequest) -> None:
    """A conformance test of a store whose emulator failed the emulator contract is
    skipped with the contract's reason (local cloud only; the contract test itself runs).
    The local cloud is brought up first: the verdict is about the running emulator."""
    from harness.testing import access

    module = getattr(request.module, "__name__", "")
    if not module.startswith("harness.conformance.") or module.endswith(".test_emulator_contract"):
        return
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    store = params.get("store")
    if store is None or access.target() is not None:
        return
    request.getfixturevalue("local_cloud")
    from harness.conformance.contract.verdict import skip_reason
    from harness.emulators import fleet

    reason = skip_reason(fleet.get(store))
    if reason is not None:
        pytest.skip(reason)


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
        yield cloud.up(say=lambda _msg: None, stores=stores)


def _target_cloud(target: Any) -> Path:
    """A target run's cloud: the local engine and node image for the nodes, and a skycore
    config whose only store section is the target's user account (never the local gate)."""
    from harness.accounts import USER
    from harness.cloud import cloud
    from skycore.config import DockerConfig, SkycoreConfig, save_config
    from skycore.storage.registry import get_store_class

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


# --- stores, buckets, clusters -------------------------------------------------------------


def store_params(config: pytest.Config) -> list[Any]:
    """One pytest.param per selected store, marked and named with its emulator's marker."""
    markers = _markers()
    return [
        pytest.param(store, marks=getattr(pytest.mark, markers[store]), id=markers[store])
        for store in selected_stores(config)
    ]


def all_store_params(group: str | None = None) -> list[Any]:
    """One pytest.param per registered store (deselected later unless selected); with
    ``group``, each store's tests form the xdist group ``GROUP-<marker>`` (one worker)."""
    params = []
    for store, marker in _markers().items():
        marks = [getattr(pytest.mark, marker)]
        if group:
            marks.append(pytest.mark.xdist_group(f"{group}-{marker}"))
        params.append(pytest.param(store, marks=marks, id=marker))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``store`` over the selected stores, each param marked with its marker."""
    explicit = any(
        "store" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")
    )
    if "store" in metafunc.fixturenames and not explicit:
        metafunc.parametrize("store", store_params(metafunc.config), scope="module")


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
    """Faults of the stores as context managers (harness.cloud.chaos.StoreFaults):
    ``with store_faults.outage(store, seconds=30, bucket=b): ...``; also errors, latency,
    bandwidth, reset, deny. Scope them to the test's bucket so that tests can share a store.
    Every fault started is cleared after the test."""
    from harness.cloud.chaos import StoreFaults

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


@pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_makereport")
def _redacted_report(item: pytest.Item, call: pytest.CallInfo[None]):
    """Mask a target's credentials in the report before any other wrapper or reporter sees
    it (trylast: the innermost wrapper)."""
    report = yield
    redactor = _REDACTOR.get("target")
    if redactor is not None:
        redactor.report(report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Mask a target's credentials in a collection error too."""
    redactor = _REDACTOR.get("target")
    if redactor is not None and report.longrepr is not None:
        rendered = str(report.longrepr)
        if redactor.text(rendered) != rendered:
            report.longrepr = redactor.text(rendered)
