"""What a run reports beyond pass and fail: the ``--matrix-report`` (collected from every
test report, written once by the controller) and, in a target run, how each upload-order
test observed the order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.testing.report_collector import ReportCollector

ORDER_POLL_PROPERTY = "upload_order_poll"
"""A user property of the upload-order tests in a target run: how the order was observed."""

_REPORT: dict[str, ReportCollector] = {}
_ORDER_POLLS: list[tuple[str, str]] = []


def start(config: pytest.Config) -> None:
    """Begin collecting for ``--matrix-report`` when it is given (the controller only)."""
    target = config.getoption("--matrix-report", default=None)
    if target and not hasattr(config, "workerinput"):
        _REPORT["collector"] = ReportCollector(Path(target))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect outcomes for --matrix-report (runs in the controller under xdist)."""
    for name, value in report.user_properties:
        if name == ORDER_POLL_PROPERTY and report.when == "call":
            _ORDER_POLLS.append((report.nodeid, str(value)))
    collector = _REPORT.get("collector")
    if collector is not None:
        collector.add(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How a target run observed upload order (poll interval, resolution), per test."""
    if _ORDER_POLLS:
        terminalreporter.section("upload order, observed by polling the bucket")
        for nodeid, line in _ORDER_POLLS:
            terminalreporter.line(f"{nodeid.split('::')[-1]}: {line}")


def write(session: pytest.Session) -> None:
    """Write --matrix-report once, from the controller."""
    collector = _REPORT.pop("collector", None)
    if collector is not None and not hasattr(session.config, "workerinput"):
        path = collector.write()
        session.config.get_terminal_writer().line(f"matrix report: {path}")
