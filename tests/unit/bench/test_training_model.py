"""bench/training_model.py: a training run's attempts read from its log, the creation order
its checkpoints must reach the store in (a checkpoint written again after a recovery taking
its place, a removed one leaving it, one that went with its node not required), the store
replayed against it, the newest complete checkpoint, and rclone's cache cleaner lines."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.unit.bench.loading import bench_module

tm = bench_module("training_model")
MIB = 1 << 20


@dataclass(frozen=True)
class Ev:
    key: str
    op: str
    t_ns: int
    size: int = 1


def data(step: int) -> str:
    return str(tm.names(step)[0])


def marker(step: int) -> str:
    return str(tm.names(step)[1])


def writes(*keys: str, start: int = 0) -> list[Ev]:
    return [Ev(k, "put", start + i) for i, k in enumerate(keys)]


LOG = """\
TASK_ID sky-managed-x
RESUME step=0 from=scratch t=100.000
step 1 loss=1.0 t=101.000
saved checkpoint 1 (1048576 bytes) t=101.500
saved checkpoint 2 (1048576 bytes) t=102.500
checkpoint 3 failed: EIO (Input/output error) writing checkpoint-000003.bin; removed \
checkpoint-000003.bin t=103.500
saved checkpoint 4 (1048576 bytes) t=104.500
  | saved checkpoint 9 (1048576 bytes) t=1.000
