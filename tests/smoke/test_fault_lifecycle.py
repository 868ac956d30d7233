"""A misbehaving store across a cluster's lifecycle, side by side per store (as in
tests/smoke/test_faults.py, with the helpers of tests/smoke/fault_tools.py): ``skycore
start`` while the store is out, and a job's end-of-run drain through a 1 MiB/s link. Every
fault is scoped to the scenario's own bucket.

- start during an outage: start re-mounts, then waits until every mount answers a listing
  of its bucket, saying at each probe which mount waits for which store; it returns once
  the store is back (or fails past its bounded wait: one paragraph naming the mount, the
  cluster left INIT with the reason), and the files written before the stop are in the
  bucket and read back whole through the mount. The outage ends once start has said twice
  that it waits, not after a fixed time.
- a slow final drain: a job that writes 16 MiB to a MOUNT_CACHED mount as its last act is
  reported SUCCEEDED (by its terminal, and by ``skycore queue --json`` read from the nodes
  when its terminal is gone) only once the bytes are in the bucket. The drain is held (an
  outage of its bucket) until a poll begun after the write said RUNNING, so the watch sees
  the drain however long a poll takes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.testing.background import Background
from harness.testing.buckets import PRIVATE_BY_USER, SKY_MANAGED, TestBucket
from harness.testing.module_marks import slow_per_store
from harness.testing.side_by_side import ScenarioKit, SideBySide, scenario
from skycore import backend, execution, state
from skycore.errors import StageError
from tests.polling import wait_for
from tests.smoke import fault_events
from tests.smoke.fault_tools import (
    MIB,
    Lines,
    cached_cluster,
    console,
    launched,
    make_dir,
    report,
    shell,
)

pytestmark = slow_per_store("lifecycle")

N_FILES = 4
DRAIN_MIB = 16
BANDWIDTH_MIBPS = 1
# queue --json fields (README, "For scripts"): a draining job must not change them.
QUEUE_FIELDS = {
    "cluster", "job_id", "name", "status", "num_nodes", "task_id", "exit_code",
    "submitted_at", "started_at", "ended_at", "log_dir",
}  # fmt: skip
SKYCORE = str(Path(sys.executable).parent / "skycore")

WRITE_FILES = """python3 - <<'PY'
import hashlib, os
for i in range({n}):
    data = os.urandom({size})
    with open(f"{dir}/f{{i}}.bin", "wb") as f:
        f.write(data)
    print("SHA", f"f{{i}}.bin", hashlib.sha256(data).hexdigest())
PY"""

# The job's last act: 16 MiB (reproducible from its seed) into the cached mount, then exit.
FINAL_WRITE = """mkdir -p /ckpt/out
python3 - <<'PY'
import hashlib
data = hashlib.shake_256(b"{seed}").digest({size})
with open("/ckpt/out/{name}", "wb") as f:
    f.write(data)
print("WROTE", hashlib.sha256(data).hexdigest(), flush=True)
PY"""


def sha_lines(out: str) -> dict[str, str]:
    """{file name: sha256} from WRITE_FILES' output."""
    return {w[1]: w[2] for w in (line.split() for line in out.splitlines()) if w[:1] == ["SHA"]}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_start(cluster: Any, out: Lines, **kwargs: Any) -> StageError | None:
    """``skycore start`` through the API the CLI uses, printing into ``out``; the StageError
    it raised, if any."""
    try:
        execution.start(cluster.name, console=console(out), **kwargs)
    except StageError as e:
        return e
    return None


def waiting_lines(out: Lines) -> list[tuple[float, str]]:
    """start's progress lines while it waits for a store."""
    return [(t, line) for t, line in out.snapshot() if "waiting for the store" in line]


def said_waiting(out: Lines, buckets: dict[str, TestBucket], times: int) -> bool:
    """True once start said ``times`` times that it waits, naming each mount and bucket."""
    waits = [line for _, line in waiting_lines(out)]
    return all(
        sum(dst in line and bucket.name in line for line in waits) >= times
        for dst, bucket in buckets.items()
    )


