"""The benchmarks' rules for their own figures: the gate's wall-clock event times mapped onto
the monotonic clock, a run whose clocks drifted apart invalid and run again, and figures that
cannot be (a part longer than its whole, a negative duration, counts that do not add up)
found and named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.bench.loading import bench_module

clock = bench_module("bench_clock")
consistency = bench_module("bench_consistency")
network = bench_module("bench_network")

MS = 1_000_000


def sampler(*offsets: int) -> Any:
    """A sampler that returns ``offsets`` in turn."""
    it = iter(offsets)
    return lambda: next(it)


# --- mapping and validity ------------------------------------------------------------------
def test_a_wall_time_maps_by_the_offset_sampled_at_the_start() -> None:
    watch = clock.ClockWatch.start(sampler(1_000 * MS, 1_010 * MS))
    watch.stop()
    # the gate's event at wall 1_500 ms is at monotonic 500 ms
    assert watch.to_monotonic_ns(1_500 * MS) == 500 * MS
    assert watch.drift_ns == 10 * MS
    assert watch.valid


def test_a_run_whose_offset_moved_over_50_ms_is_invalid() -> None:
    watch = clock.ClockWatch.start(sampler(0, 20 * MS, 51 * MS))
    watch.mark()
    watch.stop()
    assert watch.drift_ns == 51 * MS
    assert not watch.valid
    assert watch.as_json() == {"clock_drift_ms": 51.0, "clock_valid": False}


def test_a_step_and_a_step_back_within_a_run_are_caught_at_a_mark() -> None:
    """Equal offsets at start and end do not hide a step in between that a mark saw."""
    assert not clock.offsets_valid([0, -3_000 * MS, 0])
    assert clock.offsets_valid([0, 50 * MS])


def test_one_sample_is_not_enough_to_call_a_run_valid() -> None:
    assert not clock.offsets_valid([0])


def test_the_offset_is_wall_minus_monotonic() -> None:
    import time

    before = time.time_ns() - time.monotonic_ns()
    offset = clock.wall_offset_ns()
    after = time.time_ns() - time.monotonic_ns()
    assert min(before, after) - 50 * MS <= offset <= max(before, after) + 50 * MS


def test_invalid_runs_are_run_again_and_kept_apart() -> None:
    results = iter([{"ok": False, "n": 1}, {"ok": True, "n": 2}, {"ok": True, "n": 3}])
    valid, invalid = clock.until_valid(lambda: next(results), lambda r: r["ok"])
    assert valid == {"ok": True, "n": 2}
    assert invalid == [{"ok": False, "n": 1}]


def test_retries_are_bounded_and_no_invalid_run_is_returned_as_valid() -> None:
    calls: list[int] = []

    def run() -> dict[str, bool]:
        calls.append(1)
        return {"ok": False}

    valid, invalid = clock.until_valid(run, lambda r: r["ok"])
    assert valid is None
    assert len(invalid) == len(calls) == clock.ATTEMPTS


# --- consistency rules ---------------------------------------------------------------------
def test_a_part_longer_than_the_whole_is_named() -> None:
    problems = consistency.parts_over_whole(
        "case_wall_s", 19.2, {"written_s": 46.4, "in_store_s": 58.0, "drained_s": 19.0}
    )
    assert len(problems) == 2
    assert problems[0].startswith("written_s (46.4) is longer than case_wall_s (19.2)")
    assert problems[1].startswith("in_store_s (58.0)")


def test_negative_durations_are_named_and_missing_ones_are_not() -> None:
    assert consistency.negatives({"a_s": -0.1, "b_s": 0.0, "c_s": None}) == [
        "a_s is negative (-0.1)"
    ]


def test_steps_out_of_order_are_named_within_the_slack() -> None:
    steps = [("written_s", 5.0), ("in_store_s", 4.97), ("drained_s", None)]
    assert consistency.in_order(steps, slack=0.05) == []
    assert consistency.in_order(steps) == ["in_store_s (4.97) comes before written_s (5.0)"]


def test_counts_must_add_up() -> None:
    assert consistency.counts_add_up("requests", 5, {"PUT": 3, "HEAD": 2}) == []
    (problem,) = consistency.counts_add_up("requests", 6, {"PUT": 3, "HEAD": 2})
    assert "requests (6)" in problem
    (problem,) = consistency.at_most("files", 8, {"events_seen": 9, "out_of_place": None})
    assert problem == "events_seen (9) is more than files (8)"


# --- the benchmarks' own checks ------------------------------------------------------------
def upload_run(**figures: Any) -> dict[str, Any]:
    run = {
        "written_s": 2.0,
        "first_in_store_s": 1.0,
        "in_store_s": 10.0,
        "drained_s": 10.5,
        "case_wall_s": 14.0,
        "events_seen": 8,
        "not_in_store_by_events": 0,
        "out_of_place": 0,
        "requests": 20,
        "requests_by_kind": {"PUT": 8, "HEAD": 12},
    }
    return {**run, **figures}


def test_upload_order_finds_the_impossible_figures_once_reported() -> None:
    upload_order = bench_module("upload_order")
    assert upload_order.inconsistencies(upload_run(), 8, 0.0) == []
    problems = upload_order.inconsistencies(
        upload_run(written_s=46.4, in_store_s=58.0, drained_s=18.0, case_wall_s=19.2), 8, 0.0
    )
    assert any(p.startswith("written_s (46.4) is longer than case_wall_s") for p in problems)
    assert any(p.startswith("in_store_s (58.0) is longer than case_wall_s") for p in problems)
    assert any(p.startswith("drained_s (18.0) comes before in_store_s") for p in problems)


@pytest.mark.parametrize(
    ("figures", "named"),
    [
        ({"first_in_store_s": -0.2}, "first_in_store_s is negative"),
        ({"events_seen": 9}, "events_seen (9)"),
        ({"requests": 21}, "requests (21)"),
        ({"in_store_s": 1.5}, "in_store_s (1.5) comes before written_s"),
    ],
)
def test_upload_order_names_each_inconsistent_figure(figures: dict[str, Any], named: str) -> None:
    upload_order = bench_module("upload_order")
    problems = upload_order.inconsistencies(upload_run(**figures), 8, 0.0)
    assert any(p.startswith(named) for p in problems), problems


# --- the WAN profile -------------------------------------------------------------------------
def test_the_wan_network_is_latency_and_a_per_stream_cap() -> None:
    wan = network.Network(30.0, 8.0)
    assert wan.faults() == [("latency", {"ms": 30.0}), ("stream-bandwidth", {"mibps": 8.0})]
    assert wan.label == "wan 30ms 8MiB/s/stream"
    assert network.Network(0.0).faults() == []


@pytest.mark.parametrize(
    ("argv", "field"),
    [(["--wan", "--wan-stream-mibps", "0"], "--wan-stream-mibps"),
     (["--wan", "--wan-latency-ms", "-1"], "--wan-latency-ms")],
)  # fmt: skip
def test_bad_wan_values_are_a_usage_error_naming_the_option(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    network.add_wan_options(parser)
    with pytest.raises(SystemExit):
        network.wan_of(parser, parser.parse_args(argv))
    assert field in capsys.readouterr().err


def test_a_run_not_behind_its_network_all_along_is_named() -> None:
    wan = network.Network(30.0, 8.0)
    held = {"latency": {"hits": 12, "ended": None}, "stream-bandwidth": {"hits": 3, "ended": None}}
    assert network.not_held(wan, held) == []
    gone = {**held, "stream-bandwidth": {"hits": None, "ended": "unknown to the gate"}}
    assert network.not_held(wan, gone) == [
        "the stream-bandwidth fault ended before the run did (unknown to the gate)"
    ]
    assert network.not_held(wan, {"latency": {"hits": 0, "ended": None}}) == [
        "the latency fault hit no request",
        "the stream-bandwidth fault was not recorded",
    ]
    assert network.not_held(network.Network(0.0), {}) == []


def test_launch_finds_stages_longer_than_the_launch() -> None:
    launch = bench_module("launch")
    assert launch.stage_problems({"provision": 3.0, "setup": 2.0}, 6.0) == []
    problems = launch.stage_problems({"provision": 3.0, "setup": 4.0}, 6.0)
    assert problems == ["stages together (7.0) is longer than total_s (6.0)"]
    assert launch.stage_problems({"provision": -1.0}, 6.0) == ["provision is negative (-1.0)"]


def test_rclone_memory_sums_the_marked_rclone_processes_only(tmp_path: Path) -> None:
    memory = bench_module("bench_memory")
    procs = {
        "10": (b"/venv/bin/rclone\0rcd\0--config\0/tmp/sko-1/rclone.conf\0", 1000),
        "11": (b"/venv/bin/rclone\0rcd\0--config\0/tmp/sko-1/rclone.conf\0", 500),
        "12": (b"/venv/bin/rclone\0serve\0s3\0--config\0/other.conf\0", 9000),
        "13": (b"bash\0-c\0echo /tmp/sko-1/rclone.conf\0", 7000),
    }
    for pid, (cmdline, kib) in procs.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(cmdline)
        (tmp_path / pid / "status").write_text(f"Name:\tx\nVmRSS:\t{kib} kB\n")
    (tmp_path / "self").mkdir()
    assert memory.rss_kib("/tmp/sko-1/rclone.conf", proc=tmp_path) == 1500
