"""A managed spot job under a misbehaving store: its node is preempted while the job's
bucket is in an outage (made through the store's gate, scoped to that bucket), and the
job recovers from the newest checkpoint the store had complete. Side by side per store
and in the same xdist group as tests/smoke/test_faults.py, whose helpers it shares
(tests/smoke/fault_tools.py).
"""

from __future__ import annotations

import json
import time

import pytest

from harness.cloud import preemption
from harness.emulators import fleet as emulators
from harness.testing.buckets import PRIVATE_BY_USER, TestBucket
from harness.testing.managed_jobs import (
    ManagedJobs,
    check_detection,
    checkpoint_matches,
    complete_checkpoints,
)
from harness.testing.module_marks import slow_per_store
from harness.testing.side_by_side import ScenarioKit, SideBySide, scenario
from skycore.state.managed_jobs import JobStatus
from tests.polling import wait_for
from tests.smoke import fault_events
from tests.smoke.fault_tools import HELD_S, report

pytestmark = slow_per_store("faults")


def spot_preempted_during_outage(store: str, kit: ScenarioKit) -> None:
    """A managed spot job's node is preempted while its store hangs: the controller
    relaunches into the outage, which ends once the store holds a request of the relaunch
    (one after the node was gone); the job resumes only then, from the newest checkpoint
    that was complete in the store (read from the gate's write events: nothing can
    complete during the outage)."""
    managed = ManagedJobs(kit.tmp_path, own_jobs_only=True)  # the home is shared
    kit.on_cleanup(managed.cleanup)
    bucket: TestBucket = kit.bucket_factory(store, PRIVATE_BY_USER)
    job = managed.launch(managed.spec(bucket))
    managed.wait_log(job, r"^saved checkpoint 10 ")
    wait_for("a checkpoint in the bucket", lambda: complete_checkpoints(bucket.list_keys()), 60)
    started = time.time()
    fault = kit.store_faults.start(store, "outage", bucket=bucket.name)
    hit = preemption.preempt(job.cluster, 0)
    held_before = fault_events.hits(store, fault)  # the node is gone: none of these is its
    check_detection(managed, job, expected_recoveries=1)
    fault_events.wait_hits(store, fault, held_before + 1, HELD_S)
    resumed_in_outage = managed.resumes(job)[1:]
    kit.store_faults.stop(store, fault)
    # What was durable when the outage ended, before the relaunched run could choose its
    # step: the gate holds every request that arrives during the outage, but one it had
    # already let through may complete during it, even after the node's removal (seen once
    # on azure under load: a checkpoint accepted just before the outage, completed after).
    # Both times are the gate's, in its own logs.
    ended = [e for e in emulators.get(store).fault_log(bucket.name) if e["id"] == fault["id"]]
    outage_end_ns = max(e["t_ns"] for e in ended)
    events = [e for e in bucket.events() if e.op != "delete"]
    durable = [e.key for e in events if e.t_ns < outage_end_ns]
    late = [e.key for e in events if hit.at * 1e9 < e.t_ns < outage_end_ns]
    kit.record_property("completed_after_removal", json.dumps(late))
    steps = [s for s in complete_checkpoints(sorted(set(durable))) if checkpoint_matches(bucket, s)]
    done = managed.wait_done(job, timeout=240)
    resumes = managed.resumes(job)
    report(kit, "spot preempted during an outage", bucket, "ckpt", [], started, time.time())
    assert done.status is JobStatus.SUCCEEDED, managed.log(job)[-4000:]
    assert len(resumes) == 2, resumes
    assert resumed_in_outage == [], "it resumed before the outage ended"
    step, _ = resumes[1]
    assert steps and step == steps[-1], f"resumed from {step}, complete before: {steps}"


@scenario(spot_preempted_during_outage)
def test_spot_job_preempted_during_an_outage_recovers(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """A spot job preempted during an outage recovers from the newest checkpoint."""
    side_by_side.join(request)
