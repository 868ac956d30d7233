"""Consistency rules a benchmark's own figures must obey: no negative duration, no part longer
than its whole, steps in their order, counts that add up. Each rule returns the problems it
found, one sentence per figure naming it (an empty list: consistent). A benchmark that finds
one reports it as a failure (``INCONSISTENT`` on its output, exit 1) and never averages the
figure in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

Figures = Mapping[str, float | int | None]


def negatives(figures: Figures) -> list[str]:
    """A problem for each figure below zero (None: not measured, no problem)."""
    return [f"{k} is negative ({v})" for k, v in figures.items() if v is not None and v < 0]


def parts_over_whole(
    whole_name: str, whole: float | None, parts: Figures, slack: float = 0.0
) -> list[str]:
    """A problem for each part longer than the whole (by more than ``slack``)."""
    if whole is None:
        return []
    return [
        f"{k} ({v}) is longer than {whole_name} ({whole})"
        for k, v in parts.items()
        if v is not None and v > whole + slack
    ]


def in_order(steps: Sequence[tuple[str, float | None]], slack: float = 0.0) -> list[str]:
    """A problem for each measured step earlier than the measured step before it (by more
    than ``slack``): ``steps`` are (name, time since the same start), in the order they must
    happen."""
    known = [(k, v) for k, v in steps if v is not None]
    return [
        f"{k} ({v}) comes before {pk} ({pv})"
        for (pk, pv), (k, v) in pairwise(known)
        if v < pv - slack
    ]


def counts_add_up(total_name: str, total: int, parts: Mapping[str, int]) -> list[str]:
    """A problem when the parts' counts do not sum to the total."""
    got = sum(parts.values())
    if got == total:
        return []
    return [f"{total_name} ({total}) is not the sum of its parts ({' + '.join(parts)} = {got})"]


def at_most(limit_name: str, limit: int, counts: Figures) -> list[str]:
    """A problem for each count over ``limit`` (e.g. files seen over files written)."""
    return [
        f"{k} ({v}) is more than {limit_name} ({limit})"
        for k, v in counts.items()
        if v is not None and v > limit
    ]
