"""What the emulator contract found, check by check, and what it means for the suite's
test modules (which are skipped, with which sentence)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """One check's outcome."""

    PASSED = "passed"
    FAILED = "failed"
    """Failed, and some test modules rely on it: those are skipped (a stand-in)."""
    FINDING = "finding"
    """Failed, and no test relies on it: reported only."""
    DEVIATION = "deviation"
    """Failed as the emulator declared it would: reported only."""
    STALE = "stale deviation"
    """Passed although declared to fail: the contract test fails."""
    CRASH = "crash"
    """The harness's or the package's own code raised: the contract test fails."""


@dataclass
class CheckResult:
    """One check: its outcome, the sentence reporting it, the test modules that rely on it
    (``*``: all) and why."""

    check: str
    status: Status
    text: str
    modules: list[str] = field(default_factory=list)
    why: str = ""

    def covers(self, module: str) -> bool:
        return module in self.modules or "*" in self.modules


@dataclass
class Outcome:
    """Every check's result; ``product``: the emulator runs the store's own server."""

    results: list[CheckResult] = field(default_factory=list)
    product: bool = False

    @property
    def checks(self) -> int:
        return len(self.results)

    def of(self, *statuses: Status) -> list[CheckResult]:
        return [r for r in self.results if r.status in statuses]

    @property
    def failures(self) -> list[str]:
        """What fails the contract test: relied-on failures, stale deviations, crashes."""
        return [r.text for r in self.of(Status.FAILED, Status.STALE, Status.CRASH)]

    @property
    def findings(self) -> list[str]:
        return [f"{r.text} ({r.why})" if r.why else r.text for r in self.of(Status.FINDING)]

    @property
    def deviations(self) -> list[str]:
        return [r.text for r in self.of(Status.DEVIATION)]

    def blocking(self, module: str) -> list[CheckResult]:
        """The failed checks test module ``module`` relies on (none for the product itself:
        its tests then tell about the store)."""
        if self.product:
            return []
        return [r for r in self.of(Status.FAILED) if r.covers(module)]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        results = [
            CheckResult(**{**r, "status": Status(r["status"])}) for r in data.get("results", [])
        ]
        return cls(results, bool(data.get("product", False)))
