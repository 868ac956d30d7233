"""Plain helpers of the smoke tests (their fixtures come from the harness plugin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.testing.buckets import SKY_MANAGED, TestBucket


def mounted_buckets(
    bucket_factory: Callable[[str, str], TestBucket], store: str, modes: dict[str, str]
) -> tuple[dict[str, TestBucket], dict[str, Any]]:
    """A new sky-managed bucket on ``store`` per mount point of ``modes`` ({path: mode}):
    (the buckets by mount point, the task's ``file_mounts`` mounting each in its mode)."""
    buckets = {dst: bucket_factory(store, SKY_MANAGED) for dst in modes}
    return buckets, {dst: buckets[dst].mount_entry(mode) for dst, mode in modes.items()}
