"""Upload order seen by polling a listing: a later file listed without an earlier one is a
violation; in-order completions never are, however the listings fall."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from harness.conformance.order_poll import ListingPoller, Snapshot

KEYS = [f"order/file-{i:03d}.bin" for i in range(8)]


def poller_with(listings: list[list[str]]) -> ListingPoller:
    poll = ListingPoller(lambda: [])
    poll.snapshots = [
        Snapshot(i * 0.05, i * 0.05 + 0.01, frozenset(k)) for i, k in enumerate(listings)
    ]
    return poll


@given(st.lists(st.integers(0, len(KEYS)), min_size=1, max_size=30))
def test_prefixes_of_the_creation_order_are_never_a_violation(cuts: list[int]) -> None:
    poll = poller_with([KEYS[:c] for c in sorted(cuts)])
    assert poll.first_violation(KEYS) is None


@given(st.integers(1, len(KEYS) - 1), st.data())
def test_a_later_file_without_an_earlier_one_is_caught(later: int, data: st.DataObject) -> None:
    earlier = data.draw(st.integers(0, later - 1))
    listing = [k for i, k in enumerate(KEYS[: later + 1]) if i != earlier]
    poll = poller_with([KEYS[:earlier], listing, KEYS])
    violation = poll.first_violation(KEYS)
    assert violation is not None and KEYS[earlier] in violation


def test_first_seen_and_describe() -> None:
    poll = poller_with([[], [KEYS[0]], KEYS[:3]])
    assert poll.first_seen(KEYS[:3]) == KEYS[:3]
    assert "interval 50 ms, 3 listings" in poll.describe(KEYS)


def test_the_thread_polls_until_stopped_and_counts_errors() -> None:
    calls = {"n": 0}
    fourth = threading.Event()

    def listing() -> list[str]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("NoSuchBucket")
        if calls["n"] == 4:
            fourth.set()
        return KEYS[: calls["n"]]

    with ListingPoller(listing, interval=0.01) as poll:
        assert fourth.wait(60), "the poller stopped listing"
    assert poll.errors == 1 and len(poll.snapshots) >= 3
    assert poll.first_violation(KEYS) is None
