"""The emulator contract catches a broken stand-in: moto with one seeded bug at a time
(tests/fixtures/buggy_moto.py), behind its own gate in a throw-away harness home. Each bug
is named by its check, worded "the emulator (not your store) does X", and the rest of the
suite for that store would be skipped with that sentence."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cloud.procs import LOOPBACK
from harness.conformance.contract import PREFIX, run
from harness.conformance.contract.verdict import skip_reason
from harness.emulators.s3 import S3Emulator

BUGGY_MOTO = Path(__file__).parents[1] / "fixtures" / "buggy_moto.py"


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


@pytest.mark.aws
@pytest.mark.cloud  # starts emulator processes of its own
@pytest.mark.parametrize(
    ("emulator_class", "named", "kept"),
    [
        (_WrongEtag, "answers a PUT with an ETag that is not the body's MD5", "delimiter"),
        (_DeepPrefixes, "drops or invents entries of a listing with a delimiter", "etag"),
    ],
    ids=["wrong-etag", "deep-prefixes"],
)
def test_a_seeded_bug_is_named_by_its_check(
    emulator_class: type[_BuggyS3],
    named: str,
    kept: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    emulator = emulator_class.launch(tmp_path)
    try:
        outcome = run(emulator)
        reason = skip_reason(emulator)
    finally:
        emulator.stop()
    assert outcome.checks >= 9
    assert outcome.failures, "the contract passed a stand-in with a seeded bug"
    assert any(f.startswith(f"{PREFIX} {named}") for f in outcome.failures), outcome.failures
    assert " was answered " in outcome.failures[0]
    # The bug is this check's alone: an unrelated check still passes.
    unrelated = {"etag": "ETag", "delimiter": "listing with a delimiter"}[kept]
    assert not any(unrelated in f for f in outcome.failures), outcome.failures
    # What the rest of the suite for the store is skipped with.
    assert reason is not None and reason.startswith(PREFIX), reason
    assert "the rest of it is skipped for s3" in reason
