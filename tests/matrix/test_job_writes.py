"""The recipe matrix, jobs that write to a MOUNT_CACHED bucket: the comp test's cached
entries, upload order (the recipe's default transfers, and one transfer) with the store's
corrupt answers on the first writes, corrupt answers on half the writes, and a job's scale
(a 1 GiB checkpoint and many small files while a fault comes and goes).

Each scenario runs on the session's mount recipe (``--recipe``) and records one row
(harness.recipes.matrix); it fails only for a promise that recipe makes. A job's files are
read from the store after the job ended (its end is the recipe's drain); the order is
replayed from the gate's write events, deletes included, at every moment. The scenarios of a
store run side by side (harness.testing.side_by_side); each fault is scoped to its bucket
and ends on an event (its max_hits, the writer finishing, an object stored).
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.accounts import OTHER, USER
from harness.testing import access
from harness.testing.buckets import SKY_MANAGED, list_keys, public_unavailable
from harness.testing.module_marks import slow_per_store
from harness.testing.order_check import DELETE_OPS
from harness.testing.side_by_side import ScenarioKit
from skycore.storage.common import parse_url
from tests.matrix import node_writer
from tests.matrix.kit import (
    CKPT,
    JOB_HANG_S,
    MIB,
    Recorder,
    WriterJob,
    cached_cluster,
    job_under_fault,
    job_verdict,
    keys_of,
    order_verdict,
    scenario_cases,
    wait_hits,
    write_through_fault,
    writer_verdict,
)
from tests.polling import wait_for

pytestmark = slow_per_store("matrix-jobs")

REPO = Path(__file__).resolve().parents[2]
COMP_TEST = REPO / "tests" / "fixtures" / "comp_test.yaml"
KIB = 1 << 10


# --- a. the comp test's MOUNT_CACHED entries -------------------------------------------------


def comp_entries(store: str) -> dict[str, dict[str, Any]]:
    """The comp test's MOUNT_CACHED entries of ``store``, local sources made absolute."""
    spec = yaml.safe_load(COMP_TEST.read_text())
    found = {}
    for dst, entry in spec["file_mounts"].items():
        if dst.startswith(f"/{store}-") and entry.get("mode") == "MOUNT_CACHED":
            entry = dict(entry)
            if "://" not in entry["source"]:
                entry["source"] = str(REPO / entry["source"])
            found[dst] = entry
    return found


def bucket_of(entry: dict[str, Any], run_id: str) -> str:
    """The bucket an entry names, its ${RUN_ID} filled."""
    name = entry.get("name") or parse_url(entry["source"]).bucket
    return str(name).replace("${RUN_ID}", run_id)


