"""Turns pytest reports into the matrix report's data (see harness.testing.report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.testing import contract_summary
from harness.testing.report import (
    CellResult,
    FaultScenario,
    ReportData,
    Timeline,
    parse_matrix_id,
    render,
)
from harness.testing.side_by_side import SCENARIO_MARKER
from harness.testing.store_selection import markers

TIMELINE_PROPERTY = "upload_timeline"
FAULTS_PROPERTY = "fault_scenario"
"""A fault scenario's record (JSON): store, scenario, lost, order_kept, durable_s, faults,
uploads ([t, key, size]) and, optionally, created (the keys in creation order)."""


def outcome_of(report: pytest.TestReport) -> str | None:
    """passed / failed / xfailed / xpassed / skipped for the phase that decides the test."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if xfail else "passed"
        if report.skipped:
            return "xfailed" if xfail else "skipped"
        return "failed"
    if report.when == "setup" and (report.failed or report.skipped):
        return "failed" if report.failed else "skipped"
    return None


def _keys(value: object) -> list[str] | None:
    """A scenario's keys in creation order, as it recorded them (None if it did not)."""
    return [str(k) for k in value] if isinstance(value, list) else None


def unrecorded(nodeid: str, outcome: str) -> FaultScenario:
    """A fault scenario's test that ended (failed, skipped) before it recorded what it
    measured: named by its test, on the store of its ``store`` parameter."""
    name, _, param = nodeid.split("::")[-1].split("@", 1)[0].partition("[")
    param = param.rstrip("]")
    store = {marker: s for s, marker in markers().items()}.get(param, param)
    return FaultScenario(nodeid, store, name, outcome, None, None, None)


class ReportCollector:
    """Accumulates outcomes and timelines; writes the report at the end of the session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = ReportData()

    def add(self, report: pytest.TestReport) -> None:
        outcome = outcome_of(report)
        if outcome is None:
            return
        recorded = False
        for name, value in report.user_properties:
            if name == TIMELINE_PROPERTY:
                points = [tuple(p) for p in json.loads(str(value))]
                self.data.timelines.append(Timeline(report.nodeid, points))  # type: ignore[arg-type]
            elif name == contract_summary.PROPERTY:
                self.data.contract.append(contract_summary.line(json.loads(str(value))))
            elif name == FAULTS_PROPERTY:
                recorded = True
                row = json.loads(str(value))
                self.data.faults.append(
                    FaultScenario(
                        test_id=report.nodeid,
                        store=str(row["store"]),
                        scenario=str(row["scenario"]),
                        outcome=outcome,
                        lost=int(row["lost"]),
                        order_kept=row["order_kept"],
                        durable_s=row.get("durable_s"),
                        faults=list(row.get("faults", [])),
                        uploads=list(row.get("uploads", [])),
                        created=_keys(row.get("created")),
                    )
                )
        if not recorded and outcome != "passed" and SCENARIO_MARKER in report.keywords:
            self.data.faults.append(unrecorded(report.nodeid, outcome))
        seconds = report.duration
        matrix = parse_matrix_id(report.nodeid)
        if matrix:
            self.data.cells.append(CellResult(*matrix, outcome=outcome, seconds=seconds))
        elif "tests/smoke/" in report.nodeid or "conformance/" in report.nodeid:
            name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
            rest = report.nodeid.split("::", 1)[1] if "::" in report.nodeid else ""
            self.data.others.append((f"{name}::{rest}", outcome, seconds))

    def write(self) -> Path:
        html_path, _md = render(self.data, self.path)
        self.path.with_suffix(".json").write_text(self.data.to_json())
        return html_path
