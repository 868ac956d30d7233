"""A training run's lifetime, short (bench/training_run.py's scenario, on every store): a
managed spot job writes small checkpoints (a data file, then its marker) every few tenths of
a second through an ordered MOUNT_CACHED mount on a node with its own 1 GiB disk and a cache
bounded far below what it writes, through a 503 storm, an outage and one preemption.

Every fault ends on events the test waits for (the gate's refusals and hits, a checkpoint
written while the fault holds the uploads); the preemption comes over a slow link once the two
newest checkpoints wait for the store (the older one's upload under way or next), and the
recovered run ends when the test says so (a stop file on its node). The verdicts are causes:
the gate's write events replayed (order at every moment, nothing lost but what went with the
node), the store as it was when the controller marked the job RECOVERING (where the recovered
run must resume), rclone's own cache cleaner lines (the bound), the training program's log.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.cloud import preemption
from harness.testing.buckets import PRIVATE_BY_USER, TestBucket
from harness.testing.clusters import SmokeCluster
from harness.testing.managed_jobs import TRAIN_DIR, ManagedJobs
from skycore.provision import disks
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus
from tests.polling import wait_for
from tests.smoke import fault_events

pytestmark = [
    pytest.mark.usefixtures("local_cloud"),
    pytest.mark.requires_capability("records_events"),
    pytest.mark.slow,
]

CKPT_MIB = 1
STEP_S = 0.3
BOUND = 2 << 20  # config.mount_cached.vfs_cache_max_size: 2M
RECOVERED_CHECKPOINTS = 4  # the recovered run writes 4 MiB and more: twice the bound
SLOW_MIBPS = 2.0  # the link during the preemption: a 1 MiB checkpoint takes half a second
STOP_FILE = "/tmp/stop-training"
GUARD_S = 120.0  # hang guard of each wait (each takes a few seconds)
MOUNTS = "/var/lib/skycore/mounts"


def bench_module(name: str) -> ModuleType:
    """A module of bench/, imported the way its scripts import each other."""
    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module(name)


tm = bench_module("training_model")


@pytest.fixture
def managed(skycore_home: Path, tmp_path: Path) -> Iterator[ManagedJobs]:
    """Managed jobs of one test; every controller and cluster is gone afterwards."""
    jobs = ManagedJobs(tmp_path)
    yield jobs
    jobs.cleanup()


def training_spec(bucket: TestBucket) -> dict[str, Any]:
    """The training task: checkpoints every step until the stop file exists on its node,
    then the cleaner lines of its mount daemon once rclone's cleaner has had an idle pass."""
    entry = bucket.mount_entry(
        "MOUNT_CACHED", config={"mount_cached": {"vfs_cache_max_size": "2M"}}
    )
    return {
        "name": "trainrun",
        "resources": {
            "disk_size": 1,
            "job_recovery": {"strategy": "FAILOVER", "max_restarts_on_errors": 0},
        },
        "workdir": str(TRAIN_DIR),
        "file_mounts": {"/checkpoints": entry},
        "setup": "python3 --version",
        "run": (
            f"python3 train.py --ckpt-dir /checkpoints/ckpt --steps 100000 --every 1 "
            f"--ckpt-mib {CKPT_MIB} --step-seconds {STEP_S} --stop-file {STOP_FILE} "
            f"&& python3 cleaner_lines.py --log {MOUNTS}/rcd-t1/rclone.log --timeout 60"
        ),
    }


def saved(managed: ManagedJobs, job: Any) -> list[int]:
    """Every step saved so far, over every attempt, in the log's order."""
    return [s for a in tm.attempts(managed.log(job)) for s in a.saved_steps]


def next_checkpoint(managed: ManagedJobs, job: Any) -> int:
    """Wait for a checkpoint saved after now; its step."""
    before = len(saved(managed, job))
    found: int = wait_for(
        "the next checkpoint saved",
        lambda: saved(managed, job)[before:][:1] or None,
        GUARD_S,
    )[0]
    return found


def recovering(job: Any) -> bool:
    """True once the controller has marked the job RECOVERING for a preemption (its recorded
    events: the status itself may have moved on)."""
    return any(
        e.to_status == JobStatus.RECOVERING and "preempted" in e.reason
        for e in jstate.events(job.job_id)
    )


def waiting(bucket: TestBucket, managed: ManagedJobs, job: Any) -> list[int]:
    """The saved checkpoints whose marker is not in the store now, oldest first."""
    in_store = tm.visible_after(bucket.events())
    return [s for s in saved(managed, job) if tm.names(s)[1] not in in_store]


def two_waiting(bucket: TestBucket, managed: ManagedJobs, job: Any) -> list[int] | None:
    """The two newest of ``waiting`` when there are two (None: fewer)."""
    behind = waiting(bucket, managed, job)
    return behind[-2:] if len(behind) > 1 else None


