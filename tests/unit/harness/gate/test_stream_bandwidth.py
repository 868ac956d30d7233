"""The ``stream-bandwidth`` fault, pure: its spec, the pacing rule of one stream (what it
may have passed after t seconds), streams paced on their own, and a body under both
``bandwidth`` and ``stream-bandwidth`` waiting for the slower."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from harness.gate.faults import KINDS, FaultSpecError, FaultTable, parse_fault
from harness.gate.pacing import MIB, TokenBucket, slice_bytes, slowest, stream_allowance


def _passed_by(bucket: TokenBucket, start: float, pieces: int, size: int) -> list[float]:
    """When each of ``pieces`` pieces leaves a stream that always has more to send (each
    leaves as soon as the bucket lets it; simulated seconds, no clock)."""
    now, times = start, []
    for _ in range(pieces):
        now += bucket.delay(size, now)
        times.append(now)
    return times


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"kind": "stream-bandwidth"}, "mibps"),
        ({"kind": "stream-bandwidth", "mibps": 0}, "mibps"),
        ({"kind": "stream-bandwidth", "mibps": -8}, "mibps"),
        ({"kind": "stream-bandwidth", "mibps": "fast"}, "mibps"),
        ({"kind": "stream-bandwidth", "mibps": 8, "max_hits": 1}, "max_hits"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(FaultSpecError, match=field):
        parse_fault(spec, 1, 0)


def test_every_kind_has_its_fixture_and_its_colour() -> None:
    """``store_faults.stream_bandwidth(...)`` as for every kind, and the report draws it."""
    from harness.cloud.store_faults import StoreFaults
    from harness.testing.report import FAULT_COLORS

    for kind in KINDS:
        assert getattr(StoreFaults, kind.replace("-", "_")).__name__ == kind.replace("-", "_")
    assert set(FAULT_COLORS) == set(KINDS)
    assert len(set(FAULT_COLORS.values())) == len(KINDS)


def test_a_spec_as_the_admin_api_shows_it() -> None:
    """A kind of its own, narrowed like any fault, with its stream records (none yet)."""
    assert "stream-bandwidth" in KINDS and "bandwidth" in KINDS
    fault = parse_fault(
        {"kind": "stream-bandwidth", "mibps": 8, "bucket": "b", "method": "put"}, 3, 0
    )
    shown = fault.public()
    assert (shown["kind"], shown["mibps"], shown["bucket"], shown["method"]) == (
        "stream-bandwidth",
        8.0,
        "b",
        "PUT",
    )
    assert (shown["hits"], shown["max_hits"], shown["streams"]) == (0, None, [])
    assert "streams" not in parse_fault({"kind": "bandwidth", "mibps": 8}, 4, 0).public()


@pytest.mark.parametrize("mibps", [0.5, 1.0, 8.0, 100.0])
def test_a_stream_passes_its_allowance_and_no_more(mibps: float) -> None:
    """A stream with always more to send: each piece leaves exactly when the bytes it
    brings the stream to are allowed (one slice at once, then mibps MiB/s)."""
    size = slice_bytes(mibps)
    times = _passed_by(TokenBucket.stream(mibps), 100.0, 50, size)
    assert times[0] == 100.0  # the first slice leaves at once
    for n, t in enumerate(times, start=1):
        assert stream_allowance(t - 100.0, mibps) == pytest.approx(n * size, rel=1e-9)
    assert stream_allowance(times[-1] - 100.0, mibps) < 51 * size


@pytest.mark.parametrize("mibps", [4.0, 8.0, 64.0])
def test_pieces_are_fine_enough_to_flow_smoothly(mibps: float) -> None:
    """A saturated stream sends a piece every 20 ms (at 8 MiB/s: 160 KiB), not one big
    burst then a long sleep; the gaps are even."""
    times = _passed_by(TokenBucket.stream(mibps), 0.0, 30, slice_bytes(mibps))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.02] * len(gaps), rel=0.01)


def test_two_streams_are_paced_on_their_own() -> None:
    """Two streams side by side under one cap each leave at the cap's own pace: the
    second, started while the first is deep in debt, starts with a full slice."""
    cap = 8.0
    first, second = TokenBucket.stream(cap), TokenBucket.stream(cap)
    size = slice_bytes(cap)
    alone = _passed_by(TokenBucket.stream(cap), 0.0, 40, size)
    times_first = _passed_by(first, 0.0, 40, size)
    assert first.delay(size, times_first[-1]) > 0  # the first stream is at its cap ...
    assert second.delay(size, times_first[-1]) == 0.0  # ... and the second waits not
    times_second = _passed_by(second, times_first[-1], 39, size)
    assert [t - times_first[-1] for t in times_second] == pytest.approx(alone[1:])


def test_a_long_stall_earns_no_burst() -> None:
    """A stream that waited on its other end gains at most one slice: as a TCP window, it
    does not catch up at once."""
    bucket = TokenBucket.stream(8.0)
    bucket.delay(slice_bytes(8), 0.0)
    assert bucket.delay(slice_bytes(8), 60.0) == 0.0
    assert bucket.delay(slice_bytes(8), 60.0) == pytest.approx(0.02, rel=1e-6)


@pytest.mark.parametrize(("shared", "own"), [(2.0, 8.0), (8.0, 2.0)])
def test_under_both_caps_a_body_waits_for_the_slower(shared: float, own: float) -> None:
    """A piece under a bucket's ``bandwidth`` and the stream's own cap waits as long as the
    slower says: the body flows at the lower of the two rates, whichever it is."""
    link, stream = TokenBucket.shared(shared), TokenBucket.stream(own)
    size, now = slice_bytes(own), 0.0
    for _ in range(400):
        now += slowest([link, stream], size, now)
    assert 400 * size / now / MIB == pytest.approx(min(shared, own), rel=0.02)


def test_a_bandwidth_fault_shares_its_bucket() -> None:
    """bandwidth: two requests draw on one bucket, so the second waits for the first's
    bytes; the table's wait with a stream's own bucket is the slower of the two."""
    table = FaultTable()
    fault = table.add({"kind": "bandwidth", "mibps": 1})
    assert table.bandwidth_delay([fault], 1 << 20) > 0.5  # the burst is 50 ms of bytes
    own = TokenBucket.stream(1000)
    assert table.bandwidth_delay([fault], 1 << 10, own) > 0.5  # still in the link's debt
    assert own.tokens < own.capacity  # the stream's own bucket took the bytes too


def test_the_fault_keeps_a_record_per_stream() -> None:
    """Each body a stream-bandwidth fault paces is a hit and a record: its bytes both
    ways, the seconds it was held, and its end; records of other streams stay apart."""
    table = FaultTable()
    fault = table.add({"kind": "stream-bandwidth", "mibps": 1, "bucket": "b"})
    one = table.open_stream([fault], "PUT", "/b/one")
    two = table.open_stream([fault], "GET", "/b/two")
    table.note_stream(one, "request_bytes", 100, 0.5)
    table.note_stream(two, "response_bytes", 7, 0.0)
    table.note_stream(one, "request_bytes", 50, 0.25)
    table.close_stream(two)
    state = table.get(fault.id)
    assert state is not None and state.hits == 2
    first, second = state.public()["streams"]
    picked = [
        (s["method"], s["path"], s["request_bytes"], s["response_bytes"]) for s in (first, second)
    ]
    assert picked == [("PUT", "/b/one", 150, 0), ("GET", "/b/two", 0, 7)]
    assert (first["waited_s"], second["waited_s"]) == (0.75, 0.0)
    assert first["ended_s"] is None and second["ended_s"] >= second["started_s"]
