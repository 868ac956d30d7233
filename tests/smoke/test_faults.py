"""A misbehaving store, made so on demand through its gate (``store_faults``): what skycore's
MOUNT_CACHED mounts do when the store hangs, fails, slows down, resets connections or
refuses the credentials while a node writes (a managed job under a fault:
test_faults_managed_jobs.py; start and a job's final drain: test_fault_lifecycle.py). Every
fault is scoped to the scenario's own bucket, so a store's scenarios run side by side
(harness.side_by_side: they start together, in one worker, and mostly wait for their
faults at the same time) while other tests share the store.

A fault lasts until the scenario has seen what it tests (the store held or refused an
upload, a command waited for it), never for a fixed time (tests/smoke/fault_events.py reads
that from the gate). The verdicts are causes, not clocks: what the gate had recorded when a
command returned, the order of the gate's write events. How fast the writer is under these
faults is a benchmark (bench/writer_under_faults.py). Each scenario records what it measured
(files lost, order kept, time to durable, the faults' spans and the uploads) for the matrix
report's "faults" section (tests/smoke/fault_tools.py). Last, the gate is the only door to
the store, from a node too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from typing import Any

import pytest

from harness.cloud.stalls import stall_processes
from harness.emulators import fleet as emulators
from harness.testing.background import Background
from harness.testing.buckets import SKY_MANAGED, TestBucket
from harness.testing.module_marks import slow_per_store
from harness.testing.side_by_side import ScenarioKit, SideBySide, scenario
from skycore import execution
from tests.polling import wait_for
from tests.smoke import fault_events
from tests.smoke.fault_tools import (
    HELD_S,
    MIB,
    N_FILES,
    WRITER,
    Lines,
    cached_cluster,
    check_order,
    console,
    keys,
    launched,
    make_dir,
    report,
    shell,
    timed_writes,
    uploads,
    wait_durable,
    write_files,
)

pytestmark = slow_per_store("faults")


# --- 1. an outage during write-back, then stop ---------------------------------------------

# The drain's progress line (skycore/node/mountd drain), printed by stop.
DRAINING = re.compile(r"draining (\S+): (\d+) queued, (\d+) uploading")


def uploading(out: Lines, dst: str) -> bool:
    """True once a drain's progress in ``out`` said an upload of ``dst`` was under way."""
    for _, line in out.snapshot():
        m = DRAINING.search(line)
        if m and m.group(1) == dst and int(m.group(3)) > 0:
            return True
    return False


def outage_then_stop(store: str, kit: ScenarioKit) -> None:
    """The store hangs while cached files wait to upload; ``skycore stop`` waits for them
    (it says it drains). The outage ends only once stop drains an upload that the store
    holds, and stop returns after that: nothing got through the outage, nothing is lost,
    the order is kept."""
    prefix, expected = "outage", keys("outage")
    bucket, cluster = cached_cluster(store, kit, prefix)
    started = time.time()
    fault = kit.store_faults.start(store, "outage", bucket=bucket.name)
    write_files(cluster, prefix, mkdir=True)
    assert not uploads(bucket, prefix)  # nothing got through the outage
    out = Lines()
    stop = Background(lambda: execution.stop(cluster.name, console=console(out)), "stop")
    wait_for(
        "stop draining an upload that the store holds",
        lambda: (
            not stop.running() or (uploading(out, "/ckpt") and fault_events.hits(store, fault) > 0)
        ),
        HELD_S,
    )
    assert stop.running(), f"stop returned while the store was out:\n{out.text()}"
    assert not uploads(bucket, prefix), "an upload got through the outage"
    kit.store_faults.stop(store, fault)
    stop.result(timeout=600)
    output = out.text()
    assert "drain" in output.lower(), output
    durable = wait_durable(bucket, expected, 5)  # stop returned: all of it is already there
    label = "outage until stop drains, then stop"
    lost, _ = report(kit, label, bucket, prefix, expected, started, durable)
    assert lost == []
    check_order(bucket, prefix, expected)


