"""pytest plugin of the harness (registered by the ``pytest11`` entry point).

``--store NAME`` (repeatable; choices: the registered stores, harness.emulator_registry) selects
stores; each emulator's ``cli_alias`` is an alias option (``--<alias>``), its pytest marker
and its test id. None given: every registered store. A test marked for a store that was not
selected is deselected, never silently passed; a test marked
``requires_capability(NAME)`` (or calling :func:`require_capability`) is skipped, with the
reason shown, on an emulator that lacks the capability. Fixtures bring the local cloud up
once per session (safe under pytest-xdist: ``cloud.up`` takes a file lock and is idempotent)
and give each test its own skycore home.

This module wires the parts, each a plugin of its own (``pytest_plugins``): options and
markers, store selection, a target run, the local cloud's fixtures, the xdist-group check,
the run's reports and a Ctrl-C that always stops the run; harness.testing.failure_logs
prints the logs the failures point to.
"""

from __future__ import annotations

import pytest

from harness import env_keys
from harness.testing import failure_logs

PARTS = (
    "harness.testing.options",
    "harness.testing.store_selection",
    "harness.testing.cloud_fixtures",
    "harness.testing.xdist_groups",
    "harness.testing.report_hooks",
    "harness.testing.contract_summary",
    "harness.testing.target_run",
    "harness.testing.interrupts",
)
"""The plugin's parts, each registered as a plugin of its own."""

# pytest rewrites the asserts of the plugins it imports; the parts this module imports
# first must be marked before that import, or pytest warns that it cannot rewrite them.
pytest.register_assert_rewrite(*PARTS)

from harness.testing import options, report_hooks, target_run  # noqa: E402
from harness.testing.report_hooks import ORDER_POLL_PROPERTY  # noqa: E402
from harness.testing.store_selection import (  # noqa: E402
    CAPABILITY_MARKER,
    LOCAL_CLOUD_FIXTURES,
    all_store_params,
    explicit_store_selection,
    require_capability,
    selected_stores,
    store_params,
)

__all__ = [
    "CAPABILITY_MARKER",
    "LOCAL_CLOUD_FIXTURES",
    "ORDER_POLL_PROPERTY",
    "all_store_params",
    "explicit_store_selection",
    "require_capability",
    "selected_stores",
    "store_params",
]

pytest_plugins = list(PARTS)


def pytest_configure(config: pytest.Config) -> None:
    env_keys.keep_current_test_key()
    target_run.activate(config)
    if not config.pluginmanager.is_registered(failure_logs):
        config.pluginmanager.register(failure_logs, "harness.testing.failure_logs")
    report_hooks.start(config)
    options.register_markers(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Delete a target run's leftover buckets, then write --matrix-report."""
    target_run.clean_up(session)
    report_hooks.write(session)