def two_bucket_cluster(store: str, kit: ScenarioKit) -> tuple[Any, dict[str, TestBucket]]:
    """A cluster with two MOUNT_CACHED mounts: /ckpt, a sky-managed bucket's root, and
    /sub, the prefix sub/ of an existing bucket. Mounting a bucket's root asks the store
    nothing (start must probe it); rclone asks whether a prefix is an object, so that mount
    call itself waits for the store (seen on s3, r2 and azure: the batch is held)."""
    root = kit.bucket_factory(store, SKY_MANAGED)
    prefixed = kit.bucket_factory(store, PRIVATE_BY_USER)
    mounts = {
        "/ckpt": root.mount_entry("MOUNT_CACHED"),
        "/sub": {"source": prefixed.url + "/sub", "mode": "MOUNT_CACHED"},
    }
    cluster = launched(kit, mounts, name="lifecycle")
    return cluster, {"/ckpt": root, "/sub": prefixed}


def write_and_stop(cluster: Any, buckets: dict[str, TestBucket]) -> dict[str, dict[str, str]]:
    """Write N_FILES to each mount, stop the cluster (it drains), and check every file is in
    its bucket, whole; {mount point: {key in the bucket: sha256}}."""
    written: dict[str, dict[str, str]] = {}
    for dst in buckets:
        make_dir(cluster, f"{dst}/pre")
        out = shell(cluster, WRITE_FILES.format(n=N_FILES, size=MIB, dir=f"{dst}/pre"))
        key_prefix = "sub/pre" if dst == "/sub" else "pre"
        written[dst] = {f"{key_prefix}/{name}": h for name, h in sha_lines(out).items()}
        assert len(written[dst]) == N_FILES, out
    stopped = cluster.stop()
    assert "drain" in stopped.lower(), stopped
    assert cluster.status() == state.CLUSTER_STOPPED
    for dst, files in written.items():
        for key, digest in files.items():
            assert sha256(buckets[dst].read(key)) == digest, f"{key} after stop"
    return written


def read_back(cluster: Any, written: dict[str, dict[str, str]]) -> None:
    """Every file written before the stop reads back whole through its mount."""
    for dst, files in written.items():
        paths = " ".join(f"{dst}/pre/{key.rsplit('/', 1)[-1]}" for key in files)
        out = shell(cluster, f"sha256sum {paths}", timeout=120)
        got = {line.split()[1].rsplit("/", 1)[-1]: line.split()[0] for line in out.splitlines()}
        want = {key.rsplit("/", 1)[-1]: digest for key, digest in files.items()}
        assert got == want, out


# --- 1. the store is out while start re-mounts ------------------------------------------------


def outage_during_start(store: str, kit: ScenarioKit) -> None:
    """An outage of both buckets begins just before ``skycore start``: start says at each
    probe that it waits for the store (naming mount and bucket); once it said so twice,
    the outage ends, and start returns only after that, once the mounts answer; the files
    written before the stop read back whole through the mounts."""
    cluster, buckets = two_bucket_cluster(store, kit)
    written = write_and_stop(cluster, buckets)
    began = time.time()
    faults = [kit.store_faults.start(store, "outage", bucket=b.name) for b in buckets.values()]
    out = Lines()
    start = Background(lambda: run_start(cluster, out), "start")
    wait_for(
        "start saying twice that it waits for the store",
        lambda: not start.running() or said_waiting(out, buckets, 2),
        backend.STORE_WAIT_S,
    )
    assert start.running(), f"start returned while the store was out:\n{out.text()}"
    held = sum(fault_events.hits(store, f) for f in faults)
    said_before = len(waiting_lines(out))
    for fault in faults:
        kit.store_faults.stop(store, fault)
    released = time.monotonic()
    error = start.result(timeout=backend.STORE_WAIT_S + 120)
    returned = time.monotonic()
    assert error is None, f"{error}\n{out.text()}"
    kit.record_property("start_returned_after_outage_s", round(returned - released, 2))
    progress = [t for t, line in out.snapshot() if line.startswith("  ")]
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(progress)]
    kit.record_property("start_progress_gaps_s", json.dumps(gaps))
    report(kit, "outage during start", buckets["/ckpt"], "pre", [], began, None)
    # It waited for the store: the store held its requests, and start went on waiting,
    # saying why, until the outage ended. It returned as soon as the store was back: in the
    # probe cycle under way (a held listing or mount call ends with the outage), so it said
    # "waiting" at most once more; a start that missed the store's return would wait a whole
    # cycle more, saying so. Past STORE_WAIT_S it would have failed (a hang guard).
    assert held > 0, "the store held none of start's requests"
    assert len(waiting_lines(out)) - said_before <= 1, out.text()
    assert returned - released < backend.STORE_WAIT_S, (returned - released, out.text())
    assert "the store answers" in out.text(), out.text()
    record = state.get_cluster(cluster.name)
    assert record is not None and record.status == state.CLUSTER_UP, record
    read_back(cluster, written)