# --- 2. a 503 storm during write-back --------------------------------------------------------


def error_storm(store: str, kit: ScenarioKit) -> None:
    """Half of all requests get 503 (in the API's own format) during write-back, until every
    file is in the store: rclone retries each upload in place, so nothing is lost and the
    order is kept."""
    prefix, expected = "storm", keys("storm")
    bucket, cluster = cached_cluster(store, kit, prefix)
    started = time.time()
    fault = kit.store_faults.start(store, "errors", status=503, rate=0.5, bucket=bucket.name)
    write_files(cluster, prefix, mkdir=True)
    durable = wait_durable(bucket, expected, 180)
    hits = fault_events.hits(store, fault)
    kit.store_faults.stop(store, fault)
    label = "503 storm (rate 0.5) until durable"
    lost, _ = report(kit, label, bucket, prefix, expected, started, durable)
    assert lost == []
    assert hits > 0, "no request got a 503: the scenario did not happen"
    check_order(bucket, prefix, expected)


# --- 3. a slow store during a checkpoint ----------------------------------------------------

SLOW_MS, SLOW_MIBPS = 300, 5
CHECKPOINTS, CHECKPOINT_MIB = 4, 16


def slow_store(store: str, kit: ScenarioKit) -> None:
    """300 ms latency and 5 MiB/s on the bucket: four 16 MiB checkpoints written one right
    after the other are created, written and closed before the store has the last two.
    The uploads go one at a time, each >= 3.2 s through the link, so when the writer
    returned the third checkpoint's upload waited behind two others and the fourth's
    behind three: the writer waited neither for its own upload nor for those queued before
    it (even if the node's command took seconds to return). Then every checkpoint becomes
    durable, whole, through the slow link. A create waits for no listing either: that is
    test_writer_never_waits_for_the_store, whose faults hold listings for good. (How fast
    the writes are, against a fault-free store: bench/writer_under_faults.py.)"""
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = launched(kit, {"/ckpt": bucket.mount_entry("MOUNT_CACHED")})
    make_dir(cluster, "/ckpt/slow")
    slow = [f"slow/ckpt-{i}.bin" for i in range(CHECKPOINTS)]
    size = CHECKPOINT_MIB * MIB
    started, began = time.time(), time.monotonic()
    with (
        kit.store_faults.latency(store, ms=SLOW_MS, bucket=bucket.name) as latency,
        kit.store_faults.bandwidth(store, mibps=SLOW_MIBPS, bucket=bucket.name) as bandwidth,
    ):
        written = timed_writes(cluster, [f"/ckpt/{k}" for k in slow], size)
        done = {e.key for e in uploads(bucket, "slow")}
        lasted = [fault_events.lasts(store, f) for f in (latency, bandwidth)]
        durable = wait_durable(bucket, slow, 300)
        through_link_s = time.monotonic() - began
        delayed = fault_events.hits(store, latency)
    kit.record_property("slow_store_create_s", json.dumps([round(w.create_s, 3) for w in written]))
    kit.record_property("slow_store_write_s", json.dumps([round(w.write_s, 3) for w in written]))
    lost, _ = report(kit, "slow store (300 ms, 5 MiB/s)", bucket, "slow", slow, started, durable)
    assert lost == []
    assert all(lasted), "the slow store ended before the writer returned"
    assert not done & set(slow[-2:]), f"the writer returned after these were stored: {done}"
    # It really went through the slow store: its requests were delayed, and the data took
    # at least what the link allows (a lower bound of the bandwidth fault, monotonic).
    assert delayed > 0, "no request of the bucket met the latency"
    assert through_link_s >= CHECKPOINTS * CHECKPOINT_MIB / SLOW_MIBPS * 0.9, through_link_s
    for key, w in zip(slow, written, strict=True):
        assert hashlib.sha256(bucket.read(key)).hexdigest() == w.sha256, key


# --- 3b. the writer never waits for the store, whatever it does -------------------------------


