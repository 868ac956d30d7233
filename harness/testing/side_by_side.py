"""Scenarios of one store run side by side: tests that mostly wait (for an outage to end, a
denial to lift, a preempted job to recover) start together in background threads, and each
test then takes its own scenario's outcome (its exception, re-raised as is, or its recorded
properties). Faults scoped to each scenario's own bucket keep the scenarios apart.

A test opts in with ``@scenario(fn)`` (the ``scenario`` marker), where ``fn(store, kit)``
is the scenario's body, and calls ``side_by_side.join(request)``. The module-scoped
``side_by_side`` fixture (harness.testing.plugin) starts every selected scenario of the module's
store the first time a test asks for it, so a store's scenarios wait at the same time
instead of one after another. A scenario gets a :class:`ScenarioKit` instead of the
function-scoped fixtures: buckets, clusters and faults it makes are cleaned up as soon as
it ends.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.paths import home_env

SCENARIO_MARKER = "scenario"
JOIN_TIMEOUT_S = 900.0

Scenario = Callable[[str, "ScenarioKit"], None]


@dataclass
class ScenarioKit:
    """What a background scenario gets instead of function-scoped fixtures: a work
    directory, and factories whose buckets, clusters and faults are cleaned up when the
    scenario ends (clusters are kept with ``keep_on_failure`` if it failed)."""

    store: str
    tmp_path: Path
    keep_on_failure: bool = False
    properties: list[tuple[str, object]] = field(default_factory=list)
    _buckets: list[Any] = field(default_factory=list)
    _clusters: list[Any] = field(default_factory=list)
    _faults: Any = None
    _cleanups: list[Callable[[], None]] = field(default_factory=list)

    def bucket_factory(self, store: str, kind: str) -> Any:
        """A TestBucket of ``kind`` (deleted when the scenario ends)."""
        from harness.testing.buckets import make_test_bucket

        bucket = make_test_bucket(store, kind, self.tmp_path)
        self._buckets.append(bucket)
        return bucket

    def cluster_factory(self, prefix: str = "t") -> Any:
        """A SmokeCluster with a unique name (torn down when the scenario ends)."""
        from harness.testing.clusters import SmokeCluster

        cluster = SmokeCluster.new(prefix, self.tmp_path)
        self._clusters.append(cluster)
        return cluster

    @property
    def store_faults(self) -> Any:
        """A store_faults.StoreFaults (harness.cloud) whose faults end when the scenario ends."""
        if self._faults is None:
            from harness.cloud.store_faults import StoreFaults

            self._faults = StoreFaults()
        return self._faults

    def record_property(self, name: str, value: object) -> None:
        """Like pytest's ``record_property``; handed to the test's report on join."""
        self.properties.append((name, value))

    def on_cleanup(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the scenario ends (before its clusters go down)."""
        self._cleanups.append(fn)

    def close(self, failed: bool) -> None:
        """Clear faults, run cleanups, tear clusters down and delete buckets; every step
        runs even if one fails, and the first failure is raised afterwards."""
        errors: list[BaseException] = []

        def each(fn: Callable[[], None]) -> None:
            try:
                fn()
            except Exception as e:  # keep cleaning the rest
                errors.append(e)

        if self._faults is not None:
            each(self._faults.clear_all)
        for fn in reversed(self._cleanups):
            each(fn)
        if failed and self.keep_on_failure:
            for cluster in self._clusters:
                print(f"\n--keep-on-failure: {cluster.describe_access()}")
        else:
            for cluster in self._clusters:
                each(cluster.down)
        for bucket in self._buckets:
            each(bucket.delete)
        if errors:
            raise errors[0]