def wait_node_idle(cluster: Any, timeout: float = 180) -> None:
    """Wait until no mount program runs on the head node (a mount batch start gave up on)."""
    deadline = time.monotonic() + timeout
    while True:
        code, out = cluster.shell("pgrep -af 'mounts[.]py up-many' || true", timeout=60)
        if code == 0 and "up-many" not in out:
            return
        assert time.monotonic() < deadline, f"the mount program still runs:\n{out}"
        time.sleep(0.5)


# --- 2. the outage outlasts start's wait ------------------------------------------------------


START_WAIT_S = 15.0  # start's bounded wait in this scenario (the default is STORE_WAIT_S)


def outage_outlasts_start(store: str, kit: ScenarioKit) -> None:
    """The store stays out: start gives up after its bounded wait with one paragraph naming
    the mount and its bucket (no traceback: a StageError, which the CLI prints as such), the
    cluster stays INIT with that reason; once the store is back, start again restores the
    mounts and the files read back whole."""
    cluster, buckets = two_bucket_cluster(store, kit)
    written = write_and_stop(cluster, buckets)
    faults = [kit.store_faults.start(store, "outage", bucket=b.name) for b in buckets.values()]
    out = Lines()
    began = time.monotonic()
    error = run_start(cluster, out, store_wait_s=START_WAIT_S)
    took = time.monotonic() - began
    lasted = [fault_events.lasts(store, f) for f in faults]
    held = sum(fault_events.hits(store, f) for f in faults)
    for fault in faults:
        kit.store_faults.stop(store, fault)
    kit.record_property("start_gave_up_after_s", round(took, 2))
    assert isinstance(error, StageError), out.text()
    message = error.message
    assert "\n" not in message, message
    assert "did not answer" in message and f"skycore start {cluster.name}" in message, message
    for dst, bucket in buckets.items():
        assert dst in message and bucket.name in message, message
    # It gave up while the store was still out, having asked it (the store held its
    # requests), and said meanwhile that it waited. Not before its bounded wait was over
    # (start's own deadline, monotonic: a lower bound); and it gave up rather than hang (a
    # hang guard: resuming the node, the wait, the probe under way; 15.9-17.2 s measured).
    assert all(lasted), "the outage ended before start gave up"
    assert held > 0, "the store held none of start's requests"
    assert waiting_lines(out), out.text()
    assert START_WAIT_S <= took < 10 * START_WAIT_S, (took, out.text())
    record = state.get_cluster(cluster.name)
    assert record is not None and record.status == state.CLUSTER_INIT, record
    assert record.status_reason.startswith("re-mount failed: ") and "/ckpt" in (
        record.status_reason
    ), record.status_reason
    # The store is back. The mount call start gave up on still ends on the node (rclone
    # finishes it once the store answers); start again once it did, and the cluster is whole.
    wait_node_idle(cluster)
    again = Lines()
    error = run_start(cluster, again)
    assert error is None, f"{error}\n{again.text()}"
    assert cluster.status() == state.CLUSTER_UP
    read_back(cluster, written)


# --- 3. a job's final drain through a 1 MiB/s link -------------------------------------------


@dataclass
class Poll:
    """One ``skycore queue --json`` as seen from outside: what it said, and whether the
    gate had recorded the job's upload complete once it had returned."""

    job: dict[str, Any] | None
    durable_after: bool
    at: float  # when it began (monotonic), for the report only


@dataclass
class QueueWatch:
    """``skycore queue CLUSTER --json`` run over and over (a real CLI process each time)
    until job ``job_id`` ends; the first poll that shows it SUCCEEDED gets the bucket's
    object read right away."""

    cluster: str
    bucket: TestBucket
    key: str
    job_id: int
    polls: list[Poll] = field(default_factory=list)
    at_success: bytes | None = None
    held: tuple[int, int] = (0, 0)  # polls[a:b] were made while the drain was held

    def poll(self) -> Poll:
        began = time.monotonic()
        proc = subprocess.run(
            [SKYCORE, "queue", self.cluster, "--json"], capture_output=True, text=True, timeout=120
        )
        durable = any(e.key == self.key and e.op != "delete" for e in self.bucket.events())
        assert proc.returncode == 0, proc.stdout + proc.stderr
        jobs = json.loads(proc.stdout)
        for job in jobs:
            assert set(job) == QUEUE_FIELDS, job
        job = next((j for j in jobs if j["job_id"] == self.job_id), None)
        if job is not None and job["status"] == "SUCCEEDED" and self.at_success is None:
            self.at_success = self.bucket.read(self.key)
        result = Poll(job, durable, began)
        self.polls.append(result)
        return result

    def run(self) -> None:
        """Poll until the job ends."""
        while True:
            job = self.poll().job
            assert job is not None, f"job {self.job_id} is not in the queue"
            if job["status"] in state.JOB_TERMINAL:
                return


