"""Which stores a run covers and which tests run on them: the stores chosen with ``--store``
and the alias options (all registered stores when none; a target run's store alone), the
``store`` parameter, deselection of tests marked for other stores, and the skips of a test
whose emulator lacks a capability or that needs the local cloud in a target run."""

from __future__ import annotations

from typing import Any

import pytest

from harness import emulator_registry as registry

CAPABILITY_MARKER = "requires_capability"

LOCAL_CLOUD_FIXTURES = {
    "store_faults": "fault injection needs the local cloud",
    "side_by_side": "fault injection needs the local cloud",
    "upload_events": "the gate's write events need the local cloud",
    "emulators": "the emulators' own processes need the local cloud",
}
"""Fixtures that exist only on the local cloud: a test using one is skipped in a target run,
with the reason."""


def aliases() -> dict[str, str]:
    """alias option name -> store, from the emulators' ``cli_alias`` (the registry's)."""
    return registry.aliases()


def markers() -> dict[str, str]:
    """store -> its pytest marker (and test id)."""
    return {s: c.marker() for s, c in registry.emulator_classes().items()}


def explicit_store_selection(config: pytest.Config) -> list[str]:
    """The stores chosen with --store and the alias options, in order (empty when none)."""
    chosen = list(config.getoption("--store", default=None) or [])
    for alias, store in aliases().items():
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
    marks = markers()
    chosen = {marks[s] for s in selected_stores(config)}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = {m for m in marks.values() if item.get_closest_marker(m)}
        (drop if marked and not marked & chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def store_params(config: pytest.Config) -> list[Any]:
    """One pytest.param per selected store, marked and named with its emulator's marker."""
    marks = markers()
    return [
        pytest.param(store, marks=getattr(pytest.mark, marks[store]), id=marks[store])
        for store in selected_stores(config)
    ]


def all_store_params(group: str | None = None) -> list[Any]:
    """One pytest.param per registered store (deselected later unless selected); with
    ``group``, each store's tests form the xdist group ``GROUP-<marker>`` (one worker)."""
    params = []
    for store, marker in markers().items():
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


def require_capability(store: str, capability: str) -> None:
    """Skip the running test, with the reason, if ``store``'s emulator lacks ``capability``."""
    cls = registry.get_emulator_class(store)
    if not cls.supports(capability):
        pytest.skip(
            f"the {store} emulator ({cls.__name__}) lacks capability '{capability}' that this "
            "test needs"
        )


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
