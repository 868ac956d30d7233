"""Secrets are masked in every part of a report a reporter prints or writes."""

from __future__ import annotations

import pytest

from harness.testing.redaction import MASK, Redactor

SECRET = "skycore-user-secret-key-000000000000001"


def report(longrepr: object) -> pytest.TestReport:
    return pytest.TestReport(
        "t.py::test", ("t.py", 1, "test"), {}, "failed", longrepr, "call",
        sections=[("Captured stdout call", f"key={SECRET}\n")],
        user_properties=[("p", f"x {SECRET}"), ("n", 3)],
    )  # fmt: skip


@pytest.mark.parametrize(
    "longrepr", [f"AssertionError: {SECRET}", ("t.py", 1, f"Skipped: {SECRET}"), None]
)
def test_every_part_is_masked(longrepr: object) -> None:
    r = report(longrepr)
    Redactor([SECRET, ""]).report(r)
    assert SECRET not in str(r.longrepr) and SECRET not in repr(r.sections)
    assert r.sections[0][1] == f"key={MASK}\n"
    assert r.user_properties == [("p", f"x {MASK}"), ("n", 3)]


def test_longer_secrets_first() -> None:
    assert Redactor(["abc", "abcdef"]).text("abcdef abc") == f"{MASK} {MASK}"
