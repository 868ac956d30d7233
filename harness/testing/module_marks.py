"""The module marks (``pytestmark``) that the slow per-store scenario modules share."""

from __future__ import annotations

import pytest

from harness.testing.store_selection import all_store_params


def slow_per_store(group: str) -> list[pytest.MarkDecorator]:
    """The marks of a slow module run once per registered store (deselected unless the
    store is selected) on a gate that records write events, each store's tests in the xdist
    group ``GROUP-<marker>`` (one worker): ``pytestmark = slow_per_store("faults")``."""
    return [
        pytest.mark.requires_capability("records_events"),
        pytest.mark.slow,
        pytest.mark.parametrize("store", all_store_params(group=group), scope="module"),
    ]
