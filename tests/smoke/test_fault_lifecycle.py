"""A misbehaving store across a cluster's lifecycle, side by side per store (as in
tests/smoke/test_faults.py, whose helpers these scenarios share): ``skycore start`` while the
store is out, and a job's end-of-run drain through a 1 MiB/s link. Every fault is scoped to
the scenario's own bucket.

- start during an outage: start re-mounts, then waits until every mount answers a listing
  of its bucket, saying every few seconds which mount waits for which store; it returns
  once the store is back (or fails past its bounded wait: one paragraph naming the mount,
  the cluster left INIT with the reason), and the files written before the stop are in the
  bucket and read back whole through the mount.
- a slow final drain: a job that writes 16 MiB to a MOUNT_CACHED mount as its last act is
  reported SUCCEEDED (by its terminal, and by ``skycore queue --json`` read from the nodes
  when its terminal is gone) only once the bytes are in the bucket. The drain is held (an
  outage of its bucket) until a poll begun after the write said RUNNING, so the watch sees
  the drain however long a poll takes.
"""

from __future__ import annotations

import hashlib
import io
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
from rich.console import Console

from harness.testing.buckets import PRIVATE_BY_USER, SKY_MANAGED, TestBucket
from harness.testing.plugin import all_store_params
from harness.testing.side_by_side import ScenarioKit
from skycore import backend, execution, state
from skycore.errors import StageError
from tests.smoke.test_faults import MIB, joining_test, launched, make_dir, report, shell

pytestmark = [
    pytest.mark.requires_capability("records_events"),
    pytest.mark.slow,
    pytest.mark.parametrize("store", all_store_params(group="lifecycle"), scope="module"),
]

OUTAGE_S = 30
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
import hashlib, time
data = hashlib.shake_256(b"{seed}").digest({size})
with open("/ckpt/out/{name}", "wb") as f:
    f.write(data)
print("WROTE", time.time(), hashlib.sha256(data).hexdigest(), flush=True)
PY"""


class Lines(io.StringIO):
    """A console's output, line by line, each with the wall time it was printed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, s: str) -> int:
        now = time.time()
        self.lines.extend((now, line) for line in s.splitlines() if line.strip())
        return len(s)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def sha_lines(out: str) -> dict[str, str]:
    """{file name: sha256} from WRITE_FILES' output."""
    return {w[1]: w[2] for w in (line.split() for line in out.splitlines()) if w[:1] == ["SHA"]}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def timed_start(cluster: Any, **kwargs: Any) -> tuple[Lines, float, BaseException | None]:
    """``skycore start`` through the API the CLI uses: (its output with times, when it
    returned, what it raised)."""
    out = Lines()
    console = Console(file=out, width=400, force_terminal=False)
    error: BaseException | None = None
    try:
        execution.start(cluster.name, console=console, **kwargs)
    except StageError as e:
        error = e
    return out, time.time(), error


def waiting_lines(out: Lines) -> list[tuple[float, str]]:
    """start's progress lines while it waits for a store."""
    return [(t, line) for t, line in out.lines if "waiting for the store" in line]


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
    """A 30 s outage of both buckets begins just before ``skycore start``: start says every
    few seconds that it waits for the store (naming mount and bucket), returns only once the
    outage is over and the mounts answer, and the files written before the stop read back
    whole through the mounts."""
    cluster, buckets = two_bucket_cluster(store, kit)
    written = write_and_stop(cluster, buckets)
    began = time.time()
    faults = [
        kit.store_faults.start(store, "outage", seconds=OUTAGE_S, bucket=b.name)
        for b in buckets.values()
    ]
    ends = max(f["ends_at_ns"] for f in faults) / 1e9
    out, returned, error = timed_start(cluster)
    assert error is None, f"{error}\n{out.text()}"
    waits = waiting_lines(out)
    kit.record_property("start_returned_after_outage_s", round(returned - ends, 2))
    progress = [t for t, line in out.lines if line.startswith("  ")]
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(progress)]
    kit.record_property("start_progress_gaps_s", json.dumps(gaps))
    report(kit, "outage 30 s during start", buckets["/ckpt"], "pre", [], began, None)
    # It waited for the store, and returned as soon as the store was back: in the probe
    # cycle under way when the outage ended (a held listing or mount call ends with the
    # outage), so it said "waiting" at most once more. Not a time bound: that cycle's docker
    # execs took 0.45-2.4 s idle and 9.3 s at a load of 20 (a CI run beside other suites);
    # a start that missed the store's return would wait a whole cycle more, saying so.
    assert returned >= ends, f"start returned {ends - returned:.1f} s before the outage ended"
    after = [line for t, line in waits if t > ends]
    assert len(after) <= 1, (round(returned - ends, 2), out.text())
    assert returned - ends < backend.STORE_WAIT_S, (returned - ends, out.text())
    # It said why, naming the mount and its bucket, every STORE_PROBE_S (one probe, plus
    # a docker exec) while it waited: no silence longer than 10 s (measured gaps 3.8-5.9 s).
    assert waits, out.text()
    for dst, bucket in buckets.items():
        assert any(dst in line and bucket.name in line for _, line in waits), out.text()
    assert max(gaps) <= 10, (gaps, out.text())
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
    began = time.time()
    faults = [kit.store_faults.start(store, "outage", bucket=b.name) for b in buckets.values()]
    out, returned, error = timed_start(cluster, store_wait_s=START_WAIT_S)
    for fault in faults:
        kit.store_faults.stop(store, fault)
    kit.record_property("start_gave_up_after_s", round(returned - began, 2))
    assert isinstance(error, StageError), out.text()
    message = error.message
    assert "\n" not in message, message
    assert "did not answer" in message and f"skycore start {cluster.name}" in message, message
    for dst, bucket in buckets.items():
        assert dst in message and bucket.name in message, message
    # Bounded: resuming the node (~1 s), the wait, then at most the probe under way when it
    # ran out (STORE_PROBE_S; here the mount batch is held by /sub, so it gives up at once),
    # and 5 s for docker execs on a loaded machine. Measured: 15.9-17.2 s.
    took = returned - began
    assert START_WAIT_S <= took <= START_WAIT_S + backend.STORE_PROBE_S + 5, (took, out.text())
    assert waiting_lines(out), out.text()
    record = state.get_cluster(cluster.name)
    assert record is not None and record.status == state.CLUSTER_INIT, record
    assert record.status_reason.startswith("re-mount failed: ") and "/ckpt" in (
        record.status_reason
    ), record.status_reason
    # The store is back. The mount call start gave up on still ends on the node (rclone
    # finishes it once the store answers); start again once it did, and the cluster is whole.
    wait_node_idle(cluster)
    out, _, error = timed_start(cluster)
    assert error is None, f"{error}\n{out.text()}"
    assert cluster.status() == state.CLUSTER_UP
    read_back(cluster, written)


