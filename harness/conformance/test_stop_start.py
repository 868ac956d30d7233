"""stop drains cached mounts (nothing written is lost); start brings every mount back."""

from __future__ import annotations

import hashlib

from harness.conformance.contract_kept import emulator_contract_kept  # noqa: F401 (autouse)
from harness.conformance.helpers import mounted_buckets

WRITE = (
    "set -e; echo before-stop > /data/mount/before.txt; "
    "head -c 8388608 /dev/urandom > /data/cached/before.bin; "
    "sha256sum /data/cached/before.bin"
)


def test_stop_start_keeps_mounts_and_files(store, bucket_factory, cluster_factory) -> None:
    modes = {"/data/mount": "MOUNT", "/data/cached": "MOUNT_CACHED"}
    buckets, mounts = mounted_buckets(bucket_factory, store, modes)
    plain, cached = buckets["/data/mount"], buckets["/data/cached"]
    cluster = cluster_factory("stopstart")
    spec = {"name": "stop-start", "file_mounts": mounts, "run": "ls /data/mount /data/cached"}
    assert cluster.launch(spec).exit_code == 0

    # Written outside any job, straight into the mounts: stop must drain it before stopping.
    code, out = cluster.shell(WRITE)
    assert code == 0, out
    digest = out.split()[0]

    cluster.stop()
    assert cluster.status() == "STOPPED"
    assert plain.read("before.txt") == b"before-stop\n"
    assert hashlib.sha256(cached.read("before.bin")).hexdigest() == digest

    cluster.start()
    assert cluster.status() == "UP"
    code, out = cluster.shell(
        "set -e; grep -E ' /data/(mount|cached) ' /proc/mounts; cat /data/mount/before.txt; "
        "sha256sum /data/cached/before.bin"
    )
    assert code == 0, out
    assert out.count("fuse.rclone") == 2, out
    assert "before-stop" in out and digest in out

    # The mounts are live again: new writes reach the store (a job drains before it ends).
    outcome = cluster.exec(
        {"run": "echo after-start > /data/mount/after.txt; echo cached > /data/cached/after.txt"}
    )
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    assert plain.read("after.txt") == b"after-start\n"
    assert cached.read("after.txt") == b"cached\n"
