"""upload_order's floor of ordered small files (files x the median single PUT x the requests
the mount sends per file: its label, its PUT figures' consistency, its targets) and
ordered_breakdown's split of a file's time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.bench.loading import bench_module

put_floor = bench_module("put_floor")
checks = bench_module("bench_checks")


@pytest.mark.parametrize(
    ("by_kind", "expected"),
    [
        ({"PUT": 1.0}, 1),
        ({"PUT": 1.0, "LIST": 0.01}, 1),  # a listing of the mount is no part of an upload
        ({"POST-multipart": 1.0, "LIST": 0.6}, 1),
        ({"PUT-block": 1.0, "PUT-blocklist": 1.0, "HEAD": 1.0}, 3),
        ({"PUT": 1.02}, 1),  # a rare retry does not raise the floor
        ({}, 1),
    ],
)
def test_the_floor_counts_the_upload_requests_per_file(
    by_kind: dict[str, float], expected: int
) -> None:
    assert put_floor.requests_per_file({"total": 0, "by_kind": by_kind}) == expected


def test_the_floor_is_files_times_the_median_put_times_the_requests() -> None:
    assert put_floor.floor_s(200, 0.008, 1) == pytest.approx(1.6)
    assert put_floor.floor_s(200, 0.008, 3) == pytest.approx(4.8)
    assert put_floor.floor_s(200, None, 1) is None
    assert put_floor.floor_s(200, 0.008, None) is None
    assert put_floor.requests_per_file(None) is None


def test_a_floor_of_more_than_one_request_says_so() -> None:
    assert put_floor.floor_name(1) == "one-request"
    assert put_floor.floor_name(3) == "3-request"


def test_the_median_put_is_in_milliseconds() -> None:
    assert put_floor.median_ms([7_000_000, 9_000_000, 30_000_000]) == pytest.approx(9.0)
    assert put_floor.median_ms([]) is None


def puts(**figures: Any) -> dict[str, Any]:
    return {"count": 30, "median_ms": 8.0, "min_ms": 5.0, "total_s": 0.3, "requests": 30,
            **figures}  # fmt: skip


@pytest.mark.parametrize(
    ("figures", "named"),
    [
        ({"median_ms": -1.0, "min_ms": -2.0}, "put_median_s is negative"),
        ({"median_ms": 20_000.0}, "put_median_s (20.0) is longer than case_wall_s"),
        ({"total_s": 15.0}, "puts_s (15.0) is longer than case_wall_s"),
        ({"requests": 29}, "put_requests (29) is less than the PUTs sent (30)"),
    ],
)
def test_impossible_put_figures_are_named(figures: dict[str, Any], named: str) -> None:
    assert put_floor.inconsistencies(puts(), 14.0) == []
    problems = put_floor.inconsistencies(puts(**figures), 14.0)
    assert any(p.startswith(named) for p in problems), problems


def test_a_run_without_puts_has_no_put_problems() -> None:
    assert put_floor.inconsistencies({}, 14.0) == []
    assert put_floor.inconsistencies(puts(count=0, median_ms=None), 14.0) == []


class _Boto:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> None:
        self.sent.append((Bucket, Key, Body))


def test_the_put_is_the_sdk_clients_own_single_put() -> None:
    client = _Boto()
    put_floor.sdk_put(client, "b")("floor-put/k", b"x")
    assert client.sent == [("b", "floor-put/k", b"x")]
    with pytest.raises(TypeError, match="object"):
        put_floor.sdk_put(object(), "b")


def test_the_floor_target_may_reach_its_limit() -> None:
    assert checks.AtMost("t", 1.2, 1.2, "x").met
    assert not checks.AtMost("t", 1.21, 1.2, "x").met
    assert not checks.AtMost("t", None, 1.2, "x").met
    assert checks.AtMost("t", 1.2, 1.2, "x").describe() == "t: 1.20 x <= 1.2 x met"


def floor_row(store: str, latency_ms: float, ordered_over_floor: float | None) -> dict[str, Any]:
    return {
        "store": store,
        "set": "small",
        "network": f"{latency_ms:g}ms",
        "latency_ms": latency_ms,
        "stream_mibps": None,
        "floor": "one-request",
        "ordered_over_floor": ordered_over_floor,
        "ordered_over_parallel_time": 1.0,
    }


@pytest.mark.parametrize(
    ("latency_ms", "value", "met"), [(0.0, 1.2, True), (0.0, 1.25, False), (30.0, 1.25, True),
                                     (30.0, 1.31, False), (30.0, None, False)]
)  # fmt: skip
def test_small_files_are_held_to_the_floor_per_store(
    latency_ms: float, value: float | None, met: bool
) -> None:
    upload_order = bench_module("upload_order")
    targets = upload_order.strict_targets_of(floor_row("s3", latency_ms, value))
    (floor,) = [t for t in targets if "floor" in t.name]
    assert floor.name == f"strict-order s3 small {latency_ms:g}ms: ordered/one-request floor time"
    assert floor.met is met
    assert not [t for t in upload_order.targets_of(floor_row("s3", latency_ms, value))
                if "floor" in t.name]  # fmt: skip


# --- where an ordered file's time goes (bench/ordered_breakdown.py) ---------------------------
RCLONE_LOG = """\
2026/12/05 11:37:51.001291 INFO  : f-0000.bin: vfs cache: queuing for upload in 1.65w
2026/12/05 11:37:51.004094 INFO  : f-0001.bin: vfs cache: queuing for upload in 1.65w
2026/12/05 11:37:51.180941 INFO  : f-0000.bin: Copied (new)
2026/12/05 11:37:51.184389 INFO  : f-0000.bin: vfs cache: upload succeeded try #1
2026/12/05 11:37:51.199689 INFO  : f-0001.bin: Copied (new)
2026/12/05 11:37:51.200000 INFO  : f-0001.bin: vfs cache: upload succeeded try #1
2026/12/05 11:37:51.300000 INFO  : S3 bucket b: vfs cache: cleaned: objects 0 (was 0)
"""


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process in UTC: rclone's log has local times, its transfers UTC ones."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_breakdown_splits_each_file_into_keeper_transfer_and_after(utc: None) -> None:
    breakdown = bench_module("ordered_breakdown")
    logged = breakdown.log_times(RCLONE_LOG)
    assert set(logged) == {"f-0000.bin", "f-0001.bin"}
    transfers = {
        "f-0001.bin": {
            "started_at": "2026-12-05T11:37:51.185389123Z",  # 1 ms after f-0000 succeeded
            "completed_at": "2026-12-05T11:37:51.199389Z",
        }
    }
    parts = breakdown.segments(["f-0000.bin", "f-0001.bin"], logged, transfers)
    assert parts["keeper"] == [pytest.approx(0.001, abs=1e-6)]
    assert parts["transfer"] == [pytest.approx(0.014, abs=1e-6)]
    assert parts["after"] == [pytest.approx(0.000611, abs=1e-6)]
    assert breakdown.summary([0.001, 0.003, 0.002]) == {
        "median_ms": 2.0,
        "mean_ms": 2.0,
        "p90_ms": 3.0,
    }