# --- 3. a job's final drain through a 1 MiB/s link -------------------------------------------


@dataclass
class Poll:
    """One ``skycore queue --json`` as seen from outside: when it ran, what it said."""

    began: float
    ended: float
    job: dict[str, Any] | None


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

    def poll(self) -> Poll:
        began = time.time()
        proc = subprocess.run(
            [SKYCORE, "queue", self.cluster, "--json"], capture_output=True, text=True, timeout=120
        )
        ended = time.time()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        jobs = json.loads(proc.stdout)
        for job in jobs:
            assert set(job) == QUEUE_FIELDS, job
        job = next((j for j in jobs if j["job_id"] == self.job_id), None)
        if job is not None and job["status"] == "SUCCEEDED" and self.at_success is None:
            self.at_success = self.bucket.read(self.key)
        result = Poll(began, ended, job)
        self.polls.append(result)
        return result

    def until_running_after(self, t: float) -> None:
        """Poll until a poll that began at ``t`` or later says RUNNING (none may say it
        ended: the caller holds the job's drain meanwhile)."""
        while True:
            result = self.poll()
            status = result.job and result.job["status"]
            assert status == "RUNNING", [(p.began, p.job) for p in self.polls]
            if result.began >= t:
                return

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
) -> tuple[QueueWatch, float]:
    """Let the job write (file ``go``) while its bucket is in an outage, so that its drain
    cannot end; poll ``queue --json`` until a poll begun after the write said RUNNING, then
    end the outage (the 16 MiB then flow at 1 MiB/s) and poll until the job ends: (the
    watch, when the outage ended). Holding the drain makes the watch certain to see it:
    a poll costs 2.2 s idle and took more than the whole 16 s drain at a load of 20."""
    outage = kit.store_faults.start(store, "outage", bucket=bucket.name)
    try:
        shell(cluster, f"touch {go}")
        wait_for_write(cluster, job_id)
        log = shell(cluster, f"cat {backend.JOBS_DIR}/{job_id}/run-0.log")
        wrote_at, _ = wrote_line(log)
        watch = QueueWatch(cluster.name, bucket, key, job_id)
        watch.until_running_after(wrote_at)
    finally:
        kit.store_faults.stop(store, outage)
    released = time.time()
    watch.run()
    return watch, released


def check_drain_reporting(
    kit: ScenarioKit,
    store: str,
    bucket: TestBucket,
    watch: QueueWatch,
    wrote_at: float,
    released: float,
    digest: str,
    began: float,
    label: str,
) -> None:
    """What both drain scenarios check: SUCCEEDED came only after the upload completed."""
    key = watch.key
    events = [e for e in bucket.events() if e.key == key and e.op != "delete"]
    assert events, f"{key} never reached the store"
    durable = events[-1].t_ns / 1e9
    report(kit, label, bucket, "out", [key], began, durable)
    statuses = [(round(p.began - began, 1), p.job and p.job["status"]) for p in watch.polls]
    kit.record_property("queue_polls", json.dumps(statuses))
    final = watch.polls[-1].job
    assert final is not None and final["status"] == "SUCCEEDED", statuses
    # The job's end was recorded after its bytes were in the bucket...
    assert final["ended_at"] >= durable, (final["ended_at"] - durable, statuses)
    # ...no poll ever showed it SUCCEEDED before they were...
    early = [
        p for p in watch.polls if p.job and p.job["status"] == "SUCCEEDED" and p.ended < durable
    ]
    assert not early, statuses
    # ...and the bucket held all of them when the queue first said SUCCEEDED.
    assert watch.at_success is not None and sha256(watch.at_success) == digest
    # The drain was watched: a poll that began after the write and ended while the drain
    # was held said RUNNING (watch_held_drain).
    during = [p for p in watch.polls if wrote_at <= p.began and p.ended <= released]
    assert any(p.job and p.job["status"] == "RUNNING" for p in during), statuses
    # It really went through the 1 MiB/s link once released (16 s; 10% for the clocks).
    assert durable - released >= DRAIN_MIB / BANDWIDTH_MIBPS * 0.9, durable - released


