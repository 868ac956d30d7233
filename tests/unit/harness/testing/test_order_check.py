"""The upload-order check replays write events: streams that only ever show a prefix of the
creation order pass, whatever the deletes, re-writes, ties and input order; a file visible
while an older one is not fails at that very event, also when first-seen order looks right."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.emulators.records import WriteEvent
from harness.testing.order_check import (
    OUT_OF_ORDER,
    UNEXPECTED_KEY,
    WRITE_OPS,
    assert_all_visible,
    assert_visible_prefix,
    lost_keys,
    visible_prefix_violations,
)

PREFIX = "order/"
N = 8
KEYS = [f"{PREFIX}file-{i:03d}.bin" for i in range(N)]
WRITES = sorted(WRITE_OPS)


def ev(key: str, op: str = "put", t_ns: int = 0, size: int = 1024) -> WriteEvent:
    return WriteEvent("b", key, size, op, t_ns)


def stamped(steps: list[tuple[str, str]], gaps: list[int]) -> list[WriteEvent]:
    """Events for (op, key) steps at nondecreasing times (a gap of 0 is a tie)."""
    t, out = 1_000_000, []
    for (op, key), gap in zip(steps, gaps, strict=True):
        t += gap
        out.append(ev(key, op, t))
    return out


def scrambled(events: list[WriteEvent], data: st.DataObject) -> list[WriteEvent]:
    """The same events handed over in another order, ties still in their order."""
    groups: dict[int, list[WriteEvent]] = {}
    for e in events:
        groups.setdefault(e.t_ns, []).append(e)
    order = data.draw(st.permutations(sorted(groups)))
    return [e for t in order for e in groups[t]]


@st.composite
def in_order_steps(
    draw: st.DrawFn, start: int = 0, limit: int = N
) -> tuple[list[tuple[str, str]], int]:
    """(op, key) steps that keep a prefix visible, from the first ``start`` keys up to at most
    ``limit``: write the next key, delete the newest visible one (and write it again later,
    or not), re-write any visible key, or write outside the prefix; and the number of keys
    visible at the end."""
    steps: list[tuple[str, str]] = [("put", k) for k in KEYS[:start]]
    k = start
    for _ in range(draw(st.integers(0, 40))):
        move = draw(st.sampled_from(["next", "next", "delete", "rewrite", "outside"]))
        if move == "next" and k < limit:
            steps.append((draw(st.sampled_from(WRITES)), KEYS[k]))
            k += 1
        elif move == "delete" and k > 0:
            k -= 1
            steps.append(("delete", KEYS[k]))
        elif move == "rewrite" and k > 0:
            steps.append((draw(st.sampled_from(WRITES)), KEYS[draw(st.integers(0, k - 1))]))
        elif move == "outside":
            steps.append((draw(st.sampled_from(["put", "delete"])), f"other/{k}.bin"))
    return steps, k


gaps_for = st.lists(st.integers(0, 3), min_size=200, max_size=200)


@given(in_order_steps(), gaps_for, st.data())
def test_streams_that_show_only_prefixes_pass(
    walk: tuple[list[tuple[str, str]], int], gaps: list[int], data: st.DataObject
) -> None:
    steps, visible_at_end = walk
    events = scrambled(stamped(steps, gaps[: len(steps)]), data)
    assert visible_prefix_violations(events, KEYS, PREFIX) == []
    assert_visible_prefix(events, KEYS, PREFIX)
    assert lost_keys(events, KEYS, PREFIX) == KEYS[visible_at_end:]


@given(st.integers(0, N - 2), st.data())
def test_a_key_written_before_an_older_one_fails_at_that_event(
    start: int, data: st.DataObject
) -> None:
    steps, k = data.draw(in_order_steps(start=start, limit=N - 2))
    skipped = data.draw(st.integers(k + 1, N - 1))
    bad = len(steps)
    steps.append((data.draw(st.sampled_from(WRITES)), KEYS[skipped]))
    steps += data.draw(in_order_steps())[0]  # anything after it
    events = stamped(steps, [1] * len(steps))
    found = visible_prefix_violations(events, KEYS, PREFIX)
    assert found and found[0].kind == OUT_OF_ORDER
    assert (found[0].index, found[0].missing) == (bad, KEYS[k])
    assert KEYS[skipped] in found[0].visible
    with pytest.raises(AssertionError, match=f"event #{bad} .*{KEYS[k]}, created before"):
        assert_visible_prefix(events, KEYS, PREFIX)


@given(st.integers(2, N), st.data())
def test_deleting_an_older_key_while_newer_ones_show_fails(k: int, data: st.DataObject) -> None:
    older = data.draw(st.integers(0, k - 2))
    steps = [("put", key) for key in KEYS[:k]] + [("delete", KEYS[older])]
    events = stamped(steps, [1] * len(steps))
    found = visible_prefix_violations(events, KEYS, PREFIX)
    assert [(v.index, v.missing, v.intact) for v in found] == [(k, KEYS[older], older)]


def test_a_failed_copy_deleted_and_written_again_late_fails() -> None:
    """rclone removing a failed copy: file-001 is gone while file-002..005 arrive. Its
    first-seen order is the creation order, so a first-seen check passed it."""
    keys = [f"file-{i:03d}" for i in range(6)]
    steps = [("put", keys[0]), ("put", keys[1]), ("delete", keys[1])]
    steps += [("put", k) for k in keys[2:]] + [("put", keys[1])]
    events = stamped(steps, [10] * len(steps))
    assert list(dict.fromkeys(e.key for e in events if e.op != "delete")) == keys
    found = visible_prefix_violations(events, keys)
    assert [v.index for v in found] == [3, 4, 5, 6]
    assert found[0].visible == ("file-000", "file-002") and found[0].missing == "file-001"
    with pytest.raises(AssertionError) as caught:
        assert_visible_prefix(events, keys)
    assert str(caught.value) == (
        "upload order broken at event #3 (put file-002, 1024 B, +0.000 s): visible then the "
        "1 oldest (file-000) and 1 newer (file-002); file-001, created before them, was not "
        "visible [4 of 8 events were violations]"
    )
    assert_all_visible(events, keys)  # nothing lost: only the order was broken


def test_ties_keep_the_given_order_and_later_times_sort_first() -> None:
    a, b = KEYS[:2]
    assert visible_prefix_violations([ev(a, t_ns=5), ev(b, t_ns=5)], KEYS[:2], PREFIX) == []
    assert visible_prefix_violations([ev(b, t_ns=5), ev(a, t_ns=5)], KEYS[:2], PREFIX)
    assert visible_prefix_violations([ev(b, t_ns=6), ev(a, t_ns=5)], KEYS[:2], PREFIX) == []


def test_an_unknown_key_under_the_prefix_is_a_violation_and_outside_it_is_ignored() -> None:
    events = [ev(KEYS[0], t_ns=1), ev("order/stray.tmp", t_ns=2), ev("seed/x", "delete", 3)]
    found = visible_prefix_violations(events, KEYS[:1], PREFIX)
    assert [(v.kind, v.index) for v in found] == [(UNEXPECTED_KEY, 1)]
    assert "order/stray.tmp is under the prefix but not in the creation order" in (
        found[0].describe()
    )
    assert visible_prefix_violations(events[:1] + events[2:], KEYS[:1], PREFIX) == []


def test_lost_keys_say_why() -> None:
    events = [ev(KEYS[0], t_ns=1), ev(KEYS[1], t_ns=2), ev(KEYS[1], "delete", 3)]
    assert lost_keys(events, KEYS[:3], PREFIX) == KEYS[1:3]
    with pytest.raises(AssertionError) as caught:
        assert_all_visible(events, KEYS[:3], PREFIX)
    assert str(caught.value) == (
        f"2 of 3 files not in the store after the last of 3 events: {KEYS[1]} (deleted at "
        f"event #2, not written again), {KEYS[2]} (never written)"
    )


def test_the_error_class_is_the_callers() -> None:
    class OrderLost(AssertionError):
        pass

    with pytest.raises(OrderLost):
        assert_visible_prefix([ev(KEYS[1])], KEYS, PREFIX, error=OrderLost)
    with pytest.raises(OrderLost):
        assert_all_visible([], KEYS, PREFIX, error=OrderLost)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown op 'move'"):
        visible_prefix_violations([ev(KEYS[0], "move")], KEYS, PREFIX)
    with pytest.raises(ValueError, match="twice"):
        visible_prefix_violations([], [KEYS[0], KEYS[0]], PREFIX)
    with pytest.raises(ValueError, match="outside the prefix"):
        lost_keys([], ["elsewhere/a"], PREFIX)
