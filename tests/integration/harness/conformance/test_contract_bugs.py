"""The emulator contract tells three outcomes apart, on moto with one seeded bug at a time
(tests/fixtures/buggy_moto.py) behind its own gate in a throw-away harness home:

- a bug the suite relies on is named by its check, worded "the emulator (not your store)
  does X", and skips only the test modules that rely on that check;
- a deviation no test relies on (keys listed folder by folder) is a finding: reported, and
  every test module runs;
- a crash of a package's own code (an emulator whose helper raises AttributeError) is
  reported as that crash, with its traceback, never as something the emulator does."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.accounts import USER
from harness.conformance import MODULES
from harness.conformance.contract import PREFIX, run
from harness.conformance.contract.results import Status
from harness.conformance.contract.verdict import skip_reason
from harness.emulators.s3 import S3Emulator
from harness.processes import LOOPBACK
from harness.testing.contract_summary import line
from tests.integration.helpers import REPO

BUGGY_MOTO = REPO / "tests" / "fixtures" / "buggy_moto.py"
SUITE = [m for m in MODULES if m != "test_emulator_contract"]

pytestmark = [pytest.mark.aws, pytest.mark.cloud]  # each test starts emulator processes


class _BuggyS3(S3Emulator):
    """The S3 emulator on moto with ``bug`` seeded (a name of buggy_moto.BUGS)."""

    bug: ClassVar[str] = ""

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        argv = [sys.executable, str(BUGGY_MOTO), cls.bug, "-H", LOOPBACK, "-p", str(port)]
        return argv, {}


class _WrongEtag(_BuggyS3):
    bug = "wrong-etag"


class _DeepPrefixes(_BuggyS3):
    bug = "deep-prefixes"


class _FolderOrder(_BuggyS3):
    bug = "folder-order"


class _ListedEarly(_BuggyS3):
    bug = "listed-early"


class _CrashingPackage(S3Emulator):
    """moto, honest, with a config section helper that has a bug of its own."""

    def config_section(self, owner: str = USER) -> Any:
        return self.no_such_attribute  # type: ignore[attr-defined]


Checked = Callable[[type[S3Emulator]], tuple[Any, dict[str, str | None]]]
"""``checked(emulator_class)`` -> (outcome, module -> skip reason)"""


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Checked:
    """``checked(emulator_class)``: (outcome, module -> skip reason) of ``emulator_class``
    started in a throw-away harness home."""

    def check(emulator_class: type[S3Emulator]) -> tuple[Any, dict[str, str | None]]:
        monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
        emulator = emulator_class.launch(tmp_path)
        try:
            outcome = run(emulator)
            reasons = {module: skip_reason(emulator, module) for module in SUITE}
        finally:
            emulator.stop()
        return outcome, reasons

    return check


@pytest.mark.parametrize(
    ("emulator_class", "check", "named"),
    [
        (_WrongEtag, "etag", "answers a PUT with an ETag that is not the body's MD5"),
        (_DeepPrefixes, "delimiter", "drops or invents entries of a listing with a delimiter"),
    ],
    ids=["wrong-etag", "deep-prefixes"],
)
def test_a_bug_every_test_relies_on_skips_every_test(
    emulator_class: type[_BuggyS3],
    check: str,
    named: str,
    checked: Checked,
) -> None:
    outcome, reasons = checked(emulator_class)
    assert outcome.checks >= 14
    failed = {r.check: r for r in outcome.of(Status.FAILED)}
    assert check in failed, outcome.failures  # (a wrong ETag fails multipart's too)
    assert failed[check].text.startswith(f"{PREFIX} {named}"), failed[check].text
    assert " was answered " in failed[check].text
    assert not outcome.of(Status.CRASH), outcome.failures
    for module, reason in reasons.items():
        assert reason is not None and reason.startswith(PREFIX), (module, reason)
        assert f"{module} relies on the {check} check" in reason, reason


def test_a_bug_skips_only_the_tests_that_rely_on_it(checked: Checked) -> None:
    outcome, reasons = checked(_ListedEarly)
    failed = outcome.of(Status.FAILED)
    assert [r.check for r in failed] == ["unfinished PUT"], outcome.failures
    assert "lists an object before its PUT completed" in failed[0].text
    skipped = sorted(m for m, reason in reasons.items() if reason is not None)
    assert skipped == ["test_multinode", "test_upload_order"], reasons
    assert not outcome.of(Status.CRASH), outcome.failures


def test_a_finding_skips_nothing_and_is_reported(checked: Checked) -> None:
    outcome, reasons = checked(_FolderOrder)
    assert not outcome.failures, outcome.failures  # the contract test passes
    findings = {r.check: r for r in outcome.of(Status.FINDING)}
    assert "order" in findings, outcome.results
    assert "lists keys out of UTF-8 key order" in findings["order"].text
    assert all(reason is None for reason in reasons.values()), reasons
    summary = line({"store": "s3", **vars(findings["order"])})
    assert summary.startswith("s3: finding order: the emulator (not your store) lists keys")
    assert "no test depends on the order of keys" in summary


def test_a_package_crash_is_reported_as_a_crash(checked: Checked) -> None:
    outcome, reasons = checked(_CrashingPackage)
    crashes = outcome.of(Status.CRASH)
    assert [r.check for r in crashes] == ["unfinished PUT"], outcome.results
    text = crashes[0].text
    assert text.startswith("the unfinished PUT check crashed in the store package's code ("), text
    assert __file__ in text and "AttributeError" in text and "Traceback" in text, text
    assert PREFIX not in text
    assert outcome.failures == [text]  # the contract test fails with the crash
    assert all(reason is None for reason in reasons.values()), reasons  # and skips nothing
