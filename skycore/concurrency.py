"""Run one function over many items at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

T = TypeVar("T")
WAKE_S = 0.25
"""How often the main thread wakes while it waits for the workers."""


def parallel(fn: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
    """``fn`` on every item in threads (at most 16 at once); results in order; once all are
    done, the first exception is re-raised."""
    if not items:
        return []
    if len(items) == 1:
        return [fn(items[0])]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, it) for it in items]
        # Wait in short steps: a Ctrl-C that reaches a worker thread only sets Python's
        # flag, which the main thread acts on when it wakes (see runner.pipe_lines).
        while wait(futures, timeout=WAKE_S).not_done:
            pass
        excs = [f.exception() for f in futures]
    for e in excs:
        if e is not None:
            raise e
    return [f.result() for f in futures]
