"""The benchmarks' clock. Every duration is monotonic. Times taken by another process on this
machine with the wall clock (the gate's event times, ``time.time_ns()``) are mapped onto the
benchmark's monotonic clock by the offset between the two clocks, sampled in the benchmark's
own process at the start of a run, at its end, and at marks in between.

A run during which that offset moved by more than ``MAX_DRIFT_NS`` (the wall clock was
stepped or slewed hard) is invalid: a figure that mixes the two clocks cannot be trusted. It
is reported as invalid, run again (at most ``ATTEMPTS`` runs in all), and never averaged in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

MAX_DRIFT_NS = 50_000_000  # 50 ms
ATTEMPTS = 3  # runs of one case, at most, until one is valid

R = TypeVar("R")


def wall_offset_ns() -> int:
    """The wall clock minus the monotonic clock, now (nanoseconds)."""
    return time.time_ns() - time.monotonic_ns()


def drift_ns(offsets: list[int]) -> int:
    """How far the offset moved across ``offsets`` (largest minus smallest; 0 for one)."""
    return max(offsets) - min(offsets) if offsets else 0


def offsets_valid(offsets: list[int], limit_ns: int = MAX_DRIFT_NS) -> bool:
    """True when the offset was sampled at least twice and moved by at most ``limit_ns``."""
    return len(offsets) >= 2 and drift_ns(offsets) <= limit_ns


def wall_to_monotonic_ns(wall_ns: int, offset_ns: int) -> int:
    """A wall-clock time (``time.time_ns()``) on the monotonic clock, given the offset."""
    return wall_ns - offset_ns


@dataclass
class ClockWatch:
    """The offsets sampled during one run: ``start()`` samples the first, ``mark()`` and
    ``stop()`` the next ones. ``sample`` is the sampler (tests give their own)."""

    sample: Callable[[], int] = wall_offset_ns
    offsets_ns: list[int] = field(default_factory=list)

    @classmethod
    def start(cls, sample: Callable[[], int] = wall_offset_ns) -> ClockWatch:
        watch = cls(sample)
        watch.mark()
        return watch

    def mark(self) -> None:
        """Sample the offset now."""
        self.offsets_ns.append(self.sample())

    stop = mark

    @property
    def drift_ns(self) -> int:
        return drift_ns(self.offsets_ns)

    @property
    def valid(self) -> bool:
        return offsets_valid(self.offsets_ns)

    def to_monotonic_ns(self, wall_ns: int) -> int:
        """``wall_ns`` mapped by the offset sampled at the start."""
        return wall_to_monotonic_ns(wall_ns, self.offsets_ns[0])

    def as_json(self) -> dict[str, object]:
        """What a run's JSON records of its clock."""
        return {"clock_drift_ms": round(self.drift_ns / 1e6, 3), "clock_valid": self.valid}


def until_valid(
    run: Callable[[], R], valid: Callable[[R], bool], attempts: int = ATTEMPTS
) -> tuple[R | None, list[R]]:
    """Call ``run`` until ``valid`` accepts its result, at most ``attempts`` times: (the valid
    result, or None when none was; the invalid results, oldest first)."""
    invalid: list[R] = []
    for _ in range(attempts):
        result = run()
        if valid(result):
            return result, invalid
        invalid.append(result)
    return None, invalid