def comp_test(store: str, kit: ScenarioKit) -> None:
    """The comp test's cached entries of the store (sky-managed, the user's private and
    public buckets, another account's public one): a job lists each, writes hellotest.txt
    into the writable ones and tries the read-only one; once it ended, all are there."""
    rec = Recorder(kit, "comp")
    reason = public_unavailable(store)
    if reason:
        pytest.skip(reason)
    entries = comp_entries(store)
    assert entries, f"{COMP_TEST} has no MOUNT_CACHED entries of {store}"
    run_id = uuid.uuid4().hex[:10]
    emulator = access.store_access(store)
    made = []
    for kind in ("private", "public"):
        name = f"{store}-external-{kind}-by-user-{run_id}"
        emulator.make_bucket(
            name, owner=USER, public=kind == "public", objects={"existing.txt": b"existing\n"}
        )
        made.append(name)
    theirs = {d: e for d, e in entries.items() if d.endswith("-public-not-by-user")}
    mine = {d: e for d, e in entries.items() if d not in theirs}
    buckets = {d: bucket_of(e, run_id) for d, e in mine.items()}

    def delete_buckets() -> None:
        for name in {*made, *buckets.values()}:
            emulator.delete_bucket(name)

    kit.on_cleanup(delete_buckets)
    files = [(f"{dst}/hellotest.txt", 64) for dst in mine]
    done = f"/tmp/matrix-comp-{run_id}.done"
    tries = [
        f"if date > {d}/hellotest.txt; then echo WRITE-ACCEPTED {d}; "
        f"else echo WRITE-REFUSED {d}; fi"
        for d in theirs
    ]
    run = "\n".join(
        ["set -e", *(f"ls -l {d}" for d in entries), node_writer.command(files, done), *tries]
    )
    cluster = kit.cluster_factory("comp")
    outcome = cluster.launch(
        {"name": "comp-cached", "file_mounts": entries, "run": run}, env={"RUN_ID": run_id}
    )
    log = outcome.run_log()
    written = node_writer.parse(log)
    assert written is not None, outcome.output + log[-3000:]
    rec.writes(written)
    created = [d for d in mine if f"{d}/hellotest.txt" not in written.errors]
    lost = [d for d in created if "hellotest.txt" not in list_keys(store, buckets[d])]
    rec.row.files_lost = len(lost)
    events = [e for b in buckets.values() for e in emulator.events(b)]
    rec.durable(events, ["hellotest.txt"], written.last_close)
    for dst in theirs:
        said = "refused" if f"WRITE-REFUSED {dst}" in log else "accepted"
        rec.note(f"a write to another account's bucket ({dst}) was {said}")
    rec.check(job_verdict(lost, len(created), outcome))
    for entry in theirs.values():
        dataset = bucket_of(entry, run_id)
        assert "hellotest.txt" not in list_keys(store, dataset, owner=OTHER), dataset


# --- b. upload order, with the store's corrupt answers on the first writes ------------------

N_ORDER = 50
CORRUPTED = 2


def order_sizes() -> list[int]:
    """50 sizes from 1 KiB to 16 MiB, mostly small, fixed so every run is the same (a 16 MiB
    file second: small ones after it overtake it at once where the order is not kept)."""
    rng = random.Random(50)
    choices = [KIB, 4 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB]
    sizes = rng.choices(choices, [6, 6, 5, 4, 3, 2, 1], k=N_ORDER)
    sizes[1] = 16 * MIB
    return sizes


def upload_order(store: str, kit: ScenarioKit, transfers: int | None) -> None:
    """A job writes 50 files while the store answers its first two writes with a wrong
    checksum (rclone deletes each and uploads it again). Checked at every moment of the
    gate's write events: no file visible before an older one."""
    rec = Recorder(kit, "order-1" if transfers == 1 else "order-default", transfers)
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = cached_cluster(kit, bucket, transfers, ["order"])
    files = [(f"{CKPT}/order/file-{i:03d}.bin", s) for i, s in enumerate(order_sizes())]
    outcome, written, hits = job_under_fault(
        rec, bucket, cluster, files, "corrupt", max_hits=CORRUPTED
    )
    expected = keys_of(files, written)
    events, lost = rec.measure(bucket, expected, "order/", written.last_close)
    deleted = sum(1 for e in events if e.op in DELETE_OPS and e.key in expected)
    rec.note(f"{hits} write(s) answered corrupt, {deleted} object(s) deleted by the client")
    rec.check(order_verdict(rec), job_verdict(lost, len(expected), outcome))
    assert hits == CORRUPTED, f"the corrupt fault hit {hits} writes, not {CORRUPTED}"


def order_default_transfers(store: str, kit: ScenarioKit) -> None:
    upload_order(store, kit, None)


def order_one_transfer(store: str, kit: ScenarioKit) -> None:
    upload_order(store, kit, 1)


# --- d. corrupt answers on half the writes ---------------------------------------------------

N_CORRUPT, CORRUPT_HITS = 30, 10


