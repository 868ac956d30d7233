"""The recipe matrix, what happens around the writer: a store that refuses (403), hangs or
answers 503 while a job writes; a cluster stopped right after files were written, then
started; a managed job whose node is preempted mid-run.

Each scenario runs on the session's mount recipe (``--recipe``) and records one row
(harness.recipes.matrix); it fails only for a promise that recipe makes. Faults are scoped
to the scenario's bucket and end on events: the writer finished and the fault met a request.
The scenarios of a store run side by side (harness.testing.side_by_side).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness.cloud.preemption import preempt
from harness.recipes.matrix import Promise
from harness.testing import managed_jobs as train
from harness.testing.buckets import PRIVATE_BY_USER, SKY_MANAGED
from harness.testing.module_marks import slow_per_store
from harness.testing.order_check import visible_prefix_violations
from harness.testing.side_by_side import ScenarioKit
from skycore.state.managed_jobs import JobStatus
from tests.matrix import node_writer
from tests.matrix.kit import (
    CKPT,
    Recorder,
    cached_cluster,
    job_verdict,
    keys_of,
    lost_verdict,
    order_verdict,
    scenario_cases,
    shell,
    write_through_fault,
    writer_verdict,
)
from tests.polling import wait_for

pytestmark = slow_per_store("matrix-faults")

KIB = 1 << 10

# --- c. the writer during a 403, an outage, a 503 storm --------------------------------------

N_WRITES, WRITE_SIZE, SPACING_S = 30, 64 * KIB, 0.5
WRITER_HANG_S = 150.0  # 10x the writer's 15 s
FAULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "writer-deny": ("deny", {}),
    "writer-outage": ("outage", {}),
    "writer-503": ("errors", {"status": 503}),
}
"""Scenario -> the fault (kind, options), on every request of the bucket while it lasts."""


def writer_during(store: str, kit: ScenarioKit, name: str) -> None:
    """A job writes 30 files (64 KiB, 0.5 s apart: 15 s, as a job writes over time, past a
    listing cache of 10 s) while the fault is on; the fault ends once the writer finished
    and the fault met a request (an upload it held or refused). The writer never waited
    for the store, nothing it wrote is lost at the job's end, order."""
    kind, options = FAULTS[name]
    rec = Recorder(kit, name)
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = cached_cluster(kit, bucket, None, ["w"])
    files = [(f"{CKPT}/w/w-{i:03d}.bin", WRITE_SIZE) for i in range(N_WRITES)]
    fault = kit.store_faults.start(store, kind, bucket=bucket.name, **options)
    job, written, blocked = write_through_fault(
        rec, cluster, fault, files, SPACING_S, WRITER_HANG_S
    )
    outcome = job.outcome()
    expected = keys_of(files, written)
    _, lost = rec.measure(bucket, expected, "w/", written.last_close)
    rec.check(
        writer_verdict(written, blocked, kind),
        order_verdict(rec),
        job_verdict(lost, len(expected), outcome),
    )


def writer_during_deny(store: str, kit: ScenarioKit) -> None:
    writer_during(store, kit, "writer-deny")


def writer_during_outage(store: str, kit: ScenarioKit) -> None:
    writer_during(store, kit, "writer-outage")


def writer_during_503(store: str, kit: ScenarioKit) -> None:
    writer_during(store, kit, "writer-503")


# --- e. stop at once after writes, then start --------------------------------------------------

N_STOP, STOP_SIZE = 20, 256 * KIB


def in_store(bucket: Any, expected: list[str]) -> list[str]:
    """The keys of ``expected`` in the bucket now."""
    listed = set(bucket.list_keys())
    return [k for k in expected if k in listed]


def stop_start(store: str, kit: ScenarioKit) -> None:
    """Files written on the node outside any job, then ``skycore stop`` at once, ``start``
    and a job (whose end is the recipe's drain). What was in the store when stop returned
    (all of it if the recipe drains before a stop), after start, and after the job."""
    rec = Recorder(kit, "stop-start")
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = cached_cluster(kit, bucket, None, ["stop"])
    files = [(f"{CKPT}/stop/s-{i:03d}.bin", STOP_SIZE) for i in range(N_STOP)]
    out = shell(cluster, node_writer.command(files, "/tmp/matrix-stop.done"))
    written = node_writer.parse(out)
    assert written is not None, out
    rec.writes(written)
    expected = keys_of(files, written)
    cluster.stop()
    at_stop = in_store(bucket, expected)
    assert cluster.status() == "STOPPED"
    cluster.start()
    after_start = in_store(bucket, expected)
    outcome = cluster.exec({"name": "after-start", "run": "true"})
    rec.note(
        f"in the store: {len(at_stop)} of {N_STOP} when stop returned, {len(after_start)} "
        f"when start returned, {len(in_store(bucket, expected))} after a job"
    )
    _, lost = rec.measure(bucket, expected, "stop/", written.last_close)
    not_at_stop = [k for k in expected if k not in at_stop]
    rec.row.lost_note = f"{len(not_at_stop)} not there at stop"
    rec.check(
        lost_verdict(Promise.DRAINED_BEFORE_STOP, not_at_stop, len(expected), "at stop"),
        lost_verdict(Promise.NOTHING_LOST, lost, len(expected), "after start and a job"),
        order_verdict(rec),
    )
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()


