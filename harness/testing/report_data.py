"""What the matrix report shows (harness.testing.report), as data: written to and read back
from the report's JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CellResult:
    """One mount-matrix case."""

    cloud: str
    mode: str
    kind: str
    outcome: str
    seconds: float


@dataclass
class Timeline:
    """Upload completions of one upload-order run: (seconds since first, key, size). Its keys
    are named in creation order (file-000, file-001, ...)."""

    test_id: str
    points: list[tuple[float, str, int]]


@dataclass
class FaultScenario:
    """One fault scenario on one store (tests/smoke/test_faults.py): what it measured.
    Times are seconds since the scenario started; ``faults`` are spans {kind, start, end}."""

    test_id: str
    store: str
    scenario: str
    outcome: str
    lost: int | None
    """None: the test ended before it counted (it recorded nothing)."""
    order_kept: bool | None
    """None: the scenario does not check the order."""
    durable_s: float | None
    faults: list[dict[str, object]] = field(default_factory=list)
    uploads: list[list[object]] = field(default_factory=list)  # [t, key, size]
    created: list[str] | None = None
    """The keys in the order the writer created them, as the scenario recorded them."""

    def creation_order(self) -> list[str] | None:
        """The keys in creation order: as recorded, or else, when the order was kept, the
        order of their first uploads (the scenario checked that they are the same). None
        when neither is known."""
        if self.created is not None:
            return list(self.created)
        if self.order_kept:
            return list(dict.fromkeys(str(u[1]) for u in self.uploads))
        return None


@dataclass
class ReportData:
    """Everything the report shows."""

    cells: list[CellResult] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    others: list[tuple[str, str, float]] = field(default_factory=list)  # (test id, outcome, s)
    faults: list[FaultScenario] = field(default_factory=list)
    contract: list[str] = field(default_factory=list)
    """The emulator contract's findings, declared deviations and failed checks, a line each."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> ReportData:
        """The data a report's JSON holds (one written before ``created`` existed too)."""
        raw: dict[str, Any] = json.loads(text)
        return cls(
            cells=[CellResult(**c) for c in raw.get("cells", [])],
            timelines=[
                Timeline(t["test_id"], [(float(p[0]), str(p[1]), int(p[2])) for p in t["points"]])
                for t in raw.get("timelines", [])
            ],
            others=[(str(o[0]), str(o[1]), float(o[2])) for o in raw.get("others", [])],
            faults=[FaultScenario(**f) for f in raw.get("faults", [])],
            contract=[str(line) for line in raw.get("contract", [])],
        )
