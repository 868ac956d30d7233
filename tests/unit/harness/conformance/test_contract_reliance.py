"""The emulator contract's tables stay true: every check of every API says which test
modules rely on it (naming modules the suite has), the checks the suite does not rely on are
findings, a Deviation naming no check fails, and a crash is told from an answer."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from harness.conformance import MODULES
from harness.conformance.contract import PREFIX, ContractFailure, _Judge
from harness.conformance.contract.crash import crash_report, is_crash
from harness.conformance.contract.results import Status
from harness.emulator_registry import get_emulator_class, store_names
from harness.emulators.deviations import Deviation
from harness.testing.contract_summary import line

PROBES = sorted(
    {p for s in store_names() if (p := get_emulator_class(s).contract_probes) is not None}
)


@pytest.mark.parametrize("path", PROBES)
def test_every_check_says_which_modules_rely_on_it(path: str) -> None:
    module = importlib.import_module(path)
    checks = [name for name, _ in module.Probes(None).checks()]
    assert sorted(module.RELIANCE) == sorted(checks), path
    for check, reliance in module.RELIANCE.items():
        unknown = [m for m in reliance.modules if m != "*" and m not in MODULES]
        assert not unknown, f"{path} {check}: no such test module {unknown}"
        assert reliance.why, f"{path} {check}: say why"


@pytest.mark.parametrize("path", PROBES)
def test_what_no_test_relies_on_is_a_finding(path: str) -> None:
    reliance = importlib.import_module(path).RELIANCE
    for check in ("order", "paging", "conditional GET"):
        assert reliance[check].finding_only, check
    for check in ("delimiter", "ranged GET"):
        assert reliance[check].covers("test_mount_matrix"), check


def _judge(*deviations: Deviation) -> _Judge:
    emulator = SimpleNamespace(implementation="minio", known_deviations=deviations)
    return _Judge(emulator, importlib.import_module(PROBES[-1]).RELIANCE, False)  # type: ignore[arg-type]


def test_a_declared_deviation_is_reported_and_one_that_passes_fails() -> None:
    judge = _judge(Deviation("ranged GET", "serves ranges its own way"))
    failure = ContractFailure("serves a ranged GET wrongly", "GetObject k Range: bytes=1-2", "x")
    deviation = judge.raised("ranged GET", failure)
    assert deviation.status is Status.DEVIATION
    assert deviation.text == "serves ranges its own way (GetObject k Range: bytes=1-2: x)"
    assert judge.passed("ranged GET").status is Status.STALE
    assert judge.raised("delimiter", failure).status is Status.FAILED
    assert judge.raised("order", failure).status is Status.FINDING


def test_a_deviation_of_another_server_or_no_check_is_not_taken() -> None:
    judge = _judge(
        Deviation("order", "lists by folder", implementation="another server"),
        Deviation("odrer", "a typo"),
    )
    assert "order" not in judge.declared
    (unknown,) = judge.unknown_deviations(("order", "paging"))
    assert unknown.status is Status.STALE and "'odrer'" in unknown.text


def _raise_type_error() -> None:
    len(None)  # type: ignore[arg-type]


def test_a_programming_error_of_our_code_is_a_crash_with_its_traceback() -> None:
    with pytest.raises(TypeError) as caught:
        _raise_type_error()
    assert is_crash(caught.value, "skycore_linode")
    report = crash_report("unfinished PUT", caught.value)
    assert report.startswith("the unfinished PUT check crashed in the store package's code (")
    assert "Traceback" in report and "_raise_type_error" in report and PREFIX not in report


def test_an_error_raised_inside_an_sdk_is_an_answer() -> None:
    from botocore.exceptions import ClientError
    from botocore.utils import merge_dicts

    with pytest.raises(TypeError) as caught:  # raised in botocore's own code
        merge_dicts(None, {"Key": "k"})  # type: ignore[arg-type]
    assert not is_crash(caught.value, "skycore_linode")
    error = ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
    assert not is_crash(error, "skycore_linode")


def test_a_summary_line_names_the_store_the_outcome_and_the_check() -> None:
    failed: dict[str, Any] = {"store": "b2", "status": "failed", "check": "unfinished PUT"}
    failed["text"] = "t\nmore"
    failed.update(modules=["test_upload_order", "test_multinode"], why="w")
    assert line(failed) == (
        "b2: failed check unfinished PUT (skips test_upload_order, test_multinode): t"
    )
    finding = {"store": "s3", "status": "finding", "check": "order", "text": "t", "why": "w"}
    assert line(finding) == "s3: finding order: t (w)"


def test_the_stand_in_and_the_service_differ_check_by_check() -> None:
    from harness.conformance.contract.compare import differences
    from harness.conformance.contract.results import CheckResult, Outcome

    stand_in = Outcome(
        [
            CheckResult("etag", Status.PASSED, ""),
            CheckResult("order", Status.PASSED, ""),
            CheckResult("conditional GET", Status.DEVIATION, "ignores If-Match"),
        ]
    )
    service = Outcome(
        [
            CheckResult("etag", Status.PASSED, ""),
            CheckResult("order", Status.FINDING, "lists keys by folder\nmore"),
            CheckResult("conditional GET", Status.DEVIATION, "ignores If-Match"),
        ]
    )
    (found,), agree = differences(stand_in, service)
    assert agree == 2
    assert found.line("s3") == "s3 order: stand-in passed; service finding: lists keys by folder"
