"""A function run in a thread of its own, for a test that acts while a command runs (a
stop, a start, a job): whether it still runs, then its outcome, with a hang guard."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Background:
    """``fn()`` in a thread of its own: whether it still runs, then its outcome."""

    def __init__(self, fn: Callable[[], Any], name: str) -> None:
        self._outcome: list[tuple[bool, Any]] = []
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._outcome.append((True, fn()))
        except BaseException as e:  # handed to result()
            self._outcome.append((False, e))

    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self, timeout: float) -> Any:
        """What ``fn`` returned (its exception re-raised); AssertionError if it still runs
        after ``timeout`` s (a hang guard)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} still runs after {timeout:.0f} s"
        ok, value = self._outcome[0]
        if not ok:
            raise value
        return value