# --- f. a managed job preempted mid-run -------------------------------------------------------

TRAIN_STEPS = 60  # the job still runs when its node is removed, even under load
DETECT_HANG_S = 30.0  # the controller sees a preemption within about a second
SAVED_AT = re.compile(r"saved checkpoint \d+ \(\d+ bytes\) t=([\d.]+)")
"""The wall time (the node's clock) of each of the program's 'saved checkpoint' lines."""


def attempt_order(events: list[Any], resumed: int) -> tuple[bool, str | None]:
    """Whether one attempt's checkpoint writes (``events``) kept the creation order of the
    checkpoints after ``resumed``; its first violation."""
    steps = range(resumed + train.EVERY, TRAIN_STEPS + 1, train.EVERY)
    expected = [k for s in steps for k in train.checkpoint_keys(s)]
    found = visible_prefix_violations(events, expected, "ckpt/checkpoint-")
    if not found:
        return True, None
    return False, f"{found[0].describe()} [{len(found)} of {len(events)} events were violations]"


def preemption(store: str, kit: ScenarioKit) -> None:
    """A managed spot job trains with its checkpoints on a MOUNT_CACHED bucket; its node is
    removed once a checkpoint is in the store. It recovers from the newest checkpoint the
    store held then. Row: the checkpoints the first run saved that the store did not have
    when the node vanished, the order per run, and that the last run lost nothing."""
    rec = Recorder(kit, "preemption")
    jobs = train.ManagedJobs(kit.tmp_path, own_jobs_only=True)  # the home is shared
    kit.on_cleanup(jobs.cleanup)
    bucket = kit.bucket_factory(store, PRIVATE_BY_USER)
    job = jobs.launch(jobs.spec(bucket, steps=TRAIN_STEPS), timeout=300)
    jobs.wait_log(job, r"saved checkpoint 10 ", timeout=180)
    wait_for(
        "a checkpoint in the store",
        lambda: train.complete_checkpoints(bucket.list_keys()),
        120,
    )
    preempt(job.cluster, 0)
    jobs.wait_status(job, JobStatus.RECOVERING, timeout=DETECT_HANG_S)
    at_preemption = train.durable_checkpoints(bucket)
    boundary = len(bucket.events())  # the node is gone: later writes are the relaunch's
    done = jobs.wait_done(job, 600)
    log = jobs.log(job)
    runs = train.attempts(log)
    all_events = bucket.events()
    first_run = [e for e in all_events[:boundary] if e.key.startswith("ckpt/checkpoint-")]
    later = [e for e in all_events[boundary:] if e.key.startswith("ckpt/checkpoint-")]
    kept = []
    for n, (part, (resumed, _)) in enumerate(zip([first_run, later], runs, strict=False)):
        ok, violation = attempt_order(part, resumed)
        kept.append(ok)
        if violation and rec.row.first_violation is None:
            rec.row.first_violation = f"run {n + 1}: {violation}"
    rec.row.order_kept = all(kept)
    saved_first = runs[0][1] if runs else []
    not_stored = [s for s in saved_first if s not in at_preemption]
    rec.row.files, rec.row.files_lost = len(saved_first), len(not_stored)
    rec.row.lost_note = "when the node vanished"
    final = train.durable_checkpoints(bucket)
    last_saved = runs[-1][1] if runs else []
    lost_at_end = [s for s in last_saved if s not in final]
    rec.note(
        f"checkpoints: the first run saved {saved_first}, the store had {at_preemption} when "
        f"the node vanished; the job resumed from {[r for r, _ in runs[1:]]}; the job ended "
        f"{done.status}"
    )
    saves = [float(t) for t in SAVED_AT.findall(log)]
    if saves and later:
        rec.row.durable_s = round(max(e.t_ns for e in later) / 1e9 - saves[-1], 2)
    lost_keys = [k for s in lost_at_end for k in train.checkpoint_keys(s)]
    rec.check(
        order_verdict(rec),
        lost_verdict(
            Promise.NOTHING_LOST_AT_JOB_END,
            lost_keys,
            2 * len(last_saved),
            "when the last run's job ended",
        ),
    )
    assert done.status is JobStatus.SUCCEEDED, log[-4000:]
    assert len(runs) == 2, runs
    # The relaunch saw at least what the store held once the node was gone (an upload the
    # gate had accepted before may still complete after that listing, never one after it).
    resumed, newest = runs[1][0], (at_preemption[-1] if at_preemption else 0)
    assert resumed >= newest and resumed in [0, *saved_first], (runs, at_preemption)


# --- the tests: one per scenario, run side by side with the store's others -------------------


@scenario_cases(
    {
        "writer-deny": writer_during_deny,
        "writer-outage": writer_during_outage,
        "writer-503": writer_during_503,
        "stop-start": stop_start,
        "preemption": preemption,
    }
)
def test_store_faults(case: str, side_by_side: Any, request: pytest.FixtureRequest) -> None:
    """Scenario ``case`` of this store on the session's recipe (its row is recorded)."""
    side_by_side.join(request)
