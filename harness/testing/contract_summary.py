"""The emulator contract's findings, declared deviations and failed checks, one line each
in the run's terminal summary (``pytest --store``, ``harness conform``), gathered from the
contract test's reports (under xdist, in the controller)."""

from __future__ import annotations

import json
from typing import Any

import pytest

PROPERTY = "emulator_contract"
"""A user property of test_emulator_contract: one check that did not pass (JSON: store,
status, check, text, modules)."""

COMPARE_PROPERTY = "stand_in_vs_service"
"""A user property of a target run's contract test under --compare-stand-in: one line."""

_LINES: dict[tuple[str, str], dict[str, Any]] = {}
_COMPARED: list[str] = []


def record(record_property: Any, store: str, result: Any) -> None:
    """Record ``result`` (a contract CheckResult) of ``store`` for the summary."""
    data = {"store": store, "status": str(result.status), "check": result.check}
    data.update(text=result.text, why=result.why, modules=list(result.modules))
    record_property(PROPERTY, json.dumps(data))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == PROPERTY:
            data = json.loads(str(value))
            _LINES[(data["store"], data["check"])] = data
        elif name == COMPARE_PROPERTY:
            _COMPARED.append(str(value))


def line(data: dict[str, Any]) -> str:
    """One summary line: store, what the check's outcome means, the sentence."""
    text = str(data["text"]).splitlines()[0]
    if data["status"] == "failed":
        skipped = ", ".join(data["modules"])
        return f"{data['store']}: failed check {data['check']} (skips {skipped}): {text}"
    why = f" ({data['why']})" if data.get("why") else ""
    return f"{data['store']}: {data['status']} {data['check']}: {text}{why}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _LINES:
        terminalreporter.section("emulator contract: findings and deviations")
        for key in sorted(_LINES):
            terminalreporter.line(line(_LINES[key]))
    if _COMPARED:
        terminalreporter.section("emulator contract: the local stand-in against the service")
        for text in _COMPARED:
            terminalreporter.line(text)