class SideBySide:
    """The scenarios of one store, each in its own thread, started together."""

    def __init__(self, store: str, workdir: Path, keep_on_failure: bool = False) -> None:
        self.store = store
        self.workdir = workdir
        self.keep_on_failure = keep_on_failure
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[ScenarioKit]] = {}
        self._kits: dict[str, ScenarioKit] = {}
        self._lock = threading.Lock()

    def start(self, scenarios: list[Scenario]) -> None:
        """Start each scenario (once) in a thread of its own."""
        with self._lock:
            todo = [fn for fn in scenarios if fn.__name__ not in self._futures]
            if not todo:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=max(1, len(todo)), thread_name_prefix=f"scenario-{self.store}"
                )
            for fn in todo:
                self._futures[fn.__name__] = self._pool.submit(self._run, fn)

    def _run(self, fn: Scenario) -> ScenarioKit:
        workdir = self.workdir / fn.__name__
        workdir.mkdir(parents=True, exist_ok=True)
        kit = ScenarioKit(self.store, workdir, self.keep_on_failure)
        self._kits[fn.__name__] = kit
        started = time.monotonic()
        try:
            fn(self.store, kit)
        except BaseException:
            kit.record_property("scenario_wall_s", round(time.monotonic() - started, 1))
            # The scenario's own failure is what the test reports; a cleanup failure after
            # it must not hide it.
            with contextlib.suppress(Exception):
                kit.close(failed=True)
            raise
        kit.record_property("scenario_wall_s", round(time.monotonic() - started, 1))
        kit.close(failed=False)
        return kit

    def join(self, request: pytest.FixtureRequest) -> None:
        """Wait for the test's own scenario (its ``scenario`` marker), hand its recorded
        properties to the test's report and re-raise its exception, if any, unchanged."""
        fn = scenario_of(request.node)
        if fn is None:
            raise pytest.UsageError(f"{request.node.nodeid} has no @pytest.mark.scenario(fn)")
        self.start([fn])
        future = self._futures[fn.__name__]
        try:
            future.result(timeout=JOIN_TIMEOUT_S)
        except TimeoutError:
            raise AssertionError(
                f"scenario {fn.__name__} on {self.store} did not end in {JOIN_TIMEOUT_S:.0f} s"
            ) from None
        finally:
            # What the scenario recorded reaches the report, failed or not.
            kit = self._kits.get(fn.__name__)
            if kit is not None:
                request.node.user_properties.extend(kit.properties)

    def close(self) -> None:
        """Wait for every scenario to end (each cleans up after itself)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def scenario(fn: Scenario) -> pytest.MarkDecorator:
    """``@scenario(fn)`` on a test: ``fn(store, kit)`` is its body, run side by side."""
    return pytest.mark.scenario.with_args(fn)


def scenario_of(item: pytest.Item) -> Scenario | None:
    """The scenario function of a test marked ``@pytest.mark.scenario(fn)``."""
    mark = item.get_closest_marker(SCENARIO_MARKER)
    return mark.args[0] if mark is not None and mark.args else None


def selected_scenarios(session: pytest.Session, module: Any, store: str) -> list[Scenario]:
    """The scenarios of ``module``'s tests selected for ``store`` in this session, whose
    capability needs the store meets (the others are skipped, so never started)."""
    from harness import emulator_registry as registry

    found: list[Scenario] = []
    for item in session.items:
        if getattr(item, "module", None) is not module:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        fn = scenario_of(item)
        if fn is None or params.get("store") != store or fn in found:
            continue
        needs = [c for m in item.iter_markers("requires_capability") for c in m.args]
        cls = registry.get_emulator_class(store)
        if all(cls.supports(c) for c in needs):
            found.append(fn)
    return found


class SideBySideSession:
    """The packs of this worker (one per store), all in one skycore home (SKYCORE_HOME is
    process-wide): the home is set while any pack is open."""

    def __init__(self, root: Path, config_file: Path, keep_on_failure: bool) -> None:
        self.root = root
        self.config_file = config_file
        self.keep_on_failure = keep_on_failure
        self.packs: dict[str, SideBySide] = {}
        self._home: contextlib.ExitStack | None = None

    def _enter_home(self) -> None:
        if self._home is not None:
            return
        from skycore.config import load_config, save_config

        home = self.root / "skycore-home"
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.config_file, home / "config.yaml")
        stack = contextlib.ExitStack()
        stack.enter_context(home_env(home))
        config = load_config()
        config.logs_dir = str(self.root / "sky_logs")
        save_config(config)
        self._home = stack

    def pack(self, session: pytest.Session, module: Any, store: str) -> SideBySide:
        """``store``'s pack, its selected scenarios started if it is not running yet."""
        if store not in self.packs:
            self._enter_home()
            pack = SideBySide(store, self.root / store, self.keep_on_failure)
            self.packs[store] = pack
            pack.start(selected_scenarios(session, module, store))
        return self.packs[store]

    def close(self, store: str) -> None:
        """Wait for ``store``'s scenarios; leave the home once no pack is open."""
        pack = self.packs.pop(store, None)
        try:
            if pack is not None:
                pack.close()
        finally:
            if not self.packs and self._home is not None:
                self._home.close()
                self._home = None

    def close_all(self) -> None:
        """Wait for every pack still open (a worker that ends early)."""
        for store in list(self.packs):
            self.close(store)
