"""How pytest-xdist hands out the tests: a run whose ``xdist_group`` marks would have no
effect is refused, not run split; the tests marked ``slow`` are handed out first."""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: put the tests marked ``slow`` first, each kept in its order.

    The controller hands out tests in collection order (with ``--dist loadgroup``, the
    groups with the most tests first, then the rest in this order), so a slow test collected
    last would run alone on one worker while the others have finished. Every worker sorts
    the same collection the same way, so they still agree on it."""
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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
