"""The recipe matrix (harness.recipes.matrix): the same scenarios on whichever mount recipe
the session uses, one row each. Run it per store and recipe, e.g.
``pytest tests/matrix -n 2 --dist loadgroup --store s3 --recipe skypilot`` (``make
skypilot-matrix`` runs every pair and builds the report).

The rows reach the controller with the test reports (a user property); at the end of the
session it writes ``build/recipe-matrix/<store>-<recipe>.json`` per store and recipe it met,
with the command that ran it, failed tests included (with their failure line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.recipes.matrix import SessionRows

OUT_DIR = Path("build", "recipe-matrix")
_SESSION: list[SessionRows] = []


def pytest_configure(config: pytest.Config) -> None:
    """Collect rows in the controller (or the only process)."""
    if not hasattr(config, "workerinput") and not _SESSION:
        _SESSION.append(SessionRows.for_invocation(config.invocation_params.args))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _SESSION:
        _SESSION[0].add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the session's runs (the controller only)."""
    if not _SESSION or hasattr(session.config, "workerinput"):
        return
    rows = _SESSION.pop()
    for path in rows.write(session.config.rootpath / OUT_DIR):
        session.config.get_terminal_writer().line(f"\nrecipe matrix: {path}")