WRITER_FAULTS = ("deny", "outage", "errors")
FIVE = ["e-first.bin", "c-second.bin", "a-third.bin", "d-fourth.bin", "b-fifth.bin"]
MANY = 50  # files per fault after the first five
SMALL = 4 << 10

# Per mount /KIND: the five files into cold/, then MANY into many/, each create-write-close
# timed on the node (monotonic).
TIMED_CREATES = """python3 - '{plan}' <<'PY'
import json, os, sys, time
plan = json.loads(sys.argv[1])
data = os.urandom(plan["size"])
def write(paths):
    took = []
    for path in paths:
        started = time.monotonic()
        with open(path, "wb") as f:
            f.write(data)
        took.append(round(time.monotonic() - started, 5))
    return took
out = {{}}
for kind in plan["kinds"]:
    five = write(f"/{{kind}}/cold/{{n}}" for n in plan["five"])
    many = write(f"/{{kind}}/many/f{{i:03d}}.bin" for i in range(plan["many"]))
    out[kind] = {{"five": five, "many": many}}
print("RESULT " + json.dumps(out))
PY"""


def timed_creates(cluster: Any, timeout: float) -> dict[str, Any]:
    """Run TIMED_CREATES on the node; its result."""
    plan = {"kinds": WRITER_FAULTS, "five": FIVE, "many": MANY, "size": SMALL}
    out = shell(cluster, TIMED_CREATES.format(plan=json.dumps(plan)), timeout=timeout)
    match = re.search(r"^RESULT (.*)$", out, re.M)
    assert match, out
    return dict(json.loads(match.group(1)))


# The mounts of the node's rclone daemons and how long each keeps its directory listings.
KEPT_LISTINGS = """python3 - <<'PY'
import glob, json, subprocess
def rc(sock, command, **params):
    args = ["rclone", "rc", "--unix-socket", sock, command]
    args += [f"{k}={v}" for k, v in params.items()]
    done = subprocess.run(args, capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}
for sock in glob.glob("/var/lib/skycore/mounts/rcd-*/rc.sock"):
    for m in rc(sock, "mount/listmounts").get("mountPoints") or []:
        opt = rc(sock, "vfs/stats", fs=m["Fs"]).get("opt") or {}
        print("KEPT", m["MountPoint"], opt.get("DirCacheTime"))
PY"""
FOR_GOOD_NS = 10 * 365 * 24 * 3600 * 10**9


def check_listings_kept(cluster: Any, dsts: list[str]) -> None:
    """Each mount in ``dsts`` keeps its listing for its life (its VFS's DirCacheTime, read
    from the node's rclone): rclone never lists its directories on demand, however old the
    listing, so a writer need not wait for a listing to be stale first."""
    out = shell(cluster, KEPT_LISTINGS)
    kept = {m.group(1): m.group(2) for m in re.finditer(r"^KEPT (\S+) (\S+)$", out, re.M)}
    for dst in dsts:
        assert kept.get(dst, "None").isdigit() and int(kept[dst]) >= FOR_GOOD_NS, (dst, out)


REFRESHER_LOG = "cat /var/lib/skycore/mounts/rcd-*/refresher.log 2>/dev/null; true"
SPACED = re.compile(r": \S+ in [\d.]+ s; the next in (\d+) s")


def wait_refresher_failed(cluster: Any, bucket: TestBucket, wait_s: float = 60) -> None:
    """Wait until the node's refresher logged a failed listing of the bucket's mount. It
    lists every 10 s, or every 10 times its last listing's duration (which it logs when
    that spaces the refreshes): the wait is ``wait_s``, or longer by such a logged delay.
    (Seen once in CI: 71 s without a failed listing of the third of three buckets.)"""
    deadline = time.monotonic() + wait_s
    seen = 0
    while True:
        _, out = cluster.shell(REFRESHER_LOG)
        lines = [line for line in out.splitlines() if bucket.name in line]
        if any(": failed" in line for line in lines):
            return
        spaced = [int(m.group(1)) for line in lines if (m := SPACED.search(line))]
        if len(spaced) > seen:  # a slow listing put the next one this far off (from now, at most)
            deadline = max(deadline, time.monotonic() + spaced[-1] + 15)
            seen = len(spaced)
        assert time.monotonic() < deadline, f"the refresher never listed {bucket.name}:\n{out}"
        time.sleep(1)


