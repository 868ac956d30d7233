"""The gate's fault table (harness.gate.faults), pure: parsing and its errors, the exact
share of ``rate``, ending by ``max_hits`` / ``seconds`` / clear with the reason logged, and
the objects a ``corrupt`` fault marks."""

from __future__ import annotations

from typing import Any

import pytest

from harness.gate.faults import FaultSpecError, FaultTable, parse_fault


def _table(**spec: Any) -> tuple[FaultTable, int]:
    table = FaultTable()
    fault = table.add(spec)
    return table, fault.id


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"kind": "nope"}, "kind"),
        ({"kind": "errors", "max_hits": 0}, "max_hits"),
        ({"kind": "errors", "max_hits": -3}, "max_hits"),
        ({"kind": "errors", "max_hits": 1.5}, "max_hits"),
        ({"kind": "errors", "max_hits": "2"}, "max_hits"),
        ({"kind": "errors", "max_hits": True}, "max_hits"),
        ({"kind": "bandwidth", "mibps": 1, "max_hits": 2}, "max_hits"),
        ({"kind": "corrupt", "rate": 1.5}, "rate"),
        ({"kind": "corrupt", "seconds": 0}, "seconds"),
        ({"kind": "corrupt", "method": "TRACE"}, "method"),
        ({"kind": "latency"}, "ms"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(FaultSpecError, match=field):
        parse_fault(spec, 1, 0)


def test_a_spec_as_the_admin_api_shows_it() -> None:
    fault = parse_fault(
        {"kind": "corrupt", "max_hits": 2, "rate": 0.5, "bucket": "b", "method": "put"}, 7, 5
    )
    shown = fault.public()
    picked = (shown["id"], shown["kind"], shown["max_hits"], shown["method"])
    assert picked == (7, "corrupt", 2, "PUT")
    assert (shown["hits"], shown["ended"], shown["ended_ns"]) == (0, None, None)
    assert not any(name.startswith("_") for name in shown)


def test_max_hits_ends_the_fault_on_its_last_hit() -> None:
    """errors with max_hits=3: exactly three requests are hit; the third ends the fault
    (logged with ended="hits"), and later rolls hit nothing."""
    table, fid = _table(kind="errors", max_hits=3, bucket="b")
    (fault,) = table.matching("b", "GET")
    rolls = [table.roll(fault) for _ in range(5)]
    assert rolls == [True, True, True, False, False]
    assert table.active() == [] and table.matching("b", "GET") == []
    state = table.get(fid)
    assert state is not None and (state.hits, state.ended) == (3, "hits")
    log = table.log("b")
    assert [(e["phase"], e["ended"], e["hits"]) for e in log] == [
        ("start", None, 0),
        ("end", "hits", 3),
    ]
    assert log[1]["t_ns"] == state.ended_ns


def test_max_hits_counts_only_hits_under_a_rate() -> None:
    """rate 0.5 hits requests 1, 3, 5: max_hits=2 ends the fault on the third request."""
    table, fid = _table(kind="reset", rate=0.5, max_hits=2)
    (fault,) = table.active()
    assert [table.roll(fault) for _ in range(4)] == [True, False, True, False]
    state = table.get(fid)
    assert state is not None and state.ended == "hits"


def test_a_fault_seen_before_it_ended_hits_nothing_after() -> None:
    """Two requests matched the fault while it lasted; the first one's hit ended it, so the
    second, rolled later, is not hit (a fault never hits more than max_hits)."""
    table, _ = _table(kind="deny", max_hits=1)
    first = table.matching(None, "GET")
    second = table.matching(None, "GET")
    assert table.roll(first[0]) is True
    assert table.roll(second[0]) is False


def test_other_ends_are_logged_with_their_reason() -> None:
    table, fid = _table(kind="outage")
    table.clear(fault_id=fid)
    state = table.get(fid)
    assert state is not None and state.ended == "cleared"
    timed = table.add({"kind": "outage", "seconds": 1e-9})
    table.tick()
    state = table.get(timed.id)
    assert state is not None and state.ended == "seconds"
    assert state.ended_ns == timed.ends_at_ns
    assert [e["ended"] for e in table.log() if e["phase"] == "end"] == ["cleared", "seconds"]
    assert table.get(999) is None


def test_corrupted_marks_end_on_a_write_a_deletion_or_a_clear() -> None:
    table, fid = _table(kind="corrupt", bucket="b")
    (fault,) = table.active()
    table.mark_corrupted("b", "k", fault)
    table.mark_corrupted("b", "other", fault)
    assert table.corrupted("b", "k") and table.corrupted_in("b")
    assert not table.corrupted("b", None) and not table.corrupted("c", "k")
    table.forget_corrupted("b", "k")  # written again (or deleted)
    assert not table.corrupted("b", "k") and table.corrupted("b", "other")
    table.forget_corrupted("b")  # the bucket was deleted
    assert not table.corrupted_in("b")
    # a mark outlives a fault that ended on its hits, not one that is cleared
    table.mark_corrupted("b", "k", fault)
    table.clear(fault_id=fid)
    assert not table.corrupted("b", "k")
    ended = table.add({"kind": "corrupt", "max_hits": 1})
    assert table.roll(ended)
    table.mark_corrupted("b", "k", ended)
    assert table.get(ended.id).ended == "hits"  # type: ignore[union-attr]
    assert table.corrupted("b", "k")
    table.clear(bucket="other-bucket")
    assert table.corrupted("b", "k")
    table.clear(fault_id=ended.id)  # clearing an ended fault still drops its marks
    assert not table.corrupted("b", "k")