def wait_for_new_job(cluster: str, after: int, going: Callable[[], bool]) -> int:
    """The id of the cluster's first job above ``after`` once it is recorded."""
    deadline = time.monotonic() + 300
    while True:
        ids = [j.job_id for j in state.list_jobs(cluster) if j.job_id > after]
        if ids:
            return min(ids)
        assert going() and time.monotonic() < deadline, "the job was never recorded"
        time.sleep(0.1)


def wait_for_write(cluster: Any, job_id: int) -> None:
    """Return once the job's run printed its WROTE line (its write is done) on the node."""
    log = f"{backend.JOBS_DIR}/{job_id}/run-0.log"
    shell(cluster, f"until grep -qs '^WROTE' {log}; do sleep 0.1; done", timeout=300)


def final_write_spec(seed: str, name: str, go: str) -> dict[str, Any]:
    """The job: wait for file ``go`` on the node, then FINAL_WRITE and exit."""
    run = f"until [ -e {go} ]; do sleep 0.1; done\n"
    return {
        "name": "drain",
        "run": run + FINAL_WRITE.format(seed=seed, size=DRAIN_MIB * MIB, name=name),
    }


def watch_held_drain(
    kit: ScenarioKit, store: str, cluster: Any, bucket: TestBucket, job_id: int, go: str, key: str
) -> QueueWatch:
    """Let the job write (file ``go``) while its bucket is in an outage, so that its drain
    cannot end; once the write is done and a poll of ``queue --json`` begun after it said
    RUNNING, end the outage (the 16 MiB then flow at 1 MiB/s) and poll until the job ends.
    Holding the drain makes the watch certain to see it: a poll costs 2.2 s idle and took
    more than the whole 16 s drain at a load of 20."""
    outage = kit.store_faults.start(store, "outage", bucket=bucket.name)
    watch = QueueWatch(cluster.name, bucket, key, job_id)
    try:
        shell(cluster, f"touch {go}")
        wait_for_write(cluster, job_id)
        first = len(watch.polls)
        running = watch.poll()  # begun after the write: none may say it ended
        assert running.job and running.job["status"] == "RUNNING", watch.polls
        watch.held = (first, len(watch.polls))
    finally:
        kit.store_faults.stop(store, outage)
    kit.record_property("drain_held_requests", fault_events.hits(store, outage))
    watch.run()
    return watch


def check_drain_reporting(
    kit: ScenarioKit,
    store: str,
    bucket: TestBucket,
    watch: QueueWatch,
    link: dict[str, Any],
    digest: str,
    began: float,
    label: str,
) -> None:
    """What both drain scenarios check: SUCCEEDED came only after the upload completed
    (through ``link``, the bucket's bandwidth fault)."""
    key = watch.key
    events = [e for e in bucket.events() if e.key == key and e.op != "delete"]
    assert events, f"{key} never reached the store"
    report(kit, label, bucket, "out", [key], began, events[-1].t_ns / 1e9)
    zero = watch.polls[0].at
    statuses = [
        (round(p.at - zero, 1), p.job and p.job["status"], p.durable_after) for p in watch.polls
    ]
    kit.record_property("queue_polls", json.dumps(statuses))
    final = watch.polls[-1].job
    assert final is not None and final["status"] == "SUCCEEDED", statuses
    # No poll said SUCCEEDED before the bytes were in the bucket: the gate had recorded
    # the upload complete when each such poll returned...
    early = [p for p in watch.polls if p.job and p.job["status"] == "SUCCEEDED"]
    assert all(p.durable_after for p in early), statuses
    # ...and the bucket held all of them when the queue first said SUCCEEDED.
    assert watch.at_success is not None and sha256(watch.at_success) == digest
    # The drain was watched: a poll begun after the write, while the outage held the drain,
    # said RUNNING (watch_held_drain).
    held = watch.polls[slice(*watch.held)]
    assert any(p.job and p.job["status"] == "RUNNING" for p in held), statuses
    # It went through the 1 MiB/s link: that fault, scoped to the bucket, lasted until the
    # job had ended.
    assert fault_events.lasts(store, link), "the bandwidth fault ended before the job"


