"""Real host-side FUSE mounts against the emulators: creation order and drains, reopened
files, one daemon per node, ordered mounts, stale mounts, read-only public buckets, drains
and unmounts with uploads pending. A daemon's death: test_mount_recovery.py; the refresher
and faults: test_mount_refresher.py."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.emulators.fleet import RunningEmulator
from skycore.config import SkycoreConfig
from skycore.storage import Storage, make_store, mounting
from skycore.storage.mounting import MountOptions, RcloneEnv
from tests.integration.helpers import emulator_bucket
from tests.integration.skycore.storage.mount_helpers import (
    RCLONE,
    bash,
    mount_bucket,
    mounted,
)
from tests.polling import wait_for


def test_cached_mount_uploads_in_creation_order_and_drains(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    storage, dst, cmd = mount_bucket(bucket, "data", store_config, host_env)
    assert mounted(dst)
    again = bash(cmd)  # idempotent
    assert again.returncode == 0 and "already mounted" in again.stdout
    conn = Path("/sys/fs/fuse/connections") / str(os.minor(os.stat(dst).st_dev))
    assert (conn / "max_background").read_text().strip() == "1"  # RELEASEs one at a time
    names = [f"ckpt-{i:02d}.bin" for i in range(20)]
    sizes = [1024, 8 << 20] + [(4 << 10) if i % 3 else (1 << 20) for i in range(18)]
    for n, size in zip(names, sizes, strict=True):  # back to back, a big file early
        (dst / n).write_bytes(os.urandom(size))
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    assert "drained" in drain.stdout
    dirs = mounting.mount_dirs(str(dst), host_env.mounts_base)
    stats = bash(f"{RCLONE} rc --unix-socket {dirs.rc_socket} vfs/stats").stdout
    assert '"uploadsQueued": 0' in stats and '"uploadsInProgress": 0' in stats
    bucket_name = storage.name
    writes = [
        e.key for e in store_emulator.events(bucket_name) if e.op != "delete" and e.key in names
    ]
    assert writes == names, f"upload order {writes}"
    st = make_store(store_emulator.store, bucket_name, store_config, storage.account)
    assert sorted(st.list_keys()) == names
    un = bash(mounting.unmount_command(str(dst), 60, host_env))
    assert un.returncode == 0, un.stderr
    assert not mounted(dst)


def test_reopened_file_ends_as_one_complete_object(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """The short write-back never uploads a torn file: a writer that closes, reopens within
    the write-back delay and keeps writing for longer than it ends with one complete object.
    rclone may upload the version of the last close while the file is open again (it does not
    cancel a queued upload on open); such an upload is that closed version, whole (rclone's
    reader fails an upload whose source changes under it), and the file goes up again after
    its final close."""
    storage, dst, _ = mount_bucket(bucket, "reopen", store_config, host_env)
    parts = [os.urandom(256 << 10) for _ in range(6)]
    with open(dst / "ckpt.bin", "wb") as f:
        f.write(parts[0])
    write_back = MountOptions().write_back_s
    bucket_name = storage.name
    with open(dst / "ckpt.bin", "ab") as f:  # reopened at once, written for 1.5 write-backs
        for part in parts[1:]:
            time.sleep(write_back * 1.5 / len(parts[1:]))
            f.write(part)
            f.flush()
        # what the store got before the final close (looked at while the file is open)
        while_open = [e for e in store_emulator.events(bucket_name) if e.key == "ckpt.bin"]
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    st = make_store(store_emulator.store, bucket_name, store_config, storage.account)
    assert st.list_keys() == ["ckpt.bin"]
    assert store_emulator.read_object(bucket_name, "ckpt.bin") == b"".join(parts)
    writes = [e for e in store_emulator.events(bucket_name) if e.key == "ckpt.bin"]
    assert writes, "no upload recorded"
    closed_sizes = {len(parts[0]), sum(map(len, parts))}
    assert all(e.size in closed_sizes for e in writes if e.size >= 0), writes
    # Before the final close, only the first closed version went up; after it, the whole.
    assert all(e.size == len(parts[0]) for e in while_open if e.size >= 0), while_open
    assert len(writes) > len(while_open), (while_open, writes)
    assert writes[-1].size in (-1, sum(map(len, parts))), writes
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


def test_one_daemon_serves_every_mount_and_quits_when_idle(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A MOUNT and a MOUNT_CACHED mount of the same node share one rclone process; the
    live-mount probe sees both; unmounting the last one stops the daemon."""
    dsts = []
    for mode in ("MOUNT", "MOUNT_CACHED"):
        dst = mount_bucket(bucket, mode.lower(), store_config, host_env, mode=mode).dst
        dsts.append(str(dst))
    sock = mounting.daemon_dirs(base=host_env.mounts_base).rc_socket
    assert sorted(Path(host_env.mounts_base).glob("rcd-*/rc.sock")) == [Path(sock)]
    pids = subprocess.run(
        ["pgrep", "-f", f"rclone rcd --config {host_env.config_file}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    assert len(pids) == 1, pids
    live = bash(mounting.live_command([*dsts, "/not/mounted"], host_env)).stdout.split("\n")
    assert sorted(ln for ln in live if ln) == sorted(f"SKYCORE_LIVE {d}" for d in dsts)
    drain = bash(mounting.drain_command(dsts, 60, host_env))
    assert drain.returncode == 0 and drain.stdout.count("drained") == 2, drain.stdout
    un = bash(mounting.unmount_command(dsts, 60, host_env))
    assert un.returncode == 0, un.stderr
    assert not any(mounted(Path(d)) for d in dsts)
    wait_for(
        "the idle daemon to quit",
        lambda: subprocess.run(["kill", "-0", pids[0]], capture_output=True).returncode != 0,
        timeout=5,
    )


def test_ordered_mount_fails_when_releases_cannot_be_serialized(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """Upload order is a promise: when the FUSE connection's max_background cannot be set
    (fusectl read-only here, in a private mount namespace) the ordered MOUNT_CACHED mount
    fails with a clear error and is undone, instead of mounting with a warning."""
    storage = Storage.from_spec(name=None, source=bucket, store=None, mode="MOUNT_CACHED")
    storage.check(store_config)
    dst = Path(host_env.mounts_base).parent / "ordered"
    script = storage.mount_command(str(dst), store_config, env=host_env)
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c",
         "mountpoint -q /sys/fs/fuse/connections || mount -t fusectl fusectl "
         "/sys/fs/fuse/connections; mount -o remount,bind,ro /sys/fs/fuse/connections && "
         'bash -c "$0"; rc=$?; '
         'grep -c " $1 " /proc/self/mounts || true; exit $rc', script, str(dst)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cannot serialize FUSE releases" in r.stderr and "transfers > 1" in r.stderr
    assert r.stdout.strip().splitlines()[-1] == "0", "the failed mount was left mounted"


def _stale(path: Path) -> bool:
    """Whether the FUSE mount at ``path`` lost its daemon (ENOTCONN)."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ENOTCONN
    return False


def test_plain_mount_writes_through_and_remounts_after_stale(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    storage, dst, cmd = mount_bucket(bucket, "plain", store_config, host_env, mode="MOUNT")
    (dst / "hello.txt").write_text("hi")  # MOUNT: the upload is done when close returns
    st = make_store(store, storage.name, store_config, storage.account)
    assert st.list_keys() == ["hello.txt"]
    # kill rclone: the mount goes stale; the mount script recovers it
    sock = mounting.mount_dirs(str(dst), host_env.mounts_base).rc_socket
    pid = bash(f"{RCLONE} rc --unix-socket {sock} core/pid")
    assert pid.returncode == 0
    os.kill(int(pid.stdout.split(":")[1].strip(" }\n")), 9)
    wait_for("the mount to go stale (rclone dead)", lambda: _stale(dst), timeout=10)
    r = bash(cmd)
    assert r.returncode == 0, r.stderr
    assert "stale mount" in r.stderr
    assert (dst / "hello.txt").read_text() == "hi"
    assert bash(mounting.unmount_command(str(dst), 30, host_env)).returncode == 0


def test_public_bucket_of_other_account_mounts_read_only(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv
) -> None:
    objects = {"data/a.txt": b"public"}
    with emulator_bucket(store_emulator, "pub", owner="other", public=True, objects=objects) as (
        _name,
        url,
    ):
        storage = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT_CACHED")
        assert storage.check(store_config).read_only
        dst = Path(host_env.mounts_base).parent / "pub"
        r = bash(storage.mount_command(str(dst), store_config, env=host_env))
        assert r.returncode == 0, r.stderr
        assert (dst / "data" / "a.txt").read_text() == "public"
        t0 = time.monotonic()
        with pytest.raises(OSError) as info:
            (dst / "new.txt").write_text("x")
        assert info.value.errno == errno.EROFS and time.monotonic() - t0 < 5
        assert bash(mounting.unmount_command(str(dst), 30, host_env)).returncode == 0
        # COPY of the same public bucket
        copy_dst = Path(host_env.mounts_base).parent / "copy"
        c = Storage.from_spec(name=None, source=url + "/data", store=None, mode="COPY")
        c.check(store_config)
        r = bash(c.copy_command(str(copy_dst), store_config, env=host_env))
        assert r.returncode == 0, r.stderr
        assert (copy_dst / "a.txt").read_text() == "public"


def test_drain_lets_uploads_waiting_for_the_write_back_go_at_once(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A drain does not wait out the write-back delay: files closed just before it are
    uploaded at once, in creation order (with a 20 s write-back, a drain given 10 s would
    time out otherwise)."""
    slow = MountOptions(write_back_s=20)
    storage, dst, _ = mount_bucket(bucket, "hurried", store_config, host_env, options=slow)
    names = ["b-first.bin", "a-second.bin", "c-third.bin"]  # creation order is not name order
    for n in names:
        (dst / n).write_bytes(n.encode() * 1000)
    started = time.monotonic()
    drain = bash(mounting.drain_command(str(dst), 10, host_env), timeout=60)
    assert drain.returncode == 0, drain.stderr
    assert time.monotonic() - started < 10
    writes = [e.key for e in store_emulator.events(storage.name) if e.key in names]
    assert list(dict.fromkeys(writes)) == names, writes
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


def test_unmount_refuses_with_uploads_pending(
    store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    held = MountOptions(write_back_s=120)  # hold uploads back
    dst = mount_bucket(bucket, "pending", store_config, host_env, options=held).dst
    (dst / "late.bin").write_bytes(b"x" * 1000)
    r = bash(mounting.unmount_command(str(dst), 2, host_env))
    assert r.returncode == 1
    assert "uploads are still pending" in r.stderr and "1 queued" in r.stderr
    assert mounted(dst)
    drain = bash(mounting.drain_command(str(dst), 1, host_env))
    assert drain.returncode == 1 and "timed out draining" in drain.stderr