def corrupt_answers(store: str, kit: ScenarioKit) -> None:
    """Half the writes are answered with a wrong checksum until ten were (the recipe's
    default transfers): every file arrives, and the order is replayed as above."""
    rec = Recorder(kit, "corrupt")
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = cached_cluster(kit, bucket, None, ["corrupt"])
    files = [(f"{CKPT}/corrupt/c-{i:03d}.bin", MIB) for i in range(N_CORRUPT)]
    outcome, written, hits = job_under_fault(
        rec, bucket, cluster, files, "corrupt", rate=0.5, max_hits=CORRUPT_HITS
    )
    expected = keys_of(files, written)
    _, lost = rec.measure(bucket, expected, "corrupt/", written.last_close)
    rec.note(f"{hits} write(s) answered corrupt")
    rec.check(order_verdict(rec), job_verdict(lost, len(expected), outcome))
    assert hits > 0, "no write was answered corrupt: the scenario did not happen"


# --- g. a job's scale: 1 GiB and many small files, a fault that comes and goes ---------------

BIG, N_SMALL, SMALL = 1 << 30, 200, 4 * KIB
STORMS, STORM_HITS = 3, 5
BIG_WRITE_HANG_S = 600.0  # writing 1 GiB into a node's cache takes seconds


def storms_between_uploads(kit: ScenarioKit, bucket: Any, job: WriterJob) -> int:
    """Up to STORMS 503 storms on the bucket, each on every request until it hit
    STORM_HITS of them, then off until the store holds one more object; none once the job
    ended. How many storms met requests."""
    met = 0
    for _ in range(STORMS):
        if job.finished():
            break
        before = len(bucket.events())
        storm = kit.store_faults.start(
            kit.store, "errors", status=503, bucket=bucket.name, max_hits=STORM_HITS
        )
        hits = wait_hits(kit, storm, STORM_HITS, JOB_HANG_S, until=job.finished)
        kit.store_faults.stop(kit.store, storm)
        met += hits > 0

        def stored_one_more(n: int = before) -> bool:
            return job.finished() or len(bucket.events()) > n

        wait_for("one more object in the store, or the job's end", stored_one_more, JOB_HANG_S)
    return met


def job_scale(store: str, kit: ScenarioKit) -> None:
    """A job writes a 1 GiB checkpoint, then 200 small files, during an outage that ends
    once the writer finished (and it held an upload); then 503 storms come and go while
    the uploads go on. The writer never waited, nothing is lost at the job's end, order."""
    rec = Recorder(kit, "job-scale")
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = cached_cluster(kit, bucket, None, ["scale"])
    files = [(f"{CKPT}/scale/checkpoint-1g.bin", BIG)]
    files += [(f"{CKPT}/scale/small-{i:03d}.bin", SMALL) for i in range(N_SMALL)]
    outage = kit.store_faults.start(store, "outage", bucket=bucket.name)
    job, written, blocked = write_through_fault(
        rec, cluster, outage, files, hang_s=BIG_WRITE_HANG_S
    )
    expected = keys_of(files, written)
    storms = storms_between_uploads(kit, bucket, job)
    outcome = job.outcome()
    rec.note(f"{storms} storm(s) of 503 met requests after the outage")
    events, lost = rec.measure(bucket, expected, "scale/", written.last_close)
    rec.check(
        writer_verdict(written, blocked, "outage"),
        order_verdict(rec),
        job_verdict(lost, len(expected), outcome),
    )
    big = [e for e in events if e.key == keys_of(files)[0] and e.op not in DELETE_OPS]
    assert big and big[-1].size == BIG, f"the 1 GiB checkpoint arrived as {big[-1:]}"


# --- the tests: one per scenario, run side by side with the store's others -------------------


@scenario_cases(
    {
        "comp": comp_test,
        "order-default": order_default_transfers,
        "order-1": order_one_transfer,
        "corrupt": corrupt_answers,
        "job-scale": job_scale,
    }
)
def test_job_writes(case: str, side_by_side: Any, request: pytest.FixtureRequest) -> None:
    """Scenario ``case`` of this store on the session's recipe (its row is recorded)."""
    side_by_side.join(request)
