"""Credentials out of reports: every test report's text (failure, captured output, skip
reason, properties) has the target file's secrets replaced before any reporter (terminal,
JUnit XML, the HTML matrix report) sees it. The run's one redactor is :func:`active` (it
masks nothing until :func:`activate` gives it a target's secrets)."""

from __future__ import annotations

from typing import Any

import pytest

MASK = "***"


class Redactor:
    """Replaces each known secret with ``***`` in strings and in pytest reports."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """``value`` with every secret masked."""
        for secret in self.secrets:
            value = value.replace(secret, MASK)
        return value

    def _contains(self, value: str) -> bool:
        return any(secret in value for secret in self.secrets)

    def report(self, report: pytest.TestReport) -> None:
        """Mask secrets in ``report`` in place (longrepr, sections, user properties)."""
        if not self.secrets:
            return
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            report.longrepr = (longrepr[0], longrepr[1], self.text(str(longrepr[2])))
        elif longrepr is not None:
            rendered = str(longrepr)
            if self._contains(rendered):
                report.longrepr = self.text(rendered)
        report.sections = [(title, self.text(body)) for title, body in report.sections]
        report.user_properties = [
            (name, self._value(value)) for name, value in report.user_properties
        ]

    def _value(self, value: Any) -> Any:
        return self.text(value) if isinstance(value, str) else value


_ACTIVE: dict[str, Redactor] = {}


def activate(secrets: list[str]) -> None:
    """Mask ``secrets`` (a target's credentials) in everything this process reports."""
    _ACTIVE["run"] = Redactor(secrets)


def active() -> Redactor:
    """This process's redactor (one with no secrets when no target is active)."""
    return _ACTIVE.get("run") or Redactor([])
