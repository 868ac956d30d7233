"""A MOUNT_CACHED mount on a node whose disk is smaller than what the job writes
(``resources.disk_size``): the cache keeps to its bound, a cache full of files the store does
not have yet fails the writer at once (never a hang, never a file reported written that is
not), says so in the job's log, loses nothing closed before and uploads it in creation
order once the store is back; then the writer goes on.

Everything is real: a 1 GiB ext4 disk per node (loop-mounted), rclone's cache on it, the
store's outage in its gate. The verdicts are causes: the writer's errno, what the gate had
recorded when the writer returned, the order of the gate's write events, the sizes rclone's
cache cleaner logged.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
from typing import Any

import pytest

from harness.testing.buckets import SKY_MANAGED, TestBucket
from harness.testing.order_check import assert_all_visible, assert_visible_prefix
from tests.smoke import fault_events

pytestmark = [pytest.mark.usefixtures("local_cloud"), pytest.mark.slow]

MIB = 1 << 20
DISK_GIB = 1
FILE_MIB = 64
MAX_FILES = 40  # 2.5 GiB: far past the disk (a guard, the disk fills at about 15)
WRITE_GUARD_S = 300.0  # hang guard: filling the 1 GiB disk takes seconds
CACHE_LOG = "/var/lib/skycore/mounts/rcd-t1/rclone.log"
CLEANED = re.compile(r"vfs cache: cleaned: .*total size (\S+) \(was")

# Writes FILE_MIB files into /ckpt/PREFIX until one fails; the failed one is removed (a
# program that got an error does not leave half a checkpoint). Prints JSON: the files
# written (path, sha256) and the failure (path, errno).
FILL = """timeout {guard} python3 - <<'PY'
import hashlib, json, os
block = os.urandom(1 << 20)
out = {{"ok": [], "failed": None}}
for i in range({start}, {stop}):
    path = "/ckpt/{prefix}/k%02d.bin" % i
    data = i.to_bytes(8, "big") * 128 + block[1024:] + block * ({mib} - 1)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        out["failed"] = [path, e.errno]
        try:
            os.unlink(path)
        except OSError as e2:
            out["unlink_errno"] = e2.errno
        break
    out["ok"].append([path, hashlib.sha256(data).hexdigest()])
