"""harness.env_keys: between tests pytest's PYTEST_CURRENT_TEST stays in os.environ, so a
thread iterating os.environ (as every proxy lookup does) never meets a vanished key."""

from __future__ import annotations

import os
import threading
import urllib.request

import _pytest.runner
import pytest

from harness import env_keys

UPDATES = 50_000  # set/end pairs; pytest's delete raised KeyError within 1,500-2,000 here
RACE_UPDATES = 40 * UPDATES
"""How long the race is given to show (it stops at its first error): on a loaded machine the
lookup thread runs less often, so the demonstration gets far more than it needs idle."""


def iterate_while_tests_change(
    update: object, item: pytest.Item, updates: int = UPDATES
) -> list[BaseException]:
    """Run ``update(item, 'call')`` / ``update(item, None)`` ``updates`` times (until the
    thread raised) while a thread looks up proxies from the environment; what it raised."""
    errors: list[BaseException] = []
    done = threading.Event()

    def lookups() -> None:
        while not done.is_set():
            try:
                urllib.request.getproxies_environment()
            except BaseException as e:  # what the scenario thread would get
                errors.append(e)
                return

    thread = threading.Thread(target=lookups)
    thread.start()
    try:
        for _ in range(updates):
            update(item, "call")  # type: ignore[operator]
            update(item, None)  # type: ignore[operator]
            if errors:
                break
    finally:
        done.set()
        thread.join()
    return errors


def test_the_plugin_installed_it() -> None:
    assert _pytest.runner._update_current_test_var is env_keys._update_keeping_key


def test_no_current_test_keeps_the_key(request: pytest.FixtureRequest) -> None:
    env_keys._update_keeping_key(request.node, None)
    assert os.environ[env_keys.VAR] == ""
    env_keys._update_keeping_key(request.node, "call")
    assert request.node.nodeid in os.environ[env_keys.VAR]


def test_a_thread_iterating_the_environment_sees_no_vanished_key(
    request: pytest.FixtureRequest,
) -> None:
    assert iterate_while_tests_change(env_keys._update_keeping_key, request.node) == []


def test_pytests_own_update_races_with_such_a_thread(request: pytest.FixtureRequest) -> None:
    """The cause, shown: with pytest's delete the same thread meets a KeyError (which makes
    the test above one that can fail)."""
    errors = iterate_while_tests_change(env_keys._original, request.node, RACE_UPDATES)
    os.environ.setdefault(env_keys.VAR, "")
    assert errors and isinstance(errors[0], KeyError), errors
