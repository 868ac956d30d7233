"""The one maker of unique names in the tests: buckets, clusters, keys and files that no other
test, run or pytest-xdist worker uses (the ``unique_name`` fixture of tests/conftest.py is
this function)."""

from __future__ import annotations

import uuid


def unique_name(prefix: str, length: int = 10) -> str:
    """``<prefix>-<length hex digits>``: lowercase, digits and dashes, so it is a valid bucket
    name in every store and a valid cluster name as long as ``prefix`` is."""
    return f"{prefix}-{uuid.uuid4().hex[:length]}"