print("FILLED " + json.dumps(out))
PY"""


def shell(cluster: Any, cmd: str, timeout: float = 600) -> str:
    code, out = cluster.shell(cmd, timeout=timeout)
    assert code == 0, f"exit {code} on the node:\n{out}"
    return str(out)


def fill(cluster: Any, prefix: str, start: int, stop: int) -> dict[str, Any]:
    """Run FILL on the node: files k<start>.. until one fails or k<stop - 1> is written."""
    cmd = FILL.format(guard=int(WRITE_GUARD_S), start=start, stop=stop, prefix=prefix,
                      mib=FILE_MIB)  # fmt: skip
    out = shell(cluster, cmd, timeout=WRITE_GUARD_S + 60)
    line = next(ln for ln in out.splitlines() if ln.startswith("FILLED "))
    return dict(json.loads(line.removeprefix("FILLED ")))


def launched_on_small_disk(cluster: Any, bucket: TestBucket, **mount_cached: Any) -> None:
    entry = bucket.mount_entry("MOUNT_CACHED")
    if mount_cached:
        entry["config"] = {"mount_cached": mount_cached}
    spec = {
        "name": "small-disk",
        "resources": {"disk_size": DISK_GIB},
        "file_mounts": {"/ckpt": entry},
        "run": "true",
    }
    outcome = cluster.launch(spec)
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()


def key_of(path: str) -> str:
    return path.removeprefix("/ckpt/")


def test_a_full_cache_fails_the_writer_keeps_what_was_closed_and_uploads_it_in_order(
    store: str,
    bucket_factory: Any,
    cluster_factory: Any,
    store_faults: Any,
    record_property: Any,
) -> None:
    """The store is out while a job writes 64 MiB files on a node with a 1 GiB disk: the
    write that finds the disk full fails at once (EIO: rclone's mount turns ENOSPC into an
    I/O error) while the outage still holds every upload; the files closed before are all
    kept, and once the store is back they reach it whole and in creation order; the job's
    log says in one line that the cache was full; then the writer goes on."""
    bucket = bucket_factory(store, SKY_MANAGED)
    cluster = cluster_factory("fullcache")
    launched_on_small_disk(cluster, bucket)
    shell(cluster, "mkdir -p /ckpt/full && ls /ckpt/full")
    fault = store_faults.start(store, "outage", bucket=bucket.name)
    filled = fill(cluster, "full", 0, MAX_FILES)
    assert fault_events.hits(store, fault) > 0, "no upload met the outage: it never mattered"
    assert not [e for e in bucket.events() if e.key.startswith("full/")], "got through"
    assert filled["failed"] is not None, f"{MAX_FILES} x {FILE_MIB} MiB fit a {DISK_GIB} GiB disk"
    failed_path, failed_errno = filled["failed"]
    record_property("full_cache_errno", errno.errorcode.get(failed_errno, str(failed_errno)))
    record_property("files_before_full", len(filled["ok"]))
    assert failed_errno in (errno.EIO, errno.ENOSPC), filled
    assert "unlink_errno" not in filled, filled
    assert 4 <= len(filled["ok"]) < DISK_GIB * 1024 // FILE_MIB, filled
    store_faults.stop(store, fault)

    job = cluster.exec({"name": "after-outage", "run": "echo job done"})  # its end drains
    assert job.exit_code == 0, job.output + job.run_log()
    full_lines = [ln for ln in job.run_log().splitlines() if "skycore: cache full:" in ln]
    assert len(full_lines) == 1, job.run_log()
    record_property("cache_full_line", full_lines[0])
    assert "/ckpt" in full_lines[0] and "EIO" in full_lines[0], full_lines[0]

    more = fill(cluster, "full", MAX_FILES, MAX_FILES + 1)  # space came back
    assert more["failed"] is None and len(more["ok"]) == 1, more
    drained = cluster.exec({"name": "last", "run": "true"})
    assert drained.exit_code == 0, drained.output + drained.run_log()

    written = filled["ok"] + more["ok"]
    expected = [key_of(p) for p, _ in written]
    events = [e for e in bucket.events() if e.key.startswith("full/")]
    assert_visible_prefix(events, expected, "full/")
    assert_all_visible(events, expected, "full/")
    listed = set(bucket.list_keys())
    assert key_of(failed_path) not in listed, "the file whose write failed reached the store"
    for path, digest in written[:2] + written[-2:]:  # whole, not only listed
        assert hashlib.sha256(bucket.read(key_of(path))).hexdigest() == digest, path


def size_bytes(text: str) -> float:
    """rclone's SizeSuffix as it logs one (``0``, ``1023``, ``200Mi``, ``1.500Gi``)."""
    m = re.fullmatch(r"([\d.]+)([KMGTP]i)?", text)
    assert m, text
    return float(m.group(1)) * (1 << (10 * " KMGTP".index((m.group(2) or " ")[0])))


def test_a_bounded_cache_keeps_under_its_bound_on_a_small_disk(
    bucket_factory: Any, cluster_factory: Any, record_property: Any
) -> None:
    """A job writes 10 x 100 MiB (1000 MiB: all of a 1 GiB disk) into a mount whose cache is
    bounded at 256M, each file drained before the next (each a job: its end drains): every
    write succeeds, the cache cleaner keeps the cache under its bound (the size it logs
    once the last upload is done), and all 10 files are in the store. The bound is rclone's
    cache cleaner, the same on every store: checked on s3."""
    bucket = bucket_factory("s3", SKY_MANAGED)
    cluster = cluster_factory("bounded")
    launched_on_small_disk(cluster, bucket, vfs_cache_max_size="256M")
    sizes: list[float] = []
    for i in range(10):
        write = f"open('/ckpt/b{i}.bin', 'wb').write(os.urandom(100 << 20))"
        run = f'python3 -c "import os; {write}"'
        job = cluster.exec({"name": f"w{i}", "run": run})
        assert job.exit_code == 0, f"write {i}: " + job.output + job.run_log()
        cleaned = shell(cluster, f"grep 'vfs cache: cleaned:' {CACHE_LOG} | tail -n 1")
        sizes += [size_bytes(m.group(1)) for m in CLEANED.finditer(cleaned)]
    # the cleaner's first pass after the last upload: every file is in the store by now
    mark = shell(cluster, f"wc -l < {CACHE_LOG}").strip()
    after = shell(
        cluster,
        f"for _ in $(seq 600); do tail -n +{int(mark) + 1} {CACHE_LOG} | grep -m1 "
        f"'vfs cache: cleaned:' && exit 0; sleep 0.1; done; exit 1",
        timeout=120,
    )
    final = size_bytes(CLEANED.search(after).group(1))  # type: ignore[union-attr]
    record_property("cache_after_s", json.dumps({"final_mib": final / MIB}))
    assert final <= 256 * MIB, after
    keys = set(bucket.list_keys())
    assert {f"b{i}.bin" for i in range(10)} <= keys, keys
