"""Targets shared by the benchmarks: each compares its figures with its stated targets and
exits non-zero when one is missed (or could not be measured), unless run with --no-check.

A missing measurement is ``None`` (JSON ``null``), never 0: a target whose figure is missing
counts as missed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One stated target: ``value`` (None: not measured) must be below ``limit``."""

    name: str
    value: float | None
    limit: float
    unit: str = "s"

    @property
    def met(self) -> bool:
        """True only for a measured value under the limit."""
        return self.value is not None and self.value < self.limit

    def describe(self) -> str:
        """``name: 1.23 s < 5 s met`` (or ``not measured ... MISSED``)."""
        got = "not measured" if self.value is None else f"{self.value:.2f} {self.unit}".rstrip()
        return f"{self.name}: {got} < {self.limit:g} {self.unit}".rstrip() + (
            " met" if self.met else " MISSED"
        )

    def as_json(self) -> dict[str, object]:
        """What the benchmark's JSON records for this target."""
        return {"value": self.value, "limit": self.limit, "unit": self.unit, "met": self.met}


def add_check_option(parser: argparse.ArgumentParser) -> None:
    """``--no-check``: an exploratory run reports the targets but exits 0 when one is missed
    (a failed trial or missing measurement still exits 1)."""
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="exploratory run: report the targets, but exit 0 even if one is missed",
    )


def verdict(targets: list[Target], no_check: bool, failures: list[str] | None = None) -> int:
    """Print every target and return the exit status: 1 if a trial failed (``failures``) or
    a target's figure was not measured, whatever ``no_check``; 1 if a target was missed,
    unless ``no_check``; else 0."""
    for t in targets:
        print(f"target {t.describe()}")
    for f in failures or []:
        print(f"FAILED: {f}")
    missed = [t.name for t in targets if not t.met]
    failed = list(failures or []) + [t.name for t in targets if t.value is None]
    if failed:
        print(f"{len(failed)} failure(s) (a failed trial or a figure not measured): exit 1")
        return 1
    if not missed:
        print("all targets met")
        return 0
    if no_check:
        print(f"{len(missed)} target(s) missed; exit 0 because of --no-check")
        return 0
    print(f"{len(missed)} target(s) missed: exit 1 (--no-check for exploratory runs)")
    return 1


@dataclass(frozen=True)
class AtMost(Target):
    """A target whose ``value`` may reach its ``limit`` (``value <= limit``)."""

    @property
    def met(self) -> bool:
        return self.value is not None and self.value <= self.limit

    def describe(self) -> str:
        got = "not measured" if self.value is None else f"{self.value:.2f} {self.unit}".rstrip()
        return f"{self.name}: {got} <= {self.limit:g} {self.unit}".rstrip() + (
            " met" if self.met else " MISSED"
        )
