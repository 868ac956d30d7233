"""The recipe matrix's rows and promises (harness.recipes.matrix): which recipe makes which
promise, a check that fails only for a promise its recipe makes and records the row either
way, and the session's rows written per store and recipe from real pytest reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.recipes.matrix import (
    KNOWN_BROKEN,
    ROW_PROPERTY,
    KnownBrokenHolds,
    Promise,
    PromiseBroken,
    Row,
    SessionRows,
    check,
    check_all,
    makes,
)


def test_skycore_makes_every_promise_skypilot_only_its_own() -> None:
    assert all(makes("skycore", p) for p in Promise)
    assert makes("skypilot", Promise.NOTHING_LOST_AT_JOB_END) is not None
    assert makes("skypilot", Promise.ORDER, transfers=1) is not None
    assert makes("skypilot", Promise.ORDER) is None  # the default: 4 transfers
    assert makes("skypilot", Promise.ORDER, transfers=4) is None
    for promise in (Promise.NOTHING_LOST, Promise.WRITER_NEVER_WAITS, Promise.DRAINED_BEFORE_STOP):
        assert makes("skypilot", promise) is None
    assert not any(makes("some-plugin", p) for p in Promise)  # unknown: recorded only


class Properties(list[tuple[str, object]]):
    """What record_property was given, in order."""

    def __call__(self, name: str, value: object) -> None:
        self.append((name, value))

    def last_row(self) -> dict[str, Any]:
        return dict(json.loads(str([v for n, v in self if n == ROW_PROPERTY][-1])))


def test_a_broken_promise_fails_only_where_the_recipe_makes_it() -> None:
    record = Properties()
    row = Row("order-default", "s3", "skypilot")
    check("skypilot", Promise.ORDER, False, "file-3 before file-2", row=row, record=record)
    saved = record.last_row()
    assert saved["verdicts"] == [
        {"promise": "order kept", "ok": False, "made": False, "detail": "file-3 before file-2"}
    ]
    ordered = Row("job-scale", "s3", "skypilot", transfers=1)
    with pytest.raises(PromiseBroken, match=r"skypilot promises 'order kept' \(only with"):
        check("skypilot", Promise.ORDER, False, "file-3 first", row=ordered, record=record)
    assert record.last_row()["scenario"] == "job-scale"  # recorded before it failed


def test_a_known_break_is_an_expected_failure_until_it_holds() -> None:
    record = Properties()
    row = Row("order-1", "s3", "skypilot", transfers=1)
    with pytest.raises(pytest.xfail.Exception, match=r"skypilot breaks 'order kept'"):
        check("skypilot", Promise.ORDER, False, "file-1 first", row=row, record=record)
    assert record.last_row()["verdicts"][0]["ok"] is False  # recorded, the cell shows it
    healed = Row("order-1", "s3", "skypilot", transfers=1)
    with pytest.raises(KnownBrokenHolds, match="remove its entry from KNOWN_BROKEN"):
        check("skypilot", Promise.ORDER, True, "in order", row=healed, record=record)
    assert set(KNOWN_BROKEN) == {("skypilot", Promise.ORDER, "order-1")}


def test_every_verdict_is_recorded_before_the_failure() -> None:
    record = Properties()
    row = Row("stop-start", "s3", "skycore")
    verdicts = [
        (Promise.DRAINED_BEFORE_STOP, False, "3 of 20 missing at stop"),
        (Promise.NOTHING_LOST, True, "0 of 20 missing"),
        (Promise.ORDER, False, "s-005 first"),
    ]
    with pytest.raises(PromiseBroken) as raised:
        check_all("skycore", verdicts, row=row, record=record)
    assert "'drained before a stop'" in str(raised.value) and "'order kept'" in str(raised.value)
    assert [v["promise"] for v in record.last_row()["verdicts"]] == [p.value for p, *_ in verdicts]
    with pytest.raises(ValueError, match="on a row of skycore"):
        check("skypilot", Promise.ORDER, True, "", row=row, record=record)


def report(nodeid: str, when: str, outcome: str, props: list[Any], t: float) -> pytest.TestReport:
    longrepr = "AssertionError: 2 of 30 files lost\nmore" if outcome == "failed" else None
    return pytest.TestReport(
        nodeid, ("f.py", 1, nodeid), {}, outcome, longrepr, when, [], 1.0, t, t + 1.0, props
    )


def test_session_rows_are_written_per_store_and_recipe(tmp_path: Path) -> None:
    rows = SessionRows.for_invocation(["tests/matrix", "--store", "s3", "--recipe", "skypilot"])
    for n, (scenario, store, outcome) in enumerate(
        [("comp", "s3", "passed"), ("corrupt", "s3", "failed"), ("comp", "gcs", "passed")]
    ):
        nodeid = f"tests/matrix/t.py::test[{scenario}-{store}]"
        first = Row(scenario, store, "skypilot", note="started")
        last = Row(scenario, store, "skypilot", files=30, files_lost=0, note="done")
        props = [(ROW_PROPERTY, json.dumps(r.to_dict())) for r in (first, last)]
        rows.add(report(nodeid, "setup", "passed", [], 100.0 + n))
        rows.add(report(nodeid, "call", outcome, props, 101.0 + n))
        rows.add(report(nodeid, "teardown", "passed", props, 110.0 + n))
    written = rows.write(tmp_path)
    assert [p.name for p in written] == ["gcs-skypilot.json", "s3-skypilot.json"]
    doc = json.loads((tmp_path / "s3-skypilot.json").read_text())
    assert doc["command"] == "pytest tests/matrix --store s3 --recipe skypilot"
    assert doc["store_s"] == 12.0  # from the first test's setup to the last one's teardown
    comp, corrupt = doc["rows"]
    assert (comp["note"], comp["outcome"], comp["failure"]) == ("done", "passed", None)
    assert (corrupt["outcome"], corrupt["failure"]) == (
        "failed",
        "AssertionError: 2 of 30 files lost",
    )
