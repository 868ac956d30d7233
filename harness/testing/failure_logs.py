"""The logs a failed test points to, printed at the end of the pytest run.

For every failed or errored test, the terminal summary gets the last lines of:
- each existing ``*.log`` file named in its failure text (a stage log, a drain log, a
  daemon log copied into the message);
- the emulator and gate logs (``$HARNESS_HOME/logs/<store>.log``, ``gate-<store>.log``) of
  each store the test ran on (its ``[marker]`` test id).

So the next person can act on a CI failure without rerunning it. Each log is printed once
per run, however many failures name it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from harness import emulator_registry as registry
from harness.paths import harness_home
from harness.testing import redaction

TAIL_LINES = 25
MAX_LOGS = 12
_LOG_PATH = re.compile(r"(/[\w.~+@%/-]+?\.log)\b")


def _mentioned_logs(text: str) -> list[Path]:
    out = []
    for match in _LOG_PATH.findall(text):
        path = Path(match)
        if path.is_file():
            out.append(path)
    return out


def _store_logs(nodeid: str) -> list[Path]:
    logs = harness_home() / "logs"
    out = []
    for store, cls in registry.emulator_classes().items():
        if re.search(rf"[\[-]{re.escape(cls.marker())}[\]-]", nodeid):
            out += [logs / f"{store}.log", logs / f"gate-{store}.log"]
    return [p for p in out if p.is_file()]


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as e:
        return f"(unreadable: {e})"
    return "\n".join(text.splitlines()[-lines:])


def logs_for(reports: Iterable[pytest.TestReport]) -> dict[Path, list[str]]:
    """log file -> the failed tests that point to it, in the order first met."""
    found: dict[Path, list[str]] = {}
    for rep in reports:
        text = getattr(rep, "longreprtext", "") or ""
        for path in [*_mentioned_logs(text), *_store_logs(rep.nodeid)]:
            found.setdefault(path, [])
            if rep.nodeid not in found[path]:
                found[path].append(rep.nodeid)
    return found


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the tails of the logs the failures point to (controller only under xdist)."""
    if hasattr(terminalreporter.config, "workerinput"):
        return
    bad = [
        r
        for key in ("failed", "error")
        for r in terminalreporter.stats.get(key, [])
        if isinstance(r, pytest.TestReport)
    ]
    if not bad:
        return
    found = logs_for(bad)
    if not found:
        return
    terminalreporter.section("logs the failures point to")
    for path, tests in list(found.items())[:MAX_LOGS]:
        terminalreporter.line(f"--- {path} (last {TAIL_LINES} lines; for {', '.join(tests)})")
        terminalreporter.line(redaction.active().text(_tail(path)))
    if len(found) > MAX_LOGS:
        terminalreporter.line(
            f"... and {len(found) - MAX_LOGS} more: "
            + ", ".join(str(p) for p in list(found)[MAX_LOGS:])
        )