def expected_digest(seed: str) -> str:
    return sha256(hashlib.shake_256(seed.encode()).digest(DRAIN_MIB * MIB))


def wrote_line(log: str) -> str:
    """The sha256 the job wrote, from its run log."""
    for line in log.splitlines():
        words = line.split()
        if words[:1] == ["WROTE"]:
            return words[1]
    raise AssertionError(f"no WROTE line in the run log:\n{log}")


def slow_final_drain(store: str, kit: ScenarioKit) -> None:
    """The terminal follows the job (``skycore exec``) while its final drain uploads 16 MiB
    at 1 MiB/s: SUCCEEDED (the terminal's, and ``queue --json``'s meanwhile) only after every
    byte is in the bucket."""
    bucket, cluster = cached_cluster(store, kit, "out")
    seed, name = f"followed-{bucket.name}", "big.bin"
    go = f"/tmp/skycore-go-{seed}"
    began = time.time()
    link = kit.store_faults.start(store, "bandwidth", mibps=BANDWIDTH_MIBPS, bucket=bucket.name)
    newest = max((j.job_id for j in state.list_jobs(cluster.name)), default=0)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["job"] = cluster.exec(final_write_spec(seed, name, go))
        except BaseException as e:
            outcome["error"] = e

    job = threading.Thread(target=run, name="exec")
    job.start()
    try:
        job_id = wait_for_new_job(cluster.name, newest, job.is_alive)
        watch = watch_held_drain(kit, store, cluster, bucket, job_id, go, f"out/{name}")
    finally:
        job.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["job"]
    assert result.exit_code == 0 and result.job_status == "SUCCEEDED", result.output
    digest = wrote_line(result.run_log())
    assert digest == expected_digest(seed)
    assert watch.polls[-1].job is not None and watch.polls[-1].job["job_id"] == result.result.job_id
    check_drain_reporting(kit, store, bucket, watch, link, digest, began, "1 MiB/s final drain")


def slow_final_drain_detached(store: str, kit: ScenarioKit) -> None:
    """The same with ``skycore exec -d``: the job writes its 16 MiB only once that terminal
    has exited, so ``queue --json`` reads it from the nodes' job table all through the drain
    (the nodes record the exit code only after their drain): it says SUCCEEDED only once
    every byte is in the bucket."""
    bucket, cluster = cached_cluster(store, kit, "out")
    seed, name = f"detached-{bucket.name}", "big.bin"
    go = f"/tmp/skycore-go-{seed}"
    began = time.time()
    link = kit.store_faults.start(store, "bandwidth", mibps=BANDWIDTH_MIBPS, bucket=bucket.name)
    run = final_write_spec(seed, name, go)["run"]
    proc = subprocess.run(
        [SKYCORE, "exec", "-d", cluster.name, run], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = max(j.job_id for j in state.list_jobs(cluster.name))
    # Its terminal is gone: now the job writes, then drains.
    watch = watch_held_drain(kit, store, cluster, bucket, job_id, go, f"out/{name}")
    digest = wrote_line(shell(cluster, f"cat {backend.JOBS_DIR}/{job_id}/run-0.log"))
    assert digest == expected_digest(seed)
    label = "1 MiB/s final drain (detached)"
    check_drain_reporting(kit, store, bucket, watch, link, digest, began, label)


# --- the tests: each joins its scenario, run side by side with the store's others ----------


@scenario(outage_during_start)
def test_start_waits_for_a_store_in_an_outage(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """An outage during start: start waits, says why, returns when the store is back."""
    side_by_side.join(request)


@scenario(outage_outlasts_start)
def test_start_gives_up_on_a_store_that_stays_out(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """An outage longer than start's wait: one-paragraph error, cluster INIT; start again."""
    side_by_side.join(request)


@scenario(slow_final_drain)
def test_job_succeeds_only_after_its_final_drain(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """16 MiB drained at 1 MiB/s after the run: SUCCEEDED only once every byte is durable."""
    side_by_side.join(request)


@scenario(slow_final_drain_detached)
def test_detached_job_succeeds_only_after_its_final_drain(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """The same with the terminal gone (exec -d): the queue reads it from the nodes."""
    side_by_side.join(request)