def writer_never_waits(store: str, kit: ScenarioKit) -> None:
    """A 403, an outage and a 503 storm (one bucket each, all at once, on every request)
    last for as long as a writer writes: 5 files in each mount, right after the node's
    refresher failed to list those buckets, then MANY more. The writer returns while every
    fault still lasts (under the outage, a create that asked the store would hang until the
    shell's timeout; under the 403 and the 503s it would fail) and no upload of those files
    got through; the faults end once each has hit the bucket's requests, and then every
    file is in its bucket, whole, the first five in creation order. The mounts keep their
    listings for their life (asserted on the node), so the listing's age plays no part.
    (Before: with rclone's 10 s directory cache expired, no file could be created under
    the 403; the outage and the storm held the first create for 8-23 s.)"""
    buckets = {kind: kit.bucket_factory(store, SKY_MANAGED) for kind in WRITER_FAULTS}
    cluster = launched(kit, {f"/{k}": b.mount_entry("MOUNT_CACHED") for k, b in buckets.items()})
    for kind in WRITER_FAULTS:
        make_dir(cluster, f"/{kind}/cold")
        make_dir(cluster, f"/{kind}/many")
    check_listings_kept(cluster, [f"/{kind}" for kind in WRITER_FAULTS])
    started = time.time()
    # Every listing of the three buckets fails until the node's refresher has failed to
    # list each (a 403 on GET: an outage would hold the refresher's listing, and with it
    # its listings of the other mounts); the faults begin before that ends, so no listing
    # succeeds in between.
    cold = [
        kit.store_faults.start(store, "deny", method="GET", bucket=buckets[kind].name)
        for kind in WRITER_FAULTS
    ]
    for kind in WRITER_FAULTS:
        wait_refresher_failed(cluster, buckets[kind])
    faults = {
        kind: kit.store_faults.start(store, kind, bucket=buckets[kind].name)
        for kind in WRITER_FAULTS
    }
    for fault in cold:
        kit.store_faults.stop(store, fault)
    # A hang guard far above a local write's time (the writes take tenths of a second).
    written = timed_creates(cluster, timeout=120)
    kit.record_property("writer_created_s", json.dumps(written))
    expected = [f"cold/{n}" for n in FIVE]
    many = [f"many/f{i:03d}.bin" for i in range(MANY)]
    for kind, fault in faults.items():
        assert fault_events.lasts(store, fault), f"the {kind} fault ended before the writer did"
    # The faults met the uploads of these files (refused them, or hold them) ...
    for fault in faults.values():
        fault_events.wait_hits(store, fault, 1, HELD_S)
    # ... and nothing got through them.
    for kind in WRITER_FAULTS:
        got = [e.key for e in buckets[kind].events() if e.key in {*expected, *many}]
        assert not got, (kind, got)
    for fault in faults.values():
        kit.store_faults.stop(store, fault)
    for kind in WRITER_FAULTS:
        bucket = buckets[kind]
        durable = wait_durable(bucket, expected + many, 240)
        label = f"writer during {kind} (until written)"
        lost, _ = report(kit, label, bucket, "cold", expected, started, durable)
        assert lost == [], (kind, lost)
        check_order(bucket, "cold", expected)
        for key in expected:
            assert len(bucket.read(key)) == SMALL, key
        assert not set(many) - set(bucket.list_keys()), kind


# --- 4. connection resets during a big upload -------------------------------------------------


