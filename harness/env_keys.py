"""Keep os.environ's set of keys fixed while side-by-side scenario threads run.

pytest sets ``PYTEST_CURRENT_TEST`` when a test starts and deletes it when the test ends. A
scenario thread meanwhile iterates ``os.environ`` whenever a boto3 client is made or a
``requests`` call is sent (both look up proxies through
``urllib.request.getproxies_environment``), and that iteration snapshots the keys first and
reads each value after: a key deleted in between raises ``KeyError: 'PYTEST_CURRENT_TEST'``
in the scenario (seen in a smoke run; reproduced within ~1,500 set/delete pairs by a thread
calling ``getproxies_environment``). Between tests the key is therefore kept, empty, instead
of deleted: its value still changes, the set of keys no longer does.
"""

from __future__ import annotations

import os
from typing import Any

import _pytest.runner

VAR = "PYTEST_CURRENT_TEST"
_original = _pytest.runner._update_current_test_var


def _update_keeping_key(item: Any, when: Any) -> None:
    """pytest's own update, except that "no current test" sets the variable to '' instead of
    deleting it."""
    if when is None:
        os.environ[VAR] = ""
    else:
        _original(item, when)


def keep_current_test_key() -> None:
    """Install :func:`_update_keeping_key` in pytest's runner (idempotent)."""
    os.environ.setdefault(VAR, "")
    _pytest.runner._update_current_test_var = _update_keeping_key  # type: ignore[assignment]
