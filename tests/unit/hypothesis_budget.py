"""Example counts that follow the loaded Hypothesis profile (root conftest.py).

A property that needs more or fewer examples than the profile's default writes its count
for the ``dev`` profile (Hypothesis' 100 per property); :func:`examples` scales it by the
loaded profile's budget, so ``fast`` runs a tenth of it and ``deep`` five times it."""

from __future__ import annotations

from hypothesis import settings

DEV_EXAMPLES = 100
"""The ``dev`` profile's examples per property: the scale the counts are written in."""

LEAST = 5
"""The fewest examples a scaled count gives (unless the count itself is smaller)."""


def examples(dev_count: int) -> int:
    """``dev_count`` scaled to the loaded profile, at least :data:`LEAST`."""
    scaled = dev_count * settings().max_examples // DEV_EXAMPLES
    return max(min(LEAST, dev_count), scaled)