def resets_during_a_big_upload(store: str, kit: ScenarioKit) -> None:
    """30% of requests have their connection reset mid-body during a 64 MiB upload: the
    object arrives whole (sha256)."""
    bucket, cluster = cached_cluster(store, kit, "reset")
    started = time.time()
    with kit.store_faults.reset(store, rate=0.3, bucket=bucket.name) as fault:
        (written,) = timed_writes(cluster, ["/ckpt/reset/big.bin"], 64 * MIB)
        durable = wait_durable(bucket, ["reset/big.bin"], 300)
    resets = fault_events.hits(store, fault)
    label = "resets (rate 0.3) during 64 MiB"
    lost, _ = report(kit, label, bucket, "reset", ["reset/big.bin"], started, durable)
    assert lost == []
    assert resets > 0, "no connection was reset: the scenario did not happen"
    assert hashlib.sha256(bucket.read("reset/big.bin")).hexdigest() == written.sha256


# --- 5. credentials refused for a while --------------------------------------------------------


def refused(store: str, bucket: TestBucket, prefix: str, since: int) -> list[str]:
    """Wait until the store (denying) has refused an upload under ``prefix``: the denial
    ends right then, however soon the node's order keeper looks again, so a newer file due
    at that moment must still wait behind the refused one. The refused keys, oldest
    first."""
    return fault_events.wait_refused(store, bucket.name, since, HELD_S, prefix=prefix)


def deny_during_writes(store: str, kit: ScenarioKit) -> None:
    """403 AccessDenied (revoked credentials) while a job writes its files, until the store
    has refused an upload: nothing is lost, each file arrives whole and in creation order.
    (rclone alone retries each failed upload after its own back-off, so a file whose retry
    fell just after the denial ended overtook older files still waiting for theirs: k6, k7
    before k0..k5 on a loaded machine. The node releases one upload at a time, the next
    only once the last is in the store.)"""
    prefix, expected = "deny", keys("deny")
    bucket, cluster = cached_cluster(store, kit, prefix)
    started = time.time()
    since = fault_events.log_offset(store)
    fault = kit.store_faults.start(store, "deny", bucket=bucket.name)
    write_files(cluster, prefix)
    refused_keys = refused(store, bucket, prefix, since)
    kit.store_faults.stop(store, fault)
    kit.record_property("refused_uploads", json.dumps(refused_keys))
    durable = wait_durable(bucket, expected, 240)
    label = "deny until an upload is refused"
    lost, _ = report(kit, label, bucket, prefix, expected, started, durable)
    assert lost == []
    for key in expected:  # and each file whole
        assert len(bucket.read(key)) == MIB
    check_order(bucket, prefix, expected)


def deny_then_more_writes(store: str, kit: ScenarioKit) -> None:
    """403 while k0..k3 are written, until the store has refused an upload; k4..k7 are
    written right after it ends. Nothing is lost and the order is kept:
    k4..k7, never refused, wait behind the older files, whose uploads failed (before the
    node's order keeper, rclone sent k4..k7 first, every run)."""
    deny_then_more(store, kit, "denymid", slow_keeper=False)


def deny_then_more_writes_slow_keeper(store: str, kit: ScenarioKit) -> None:
    """The same while the node's order keeper (its refresher) is kept off the CPU 0.3 s out
    of every 0.6 s, as a loaded machine may do: rclone starts no upload that the keeper did
    not release, so a late keeper only slows the uploads and the order is kept. (When
    rclone started uploads after a short write-back delay of its own, newer files went
    before older ones in this scenario under load.)"""
    deny_then_more(store, kit, "denyslow", slow_keeper=True)


def deny_then_more(store: str, kit: ScenarioKit, prefix: str, slow_keeper: bool) -> None:
    bucket, cluster = cached_cluster(store, kit, prefix)
    expected = keys(prefix)
    stalls = (
        stall_processes(cluster.name, " refresher ", stop_s=0.3, run_s=0.3)
        if slow_keeper
        else contextlib.nullcontext(set[int]())
    )
    started = time.time()
    with stalls as frozen:
        since = fault_events.log_offset(store)
        fault = kit.store_faults.start(store, "deny", bucket=bucket.name)
        half = N_FILES // 2
        first = WRITER.format(n=half, prefix=prefix, size=MIB).replace("range(", "range(0, ")
        shell(cluster, first)
        refused_keys = refused(store, bucket, prefix, since)
        kit.store_faults.stop(store, fault)
        later = WRITER.format(n=N_FILES, prefix=prefix, size=MIB).replace(
            "range(", f"range({half}, "
        )
        shell(cluster, later)
        durable = wait_durable(bucket, expected, 240)
    kit.record_property("refused_uploads", json.dumps(refused_keys))
    if slow_keeper:
        assert frozen, "no refresher was found on the node: the keeper was never stalled"
    label = "deny until an upload is refused, then more files"
    label += " (slow keeper)" if slow_keeper else ""
    lost, _ = report(kit, label, bucket, prefix, expected, started, durable)
    assert lost == []
    for key in expected:
        assert len(bucket.read(key)) == MIB
    check_order(bucket, prefix, expected)