def uninterrupted_result(steps: int, folder: Path) -> str:
    """The sha256 of an uninterrupted run's weights after ``steps`` (the program on the host,
    its checkpoint folder ``folder``)."""
    out = subprocess.run(
        [sys.executable, str(TRAIN_DIR / "train.py"), "--ckpt-dir", str(folder),
         "--steps", str(steps), "--every", "0", "--step-seconds", "0"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    m = re.search(r"RESULT sha256=([0-9a-f]+)", out)
    assert m, out
    return m.group(1)


def test_training_run_through_a_storm_an_outage_and_a_preemption(
    store: str,
    bucket_factory: Any,
    managed: ManagedJobs,
    store_faults: Any,
    tmp_path: Path,
    record_property: Any,
) -> None:
    bucket: TestBucket = bucket_factory(store, PRIVATE_BY_USER)
    job = managed.launch(training_spec(bucket), name="trainrun")
    wait_for(
        "two complete checkpoints in the store",
        lambda: tm.newest_complete(tm.visible_after(bucket.events())) >= 2,
        GUARD_S,
    )

    # A 503 storm, until it refused an upload and a checkpoint was written after that.
    since = fault_events.log_offset(store)
    with store_faults.hold(store, "errors", rate=0.5, status=503, bucket=bucket.name):
        refused = fault_events.wait_refused(
            store, bucket.name, since, GUARD_S, prefix="ckpt/", status=503
        )
        during_storm = next_checkpoint(managed, job)

    # An outage, until it held a request and a saved checkpoint's marker was not in the store
    # while it lasted (its upload held).
    with store_faults.hold(store, "outage", bucket=bucket.name) as outage:
        fault_events.wait_hits(store, outage, 1, GUARD_S)
        held = wait_for(
            "a saved checkpoint held by the outage",
            lambda: waiting(bucket, managed, job)[-1:],
            GUARD_S,
        )[0]
        assert fault_events.lasts(store, outage)

    # The preemption, over a slow link (2 MiB/s a stream) once the two newest checkpoints
    # saved wait for the store (the older one's upload under way or next): the node's rclone
    # log is read from its disk on the host first (it goes with the node).
    with store_faults.hold(store, "stream-bandwidth", mibps=SLOW_MIBPS, bucket=bucket.name):
        next_checkpoint(managed, job)
        behind = wait_for(
            "two saved checkpoints waiting for the store",
            lambda: two_waiting(bucket, managed, job),
            GUARD_S,
        )
        rclone_log = disks.disk_of(job.cluster, 0).source / "rcd-t1" / "rclone.log"
        first_node = rclone_log.read_text(errors="replace")
        preemption.preempt(job.cluster, 0)
    wait_for("the job marked RECOVERING", lambda: recovering(job), GUARD_S)
    at_recovery = bucket.events()
    runs_then = len(tm.attempts(managed.log(job)))

    # The recovered run writes a few checkpoints, then the test stops it.
    def recovered_saved() -> bool:
        runs = tm.attempts(managed.log(job))
        return len(runs) == 2 and len(runs[1].saved) >= RECOVERED_CHECKPOINTS

    wait_for("the recovered run's checkpoints", recovered_saved, GUARD_S)
    code, out = SmokeCluster(job.cluster, tmp_path).shell(f"touch {STOP_FILE}")
    assert code == 0, out
    done = managed.wait_done(job, timeout=GUARD_S)
    log = managed.log(job)
    assert done.status is JobStatus.SUCCEEDED, log[-4000:]
    assert done.recovery_count == 1

    events = bucket.events()
    runs = tm.attempts(log)
    assert len(runs) == 2 and runs_then == 1, (runs_then, runs)
    assert not runs[0].failed and not runs[1].failed, runs  # a 1 GiB disk never filled
    assert during_storm in runs[0].saved_steps and held in runs[0].saved_steps
    record_property("storm_refused", len(refused))

    # Resumed from the newest checkpoint whose data and marker were in the store when the
    # job was recovered (taken before the recovered run began: one RESUME line then).
    newest = tm.newest_complete(tm.visible_after(at_recovery))
    assert newest >= 2 and runs[1].resumed_from == newest, (newest, runs[1])
    record_property("resumed_from", newest)
    record_property("preempted_after", runs[0].saved_steps[-1])

    # Order at every moment; nothing lost but what went with the node; the same weights as
    # an uninterrupted run.
    verdict = tm.check_order(runs, events, [len(at_recovery)])
    assert not verdict.violations, verdict.violations[:3]
    assert not verdict.lost and not verdict.left, verdict
    went = {tm.step_of(k)[0] for k in verdict.went_with_node}  # type: ignore[index]
    assert went <= {s for s in runs[0].saved_steps if s > newest}, verdict.went_with_node
    record_property("went_with_node", sorted(went))
    record_property("waiting_at_preemption", behind)
    record_property("deletes", [e.key for e in events if e.op == "delete"])
    result = json.loads(bucket.read(tm.RESULT_KEY))
    assert result["sha256"] == uninterrupted_result(result["steps"], tmp_path / "clean")

    # The cache kept its bound: no idle cleaner pass (nothing in use, queued or uploading)
    # ended above it on either node, and the recovered node, which wrote more than the
    # bound, ended its run with an idle pass within it.
    second_node = "\n".join(ln for ln in log.splitlines() if ln.startswith("CLEANER "))
    passes = tm.cleaner_passes(first_node) + tm.cleaner_passes(second_node)
    over = [p for p in passes if p.over(BOUND)]
    assert not over, over
    last = tm.cleaner_passes(second_node)[-1]
    assert last.idle and not last.over(BOUND), last
    assert (len(runs[1].saved) * CKPT_MIB << 20) > BOUND
    record_property("cleaner_passes", len(passes))