(head, rank=0) RESUME step=2 from=checkpoint-000002.bin t=110.000
saved checkpoint 3 (1048576 bytes) t=111.000
checkpoint 4 failed: ENOSPC (No space left on device) writing checkpoint-000004.json; removed \
checkpoint-000004.bin,checkpoint-000004.json t=112.000
STOP at step 4: /tmp/stop exists
RESULT sha256=abc123 steps=4
"""


def test_attempts_are_read_from_the_log() -> None:
    first, second = tm.attempts(LOG)
    assert (first.resumed_from, first.saved_steps, first.tried) == (0, [1, 2, 4], [1, 2, 3, 4])
    assert [(f.step, f.errno, f.file) for f in first.failed] == [
        (3, "EIO", "checkpoint-000003.bin")
    ]
    assert first.result is None
    assert (second.resumed_from, second.saved_steps, second.tried) == (2, [3], [3, 4])
    assert second.failed[0].errno == "ENOSPC" and second.result == "abc123"
    assert [s for _, s in first.tries] == first.tried


def test_each_attempt_has_its_own_order() -> None:
    """Attempt 1 saved 1, 2, 4 (3 failed); its 4's data reached the store, its marker went
    with the node. Attempt 2 resumed from 2: saved 3, failed 4 (removed), wrote the result."""
    runs = tm.attempts(LOG)
    first_epoch = writes(data(1), marker(1), data(2), marker(2), data(4))
    first, second = tm.epochs(runs, first_epoch, [len(first_epoch)])
    assert first.order == (data(1), marker(1), data(2), marker(2), data(4), marker(4))
    assert first.removed == (data(3), marker(3)) and first.went_with_node == ()
    assert second.order == (data(1), marker(1), data(2), marker(2), data(3), marker(3),
                            tm.RESULT_KEY)  # fmt: skip
    assert second.removed == (data(4), marker(4))
    assert second.went_with_node == (marker(4),)
    assert second.start == {data(1), marker(1), data(2), marker(2), data(4)}


def run(*epochs: list[Ev]) -> tuple[list[Ev], list[int]]:
    """The events of consecutive epochs (times increasing) and their bounds."""
    events: list[Ev] = []
    bounds = []
    for n, epoch in enumerate(epochs):
        if n:
            bounds.append(len(events))
        events += [Ev(e.key, e.op, 100 * n + e.t_ns, e.size) for e in epoch]
    return events, bounds


def test_a_store_that_follows_the_order_passes() -> None:
    events, bounds = run(
        writes(data(1), marker(1), data(2), marker(2), data(4)),
        [Ev(data(4), "delete", 0), *writes(data(3), marker(3), tm.RESULT_KEY, start=1)],
    )
    verdict = tm.check_order(tm.attempts(LOG), events, bounds)
    assert verdict.violations == () and verdict.lost == () and verdict.left == ()
    assert verdict.order[-1] == tm.RESULT_KEY and verdict.went_with_node == (marker(4),)


def test_a_leftover_of_a_later_step_written_again_is_stale_until_then() -> None:
    """Attempt 1's 4 (data only) is in the store when attempt 2, resumed from 2, writes 3 and
    then 4 again: no violation, though 4's data was there before 3's."""
    log = LOG.replace(
        "checkpoint 4 failed: ENOSPC (No space left on device) writing checkpoint-000004.json; "
        "removed checkpoint-000004.bin,checkpoint-000004.json t=112.000",
        "saved checkpoint 4 (1048576 bytes) t=112.000",
    )
    events, bounds = run(
        writes(data(1), marker(1), data(2), marker(2), data(4)),
        writes(data(3), marker(3), data(4), marker(4), tm.RESULT_KEY),
    )
    verdict = tm.check_order(tm.attempts(log), events, bounds)
    assert verdict.violations == () and verdict.lost == () and verdict.left == ()
    # Written again before 3: out of order in attempt 2's epoch.
    events, bounds = run(
        writes(data(1), marker(1), data(2), marker(2), data(4)),
        writes(data(4), data(3), marker(3), marker(4), tm.RESULT_KEY),
    )
    verdict = tm.check_order(tm.attempts(log), events, bounds)
    assert verdict.violations and all(v.startswith("attempt 2: ") for v in verdict.violations)


def test_a_marker_before_its_data_a_loss_and_a_file_left_are_caught() -> None:
    events, bounds = run(
        writes(data(1), marker(1), marker(2), data(2), data(4)),
        writes(data(3), marker(3)),
    )
    verdict = tm.check_order(tm.attempts(LOG), events, bounds)
    assert len(verdict.violations) == 1 and "checkpoint-000002.bin" in verdict.violations[0]
    assert verdict.lost == (tm.RESULT_KEY,)
    assert verdict.left == (data(4),)  # a removed checkpoint's data, never deleted


def test_a_removed_file_that_overtook_an_older_one_is_a_violation() -> None:
    events, bounds = run(
        writes(data(1), marker(1), data(3), data(2), marker(2)),
        writes(data(3), marker(3), tm.RESULT_KEY),
    )
    verdict = tm.check_order(tm.attempts(LOG), events, bounds)
    assert verdict.violations == (
        f"attempt 1: removed file {data(3)} reached the store before {data(2)}",
    )
    assert verdict.removed_seen == (data(3),)


def test_a_delete_and_rewrite_of_an_uploaded_file_breaks_the_order_for_that_moment() -> None:
    events, bounds = run(
        writes(data(1), marker(1), data(2), marker(2)),
        [*writes(data(3)), Ev(data(1), "delete", 1), *writes(data(1), marker(3), tm.RESULT_KEY,
                                                              start=2)],
    )  # fmt: skip
    verdict = tm.check_order(tm.attempts(LOG), events, bounds)
    assert len(verdict.violations) >= 1 and verdict.lost == ()


def test_the_bounds_must_match_the_attempts() -> None:
    with pytest.raises(ValueError, match="2 attempts need 1 bounds"):
        tm.epochs(tm.attempts(LOG), [], [])


def test_newest_complete_needs_data_and_marker() -> None:
    assert tm.newest_complete([]) == 0
    assert tm.newest_complete([data(1), marker(1), data(2)]) == 1
    assert tm.newest_complete([data(1), marker(1), marker(2)]) == 1
    gone = Ev(marker(2), "delete", 9)
    visible = tm.visible_after([*writes(data(1), marker(1), data(2), marker(2)), gone])
    assert tm.newest_complete(visible) == 1


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("0", 0, 0),
        ("1023", 1023, 1023),
        ("256Mi", 255.9995 * MIB, 256.0005 * MIB),
        ("1.500Gi", 1.4995 * 1024 * MIB, 1.5005 * 1024 * MIB),
    ],
)
def test_sizes_as_rclone_logs_them(text: str, low: float, high: float) -> None:
    got = tm.size_range(text)
    assert got == pytest.approx((low, high))


CLEANER = (
    "2026/12/05 11:00:00 INFO  : vfs cache: cleaned: objects {o} (was 9) in use {u}, "
    "to upload {q}, uploading {up}, total size {total} (was {was})"
)


@pytest.mark.parametrize(
    ("fields", "over", "evicted"),
    [
        ({"u": 0, "q": 0, "up": 0, "total": "256Mi", "was": "900Mi"}, False, True),
        ({"u": 0, "q": 0, "up": 0, "total": "256.010Mi", "was": "900Mi"}, True, True),
        ({"u": 2, "q": 2, "up": 1, "total": "900Mi", "was": "900Mi"}, False, False),
        ({"u": 1, "q": 0, "up": 0, "total": "300Mi", "was": "300Mi"}, False, False),
        ({"u": 0, "q": 0, "up": 0, "total": "100Mi", "was": "120Mi"}, False, False),
    ],
)
def test_a_cache_is_over_its_bound_only_when_the_cleaner_could_have_evicted(
    fields: dict[str, object], over: bool, evicted: bool
) -> None:
    (p,) = tm.cleaner_passes(CLEANER.format(o=3, **fields))
    assert p.over(256 * MIB) is over
    assert p.evicted_over(256 * MIB) is evicted


def test_cleaner_lines_are_read_in_order_and_other_lines_ignored() -> None:
    text = "\n".join(
        [
            CLEANER.format(o=1, u=0, q=0, up=0, total="0", was="0"),
            "INFO  : ckpt/checkpoint-000001.bin: Copied (new)",
            CLEANER.format(o=2, u=1, q=1, up=0, total="1Mi", was="1Mi"),
        ]
    )
    first, second = tm.cleaner_passes(text)
    assert (first.objects, first.idle, second.objects, second.to_upload) == (1, True, 2, 1)
