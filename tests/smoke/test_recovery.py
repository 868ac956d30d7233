"""Managed spot jobs survive preemptions: a training job with its checkpoints on a
MOUNT_CACHED bucket is preempted (its node removed with its disk) and goes on from the newest
checkpoint that reached the bucket, with the same SKYPILOT_TASK_ID, to the same result as an
uninterrupted run; its checkpoints reach the store in the order they were created.

Everything is real: the CLI and detached controllers, containers as nodes, rclone mounts on
the emulators. Each test cleans up its controllers and clusters (see ``managed``).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.cloud import preemption
from harness.emulators import fleet as emulators
from harness.testing.buckets import PRIVATE_BY_USER, TestBucket, write_object
from harness.testing.managed_jobs import (
    CKPT_KEY_RE,
    CKPT_MIB,
    DETECT_GUARD_S,
    EVERY,
    STEPS,
    TRAIN_DIR,
    ManagedJobs,
    attempts,
    check_detection,
    complete_checkpoints,
    durable_checkpoints,
    jobs_cli,
)
from harness.testing.plugin import selected_stores
from skycore import state as core_state
from skycore.config import load_config
from skycore.managed import controller, core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus
from tests.polling import wait_for

pytestmark = pytest.mark.usefixtures("local_cloud")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def uninterrupted_result(tmp_path: Path) -> str:
    """The sha256 of an uninterrupted run's final weights (the program run on this host)."""
    args = f"--steps {STEPS} --every {EVERY} --ckpt-mib 0.01 --step-seconds 0".split()
    out = subprocess.run(
        [sys.executable, str(TRAIN_DIR / "train.py"), "--ckpt-dir", str(tmp_path / "clean"), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"RESULT sha256=([0-9a-f]+)", out)
    assert m, out
    return m.group(1)


def put_object(bucket: TestBucket, key: str, data: bytes) -> None:
    """Write ``key`` straight into the store with the owner's credentials."""
    write_object(bucket.store, bucket.name, key, data, bucket.owner)


@pytest.fixture
def managed(skycore_home: Path, tmp_path: Path) -> Iterator[ManagedJobs]:
    """Managed jobs of one test; every controller and cluster is gone afterwards."""
    jobs = ManagedJobs(tmp_path)
    yield jobs
    jobs.cleanup()


@pytest.fixture
def one_store(request: pytest.FixtureRequest) -> str:
    """The first selected store: the tests that are not about a store run on one only."""
    return selected_stores(request.config)[0]


@pytest.fixture
def ckpt_bucket(one_store: str, bucket_factory: Any) -> TestBucket:
    """A private bucket of the user's for the checkpoints (deleted after the test)."""
    bucket: TestBucket = bucket_factory(one_store, PRIVATE_BY_USER)
    return bucket


def preempt_and_check_detection(
    managed: ManagedJobs, job: jstate.ManagedJob, expected_recoveries: int
) -> preemption.Preemption:
    """Preempt the job's head node; the controller must mark it RECOVERING."""
    hit = preemption.preempt(job.cluster, 0)
    check_detection(managed, job, expected_recoveries)
    return hit


def queue_row(stdout: str, cluster: str) -> dict[str, str]:
    """The row of ``cluster`` in the piped 'jobs queue' table (every column whole), by
    column name."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0].split()
    for line in lines[1:]:
        cells = line.split()
        if cluster in cells:
            return dict(zip(header, cells, strict=False))
    raise AssertionError(f"no row for {cluster} in:\n{stdout}")


def assert_no_leaks(job: jstate.ManagedJob) -> None:
    """The job's cluster is gone: no node on the engine, no cluster record."""
    assert preemption.nodes(job.cluster) == {}
    assert core_state.get_cluster(job.cluster) is None


@dataclass(frozen=True)
class Snapshot:
    """The usable checkpoints in the bucket once a preemption has removed the node (nothing
    can reach the bucket from it after that); how many runs the job's log showed (RESUME
    lines) once they were listed, and how many writes the gate had recorded then."""

    steps: list[int]
    runs_logged: int
    events: int

    @property
    def newest(self) -> int:
        """The step a resume must start from (0: from scratch)."""
        return self.steps[-1] if self.steps else 0


def preempt_and_snapshot(
    managed: ManagedJobs, job: jstate.ManagedJob, bucket: TestBucket, expected_recoveries: int
) -> Snapshot:
    """Preempt the head node (detection checked) and read what the bucket holds then."""
    preempt_and_check_detection(managed, job, expected_recoveries)
    steps = durable_checkpoints(bucket)
    return Snapshot(steps, len(managed.resumes(job)), len(bucket.events()))


def assert_resumed_from_snapshot(
    snapshot: Snapshot, resumes: list[tuple[int, float]], attempt: int
) -> None:
    """Run ``attempt`` (0: the first) found exactly the bucket of ``snapshot``: the snapshot
    was taken before that run had begun (its RESUME line was not in the log yet), and it
    resumed from the snapshot's newest checkpoint."""
    assert snapshot.runs_logged <= attempt, (snapshot, resumes)  # nothing of the run in it
    step, _ = resumes[attempt]
    assert step == snapshot.newest, f"resumed from {step}, bucket had {snapshot.steps}"


def assert_checkpoints_arrived_in_order(
    bucket: TestBucket, managed: ManagedJobs, job: jstate.ManagedJob, snapshots: list[Snapshot]
) -> None:
    """Per attempt of the run, checkpoint files reached the store in the order the program
    created them. The attempts' writes are told apart by the ``snapshots`` taken after each
    preemption: an attempt's node is gone before the next one starts, so the gate's writes
    recorded by then are the earlier attempts', those after it the later ones'. Each
    manifest arrived after the whole data file of the same checkpoint, written by the same
    attempt, and older checkpoints before newer ones. Every checkpoint the last attempt
    saved arrived, and usable."""
    starts = managed.resumes(job)
    saved = [steps for _, steps in attempts(managed.log(job))]
    assert starts and len(saved) == len(starts) == len(snapshots) + 1, (starts, saved)
    bounds = [s.events for s in snapshots]
    per_attempt: list[list[emulators.WriteEvent]] = [[] for _ in starts]
    for n, e in enumerate(bucket.events()):
        if CKPT_KEY_RE.match(e.key) and e.op != "delete":
            per_attempt[bisect.bisect_right(bounds, n)].append(e)

    def order(key: str) -> tuple[int, int]:
        m = CKPT_KEY_RE.match(key)
        assert m
        return int(m.group(1)), 0 if m.group(2) == "bin" else 1

    for n, events in enumerate(per_attempt):
        first: dict[str, emulators.WriteEvent] = {}
        for e in events:
            first.setdefault(e.key, e)
        keys = list(first)
        assert keys == sorted(keys, key=order), f"attempt {n + 1}: {keys}"
        for key in keys:
            step, kind = order(key)
            data = f"ckpt/checkpoint-{step:06d}.bin"
            if kind == 1:
                assert data in first, f"attempt {n + 1}: manifest {step} without its data"
                assert first[data].size == CKPT_MIB * 2**20, (step, first[data])
    last = saved[-1]
    assert last, "the last attempt saved no checkpoint"
    assert set(last) <= set(durable_checkpoints(bucket)), (last, bucket.list_keys())


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------


def test_preempt_once_resumes_from_checkpoint(
    store: str, bucket_factory: Any, managed: ManagedJobs, tmp_path: Path
) -> None:
    bucket: TestBucket = bucket_factory(store, PRIVATE_BY_USER)
    expected = uninterrupted_result(tmp_path)
    job = managed.launch(managed.spec(bucket))
    managed.wait_log(job, r"^saved checkpoint 15 ")
    wait_for("a checkpoint in the bucket", lambda: complete_checkpoints(bucket.list_keys()), 60)
    at_preemption = preempt_and_snapshot(managed, job, bucket, expected_recoveries=1)
    assert at_preemption.newest > 0, at_preemption

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    assert done.recovery_count == 1
    resumes = managed.resumes(job)
    assert len(resumes) == 2, resumes
    assert resumes[0][0] == 0
    # It resumed from the newest checkpoint the bucket held when the node was removed.
    assert_resumed_from_snapshot(at_preemption, resumes, 1)
    step, _ = resumes[1]
    # The same task id in both attempts.
    ids = re.findall(r"^TASK_ID (\S+)", managed.log(job), re.M)
    assert len(ids) == 2 and ids[0] == ids[1] == done.task_id, ids
    assert ids[0] != "-"
    # It resumed from a checkpoint that had reached the store before it resumed: the
    # snapshot, listed from the store before the run began, holds it.
    assert step in at_preemption.steps, (step, at_preemption)
    # Same result as an uninterrupted run; checkpoints arrived in creation order.
    result = json.loads(bucket.read("ckpt/result.json"))
    assert result["sha256"] == expected
    assert result["resumed_from"] == step
    # Nothing durable at the preemption was lost; every checkpoint arrived data first.
    assert set(at_preemption.steps) <= set(durable_checkpoints(bucket))
    assert_checkpoints_arrived_in_order(bucket, managed, job, [at_preemption])
    assert_no_leaks(job)
    # The queue shows the recovery count: in the piped table and in --json.
    queue = jobs_cli("queue")
    assert queue.returncode == 0, queue.stderr
    row = queue_row(queue.stdout, job.cluster)
    assert row["STATUS"] == "SUCCEEDED" and row["RECOVERIES"] == "1", queue.stdout
    listed = json.loads(jobs_cli("queue", "--json").stdout)
    (mine,) = [j for j in listed if j["job_id"] == job.job_id]
    assert (mine["status"], mine["recovery_count"]) == ("SUCCEEDED", 1), mine


def test_preempt_twice(ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path) -> None:
    expected = uninterrupted_result(tmp_path)
    job = managed.launch(managed.spec(ckpt_bucket))
    wait_for(
        "a checkpoint in the bucket", lambda: complete_checkpoints(ckpt_bucket.list_keys()), 90
    )
    first = preempt_and_snapshot(managed, job, ckpt_bucket, expected_recoveries=1)
    managed.wait_status(job, JobStatus.RUNNING)
    # Once the second attempt has uploaded a checkpoint of its own, preempt it again.
    resumed = managed.wait_log(job, r"^RESUME step=(\d+) .*\n(?:.*\n)*RESUME step=(\d+) ")
    newer = int(resumed.group(2)) + EVERY
    wait_for(
        f"checkpoint {newer} in the bucket",
        lambda: newer in complete_checkpoints(ckpt_bucket.list_keys()),
        60,
    )
    second = preempt_and_snapshot(managed, job, ckpt_bucket, expected_recoveries=2)
    assert newer in second.steps, second

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    assert done.recovery_count == 2
    resumes = managed.resumes(job)
    assert len(resumes) == 3 and resumes[0][0] == 0, resumes
    assert_resumed_from_snapshot(first, resumes, 1)
    assert_resumed_from_snapshot(second, resumes, 2)
    assert 0 < first.newest < second.newest, (first, second)
    assert json.loads(ckpt_bucket.read("ckpt/result.json"))["sha256"] == expected
    final = set(durable_checkpoints(ckpt_bucket))
    assert set(first.steps) <= set(second.steps) <= final, (first, second, final)
    assert_checkpoints_arrived_in_order(ckpt_bucket, managed, job, [first, second])
    assert_no_leaks(job)


def test_preempt_during_setup(
    ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path
) -> None:
    expected = uninterrupted_result(tmp_path)
    setup = "echo SETUP-START $SKYPILOT_TASK_ID; sleep 3; echo SETUP-DONE"
    job = managed.launch(managed.spec(ckpt_bucket, setup=setup))
    managed.wait_log(job, r"^SETUP-START ")
    assert jstate.get(job.job_id).status is JobStatus.STARTING  # type: ignore[union-attr]
    preempt_and_check_detection(managed, job, expected_recoveries=1)

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    assert done.recovery_count == 1
    log = managed.log(job)
    # Setup ran again after the recovery, with the same task id; the run started only once.
    assert re.findall(r"^SETUP-START (\S+)", log, re.M) == [done.task_id, done.task_id]
    assert [s for s, _ in managed.resumes(job)] == [0]
    assert json.loads(ckpt_bucket.read("ckpt/result.json"))["sha256"] == expected
    assert_no_leaks(job)


def test_preempt_right_after_checkpoint(
    ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path
) -> None:
    """Preempted as soon as a checkpoint is durable in the bucket, the job resumes from that
    checkpoint, and never from a partial one: the resumed run skips a data file without
    manifest and one that does not match its manifest."""
    expected = uninterrupted_result(tmp_path)
    # Slower steps: the next checkpoint is 2 s away, so the preemption lands between the two.
    job = managed.launch(managed.spec(ckpt_bucket, extra="--step-seconds 0.4"))
    durable = wait_for(
        "checkpoint 10 in the bucket",
        lambda: [s for s in complete_checkpoints(ckpt_bucket.list_keys()) if s >= 10],
        90,
        poll=0.05,
    )[0]
    at_preemption = preempt_and_snapshot(managed, job, ckpt_bucket, expected_recoveries=1)
    assert at_preemption.newest == durable, (durable, at_preemption)

    # Partial checkpoints newer than that: data shorter than its manifest says, data without
    # manifest (as a cut-off upload would leave them). The node is gone and the relaunch
    # mounts the bucket later, so it finds them.
    short, no_manifest = durable + EVERY, durable + 2 * EVERY
    assert no_manifest < STEPS
    put_object(ckpt_bucket, f"ckpt/checkpoint-{no_manifest:06d}.bin", b"partial")
    put_object(ckpt_bucket, f"ckpt/checkpoint-{short:06d}.bin", b"x" * 1000)
    manifest = {
        "step": short,
        "file": f"checkpoint-{short:06d}.bin",
        "size": CKPT_MIB * 2**20,
        "sha256": "0" * 64,
    }
    put_object(ckpt_bucket, f"ckpt/checkpoint-{short:06d}.json", json.dumps(manifest).encode())

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    log = managed.log(job)
    assert f"skipping incomplete checkpoint {no_manifest}: no manifest" in log
    assert f"skipping incomplete checkpoint {short}: data has 1000 bytes" in log
    resumes = managed.resumes(job)
    assert len(resumes) == 2 and resumes[0][0] == 0, resumes
    assert_resumed_from_snapshot(at_preemption, resumes, 1)
    assert json.loads(ckpt_bucket.read("ckpt/result.json"))["sha256"] == expected
    assert set(at_preemption.steps) <= set(durable_checkpoints(ckpt_bucket))
    assert_no_leaks(job)


@pytest.mark.parametrize("max_restarts", [0, 1])
def test_user_error_restarts_only_if_allowed(
    max_restarts: int, ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path
) -> None:
    """A failing program is not a preemption: FAILED, unless max_restarts_on_errors allows
    a restart (the program fails once, then resumes from its checkpoint)."""
    spec = managed.spec(
        ckpt_bucket,
        steps=12,
        extra="--fail-at-step 8 --fail-once",
        job_recovery={"max_restarts_on_errors": max_restarts},
    )
    job = managed.launch(spec)
    done = managed.wait_done(job)
    log = managed.log(job)
    assert done.recovery_count == 0
    assert len(re.findall(r"^FAILING on purpose at step 8", log, re.M)) == 1
    if max_restarts == 0:
        assert done.status is JobStatus.FAILED, log[-4000:]
        assert "exit 3" in done.status_reason
        assert done.restarts_on_errors == 0
    else:
        assert done.status is JobStatus.SUCCEEDED, log[-4000:]
        assert done.restarts_on_errors == 1
        assert [s for s, _ in managed.resumes(job)] == [0, 5]
    assert_no_leaks(job)


def test_cancel_while_recovering(ckpt_bucket: TestBucket, managed: ManagedJobs) -> None:
    setup = "sleep 4"  # keeps the relaunch in RECOVERING for a while
    job = managed.launch(managed.spec(ckpt_bucket, setup=setup))
    managed.wait_log(job, r"^step 3 ")
    preempt_and_check_detection(managed, job, expected_recoveries=1)
    cancelled = jobs_cli("cancel", str(job.job_id), "-y")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "cancel requested" in cancelled.stdout

    done = managed.wait_done(job)
    assert done.status is JobStatus.CANCELLED, managed.log(job)[-4000:]
    statuses = [e.to_status for e in managed.events(job) if e.from_status != e.to_status]
    assert statuses[-2:] == ["RECOVERING", "CANCELLED"], statuses
    assert_no_leaks(job)
    again = jobs_cli("cancel", str(job.job_id), "-y")
    assert "already CANCELLED" in again.stdout


def test_killed_controller_is_adopted(
    ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path
) -> None:
    """A controller killed mid-run leaks nothing: the next 'jobs queue' starts a new one,
    which drains and tears down the orphaned run and relaunches it from its checkpoint."""
    expected = uninterrupted_result(tmp_path)
    job = managed.launch(managed.spec(ckpt_bucket))
    managed.wait_log(job, r"^saved checkpoint 10 ")
    running = jstate.get(job.job_id)
    assert running is not None and running.controller_pid
    os.kill(running.controller_pid, signal.SIGKILL)
    wait_for("the controller lock to be free", lambda: not core.controller_alive(job.job_id), 10)

    def adopted() -> bool:
        # 'jobs queue' adopts the job once its heartbeat is ADOPT_AFTER_S old: poll, since
        # when exactly that is depends on the killed controller's last beat.
        queue = jobs_cli("queue")
        assert queue.returncode == 0, queue.stderr
        return any(e.reason.startswith("no live controller") for e in managed.events(job))

    wait_for("'jobs queue' to adopt the job", adopted, core.ADOPT_AFTER_S + 30, poll=0.5)
    wait_for("a new controller", lambda: core.controller_alive(job.job_id), 15)

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    assert done.controller_pid != running.controller_pid
    reasons = [e.reason for e in managed.events(job)]
    assert any("controller restarted" in r for r in reasons), reasons
    steps = [s for s, _ in managed.resumes(job)]
    assert len(steps) == 2 and steps[1] >= 10, steps  # drained before the relaunch
    assert json.loads(ckpt_bucket.read("ckpt/result.json"))["sha256"] == expected
    assert_no_leaks(job)


def test_cancel_while_running_drains_checkpoints(
    ckpt_bucket: TestBucket, managed: ManagedJobs
) -> None:
    """Cancel stops the run, and what it wrote still reaches the bucket (drained before the
    nodes go); 'jobs logs --follow' ends with the job, exit 103."""
    job = managed.launch(managed.spec(ckpt_bucket, steps=200))
    managed.wait_log(job, r"^saved checkpoint 10 ")
    cancelled = jobs_cli("cancel", str(job.job_id), "-y")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    follow = jobs_cli("logs", str(job.job_id), "--follow")
    assert follow.returncode == 103, follow.stdout[-3000:] + follow.stderr
    assert "RESUME step=0" in follow.stdout and "CANCELLED" in follow.stdout

    done = managed.wait_done(job)
    assert done.status is JobStatus.CANCELLED
    saved = [int(s) for s in re.findall(r"^saved checkpoint (\d+) ", managed.log(job), re.M)]
    assert max(saved) in complete_checkpoints(ckpt_bucket.list_keys()), saved
    assert_no_leaks(job)


def test_no_nodes_is_failed_no_resource(ckpt_bucket: TestBucket, managed: ManagedJobs) -> None:
    spec = managed.spec(ckpt_bucket)
    spec["resources"] = {"image_id": "docker:skycore-no-such-image:latest"}
    job = managed.launch(spec)
    done = managed.wait_done(job, timeout=60)
    assert done.status is JobStatus.FAILED_NO_RESOURCE, managed.log(job)[-3000:]
    assert "never pulled" in done.status_reason
    tries = [
        e
        for e in managed.events(job)
        if e.from_status == e.to_status and e.reason.startswith("launching cluster")
    ]
    assert len(tries) == 3  # retried with backoff before giving up
    assert_no_leaks(job)


def test_worker_preempted_on_two_nodes(
    ckpt_bucket: TestBucket, managed: ManagedJobs, tmp_path: Path
) -> None:
    """Losing a worker is a preemption too: the whole cluster is relaunched."""
    expected = uninterrupted_result(tmp_path)
    spec = managed.spec(ckpt_bucket)
    spec["num_nodes"] = 2
    head_run = spec["run"]
    spec["run"] = (
        'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then\n'
        f"  {head_run}\n"
        "else\n"
        f"  {head_run.replace('/checkpoints/ckpt', '/tmp/worker-ckpt')} > /dev/null\n"
        "fi"
    )
    job = managed.launch(spec)
    wait_for(
        "a checkpoint in the bucket", lambda: complete_checkpoints(ckpt_bucket.list_keys()), 90
    )
    preemption.preempt(job.cluster, 1)
    now = managed.wait_status(job, JobStatus.RECOVERING, timeout=DETECT_GUARD_S)
    assert now.status_reason.startswith("preempted: node(s) 1 ")
    assert now.recovery_count == 1

    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    steps = [s for s, _ in managed.resumes(job)]
    assert len(steps) == 2 and steps[1] > 0, steps
    assert json.loads(ckpt_bucket.read("ckpt/result.json"))["sha256"] == expected
    assert_no_leaks(job)


def test_worker_preempted_survivors_are_drained(
    ckpt_bucket: TestBucket, managed: ManagedJobs
) -> None:
    """When a worker is preempted, the head's pending cached writes are drained before its
    node is removed: a checkpoint written just before the preemption reaches the bucket."""
    size = 32 * 1024 * 1024
    ckpt = "/checkpoints/ckpt/last.bin"
    spec: dict[str, Any] = {
        "name": "drain2",
        "num_nodes": 2,
        "file_mounts": {"/checkpoints": ckpt_bucket.mount_entry("MOUNT_CACHED")},
        "run": (
            f"if [ -f {ckpt} ]; then echo FOUND $(stat -c %s {ckpt}); exit 0; fi\n"
            'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then\n'
            f"  mkdir -p /checkpoints/ckpt && head -c {size} /dev/urandom > {ckpt}\n"
            f'  echo "WROTE-CKPT $(sha256sum < {ckpt} | cut -d" " -f1)"\n'
            "fi\n"
            "sleep 600"
        ),
    }
    job = managed.launch(spec, name="drain2")
    wrote = managed.wait_log(job, r"WROTE-CKPT ([0-9a-f]{64})$", timeout=120)
    preemption.preempt(job.cluster, 1)
    managed.wait_status(job, JobStatus.RECOVERING, timeout=DETECT_GUARD_S)

    def relaunched() -> str | None:
        # The relaunch finds the checkpoint in the bucket, or (it was lost) writes it again.
        log = managed.log(job)
        if re.search(r"^\(head, rank=0\) FOUND ", log, re.M):
            return "found"
        return "lost" if len(re.findall(r"^\(head, rank=0\) WROTE-CKPT ", log, re.M)) > 1 else None

    assert wait_for("the relaunched run", relaunched, 120) == "found", managed.log(job)[-4000:]
    done = managed.wait_done(job)
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    log = managed.log(job)
    assert re.search(rf"^\(head, rank=0\) FOUND {size}$", log, re.M), log[-4000:]
    data = ckpt_bucket.read("ckpt/last.bin")
    assert len(data) == size and hashlib.sha256(data).hexdigest() == wrote.group(1)
    assert "drained 1 mount(s) on the surviving nodes" in log, log[-4000:]
    assert_no_leaks(job)


def test_teardown_keeps_a_cluster_it_cannot_drain(
    ckpt_bucket: TestBucket,
    managed: ManagedJobs,
    cluster_factory: Any,
    node_shell: Any,
    store_faults: Any,
) -> None:
    """A job's final teardown whose drain fails while a node is UP is retried with backoff,
    then keeps the cluster and ends the job FAILED saying to run 'skycore down': the node's
    cached writes are never thrown away, and that 'down' uploads them. The drain fails for
    real: the node's rclone is frozen (SIGSTOP), so its rc socket does not answer. The store
    refuses the bucket's requests from before the write until rclone is frozen, so the
    write is still only on the node, however soon rclone tried to upload it."""
    cluster = cluster_factory("keep")
    mount = "/ckpt"
    spec = {
        "file_mounts": {mount: ckpt_bucket.mount_entry("MOUNT_CACHED")},
        "run": f"echo early > {mount}/early.txt",
    }
    launched = cluster.launch(spec)
    assert launched.exit_code == 0, launched.output
    job = jstate.add_job("keep", use_spot=True, strategy="FAILOVER", max_restarts_on_errors=0)
    jstate.update(job.job_id, cluster=cluster.name)
    out = io.StringIO()
    ctl = controller.Controller(job.job_id, out=out)
    ctl.config = load_config()
    ctl.teardown_tries, ctl.teardown_backoff = 2, (0.5,)
    # A write whose upload the store refuses, then the frozen rclone.
    with store_faults.hold(ckpt_bucket.store, "deny", bucket=ckpt_bucket.name):
        rc, said = node_shell(
            cluster, 0, f"echo pending > {mount}/pending.txt && kill -STOP $(pidof rclone)"
        )
    assert rc == 0, said
    try:
        ctl._end(JobStatus.SUCCEEDED, "the run finished")
        log = out.getvalue()
        assert "teardown failed (try 1/2)" in log and "retrying in 0.5 s" in log, log
        done = jstate.get(job.job_id)
        assert done is not None and done.status is JobStatus.FAILED, log
        assert done.status_reason.startswith(
            f"cluster {cluster.name} kept: uploads still pending; run 'skycore down {cluster.name}'"
        ), done.status_reason
        assert "the job had ended SUCCEEDED" in done.status_reason
        # Kept: the node is still UP, its cluster recorded, the write still only on the node.
        assert list(preemption.nodes(cluster.name)) == [0]
        assert cluster.status() == core_state.CLUSTER_UP
        assert "pending.txt" not in ckpt_bucket.list_keys()
    finally:
        node_shell(cluster, 0, "kill -CONT $(pidof rclone)")
    cluster.down()  # what the reason says to run
    assert ckpt_bucket.read("pending.txt") == b"pending\n"
    assert_no_leaks(jstate.get(job.job_id))  # type: ignore[arg-type]