def expected_digest(seed: str) -> str:
    return sha256(hashlib.shake_256(seed.encode()).digest(DRAIN_MIB * MIB))


def wrote_line(log: str) -> tuple[float, str]:
    """(when the job finished writing, sha256 it wrote) from its run log."""
    for line in log.splitlines():
        words = line.split()
        if words[:1] == ["WROTE"]:
            return float(words[1]), words[2]
    raise AssertionError(f"no WROTE line in the run log:\n{log}")


def slow_final_drain(store: str, kit: ScenarioKit) -> None:
    """The terminal follows the job (``skycore exec``) while its final drain uploads 16 MiB
    at 1 MiB/s: SUCCEEDED (the terminal's, and ``queue --json``'s meanwhile) only after every
    byte is in the bucket."""
    from tests.smoke.test_faults import cached_cluster

    bucket, cluster = cached_cluster(store, kit, "out")
    seed, name = f"followed-{bucket.name}", "big.bin"
    go = f"/tmp/skycore-go-{seed}"
    began = time.time()
    kit.store_faults.start(store, "bandwidth", mibps=BANDWIDTH_MIBPS, bucket=bucket.name)
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
        watch, released = watch_held_drain(kit, store, cluster, bucket, job_id, go, f"out/{name}")
    finally:
        job.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["job"]
    assert result.exit_code == 0 and result.job_status == "SUCCEEDED", result.output
    wrote_at, digest = wrote_line(result.run_log())
    assert digest == expected_digest(seed)
    assert watch.polls[-1].job is not None and watch.polls[-1].job["job_id"] == result.result.job_id
    check_drain_reporting(
        kit, store, bucket, watch, wrote_at, released, digest, began, "1 MiB/s final drain"
    )


def slow_final_drain_detached(store: str, kit: ScenarioKit) -> None:
    """The same with ``skycore exec -d``: the job writes its 16 MiB only once that terminal
    has exited, so ``queue --json`` reads it from the nodes' job table all through the drain
    (the nodes record the exit code only after their drain): it says SUCCEEDED only once
    every byte is in the bucket."""
    from tests.smoke.test_faults import cached_cluster

    bucket, cluster = cached_cluster(store, kit, "out")
    seed, name = f"detached-{bucket.name}", "big.bin"
    go = f"/tmp/skycore-go-{seed}"
    began = time.time()
    kit.store_faults.start(store, "bandwidth", mibps=BANDWIDTH_MIBPS, bucket=bucket.name)
    run = final_write_spec(seed, name, go)["run"]
    proc = subprocess.run(
        [SKYCORE, "exec", "-d", cluster.name, run], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = max(j.job_id for j in state.list_jobs(cluster.name))
    # Its terminal is gone: now the job writes, then drains.
    watch, released = watch_held_drain(kit, store, cluster, bucket, job_id, go, f"out/{name}")
    log = shell(cluster, f"cat {backend.JOBS_DIR}/{job_id}/run-0.log")
    wrote_at, digest = wrote_line(log)
    assert digest == expected_digest(seed)
    check_drain_reporting(
        kit,
        store,
        bucket,
        watch,
        wrote_at,
        released,
        digest,
        began,
        "1 MiB/s final drain (detached)",
    )


# --- the tests: each joins its scenario, run side by side with the store's others ----------


# (scenario, test name, what the test claims): one test each, made as in test_faults.py.
SCENARIOS = [
    (
        outage_during_start,
        "test_start_waits_for_a_store_in_an_outage",
        "A 30 s outage during start: start waits, says why, returns when the store is back.",
    ),
    (
        outage_outlasts_start,
        "test_start_gives_up_on_a_store_that_stays_out",
        "An outage longer than start's wait: one-paragraph error, cluster INIT; start again.",
    ),
    (
        slow_final_drain,
        "test_job_succeeds_only_after_its_final_drain",
        "16 MiB drained at 1 MiB/s after the run: SUCCEEDED only once every byte is durable.",
    ),
    (
        slow_final_drain_detached,
        "test_detached_job_succeeds_only_after_its_final_drain",
        "The same with the terminal gone (exec -d): the queue reads it from the nodes.",
    ),
]

for _fn, _name, _doc in SCENARIOS:
    globals()[_name] = joining_test(_fn, _name, _doc)
