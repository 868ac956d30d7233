"""Run one function over many items at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def parallel(fn: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
    """``fn`` on every item in threads (at most 16 at once); results in order; once all are
    done, the first exception is re-raised."""
    if not items:
        return []
    if len(items) == 1:
        return [fn(items[0])]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, it) for it in items]
        excs = [f.exception() for f in futures]
    for e in excs:
        if e is not None:
            raise e
    return [f.result() for f in futures]
