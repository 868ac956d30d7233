"""The one poller of the tests, of the harness's test helpers and of the benchmarks
(bench/common.py; the tests reach it as tests.polling): wait until something holds, or fail
naming what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    poll: float = 0.1,
    error: type[Exception] = AssertionError,
) -> Any:
    """Poll ``check`` until it returns something truthy and return that value; after
    ``timeout`` seconds raise ``error`` (by default AssertionError: the test fails) naming
    ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