# --- the gate is the only door, from a node too ----------------------------------------------


PROBE = """python3 -c '
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError as e:
    print("refused", e)
else:
    print("CONNECTED")
' {port}"""


def emulator_ports_from_a_node(store: str, kit: ScenarioKit) -> None:
    """A node (--network host) cannot connect to the emulator behind the gate; it reaches
    the gate's port. The gates' admin token is nowhere on the node."""
    emulator = emulators.get(store)
    cluster = kit.cluster_factory("seal")
    outcome = cluster.launch({"name": "seal", "run": "true"})
    assert outcome.exit_code == 0, outcome.output
    inside = shell(cluster, PROBE.format(port=emulator.record.port))
    assert "refused" in inside and "CONNECTED" not in inside, inside
    gate = shell(cluster, PROBE.format(port=emulator.record.gate_port))
    assert "CONNECTED" in gate, gate
    token = (emulator.home / "gate-token").read_text().strip()
    found = shell(cluster, f"grep -rl {token} /root /etc /var/lib/skycore 2>/dev/null; true")
    assert found.strip() == "", found


# --- the tests: each joins its scenario, run side by side with the store's others ----------


@scenario(outage_then_stop)
def test_outage_then_stop_waits_and_keeps_everything(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """An outage during write-back, then stop: stop waits, nothing lost, order kept."""
    side_by_side.join(request)


@scenario(error_storm)
def test_error_storm_loses_nothing_and_keeps_order(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """A 503 storm (rate 0.5) during write-back: nothing lost, order kept."""
    side_by_side.join(request)


@scenario(slow_store)
def test_slow_store_does_not_slow_the_writer(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """A slow store (300 ms, 5 MiB/s): the writer returns before the store has its data,
    which then becomes durable, whole."""
    side_by_side.join(request)


@scenario(writer_never_waits)
def test_writer_never_waits_for_the_store(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """403, outage, 503 storm held while a writer creates 5 + 50 files in each mount: it
    returns with the faults on; all in the bucket afterwards, the first five in order."""
    side_by_side.join(request)


@scenario(resets_during_a_big_upload)
def test_resets_during_a_big_upload_deliver_it_whole(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """Resets (rate 0.3) during a 64 MiB upload: the object arrives whole."""
    side_by_side.join(request)


@scenario(deny_during_writes)
def test_deny_loses_nothing(side_by_side: SideBySide, request: pytest.FixtureRequest) -> None:
    """403 while files are written, until an upload is refused: nothing lost, order kept."""
    side_by_side.join(request)


@scenario(deny_then_more_writes)
def test_deny_then_more_writes_keeps_order(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """403 until an upload is refused, then more files: nothing lost, order kept."""
    side_by_side.join(request)


@scenario(deny_then_more_writes_slow_keeper)
def test_deny_then_more_writes_keeps_order_with_a_slow_keeper(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """The same with the node's order keeper off the CPU 0.3 s in every 0.6 s: order kept."""
    side_by_side.join(request)


@scenario(emulator_ports_from_a_node)
def test_emulator_ports_are_unreachable_from_a_node(
    side_by_side: SideBySide, request: pytest.FixtureRequest
) -> None:
    """A node reaches the gate, never the emulator behind it, nor the token."""
    side_by_side.join(request)
