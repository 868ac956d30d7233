"""A mount whose rclone daemon died with uploads pending: the next mount uploads every file
whole, in creation order."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NamedTuple

import pytest

from harness.emulators.fleet import RunningEmulator
from harness.testing.order_check import assert_visible_prefix
from skycore.config import SkycoreConfig
from skycore.node.mountd import rc as node_rc
from skycore.storage import Storage, StorageMode, mounting
from skycore.storage.mounting import MountOptions, RcloneEnv
from tests.integration.skycore.storage.mount_helpers import (
    bash,
    mount_bucket,
)
from tests.polling import wait_for


class Remounted(NamedTuple):
    storage: Storage
    dst: Path
    payloads: dict[str, bytes]  # in creation order


def remount_after_rclone_died(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> Remounted:
    """An ordered mount whose rclone daemon is killed with three closed files pending (in
    creation order b-first, a-second, c-third: not name order), mounted again and drained."""
    pending = MountOptions(write_back_s=120)  # still pending when rclone dies
    storage, dst, _ = mount_bucket(bucket, "crash", store_config, host_env, options=pending)
    names = ["b-first.bin", "a-second.bin", "c-third.bin"]  # creation order is not name order
    payloads = {n: os.urandom((1 << 20) + i) for i, n in enumerate(names)}
    for n in names:
        (dst / n).write_bytes(payloads[n])
    sock = mounting.mount_dirs(
        str(dst), host_env.mounts_base, StorageMode.MOUNT_CACHED, storage.mount_options
    ).rc_socket
    fs = node_rc.served(host_env.mounts_base)[0][str(dst)][1]
    wait_for(
        "the closed files to be queued for upload",
        lambda: (
            node_rc.rc(sock, "vfs/stats", {"fs": fs})["diskCache"]["uploadsQueued"] >= len(names)
        ),
        timeout=10,
        poll=0.05,
    )
    assert not [e for e in store_emulator.events(storage.name) if e.key in names]
    os.kill(int(node_rc.rc(sock, "core/pid")["pid"]), 9)
    wait_for("rclone to die", lambda: not node_rc.answers(sock), timeout=10, poll=0.05)
    with pytest.raises(OSError) as dead:
        os.stat(dst / names[0])
    assert dead.value.errno == errno.ENOTCONN
    storage.mount_options = MountOptions()  # the next mount: today's write-back
    r = bash(storage.mount_command(str(dst), store_config, env=host_env))
    assert r.returncode == 0, r.stderr
    assert "stale mount" in r.stderr
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    return Remounted(storage, dst, payloads)


def test_files_pending_when_rclone_dies_are_uploaded_by_the_next_mount(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """Nothing written is lost when a node's rclone daemon dies with uploads pending: the
    closed files stay in the daemon's cache folder, the dead mount fails at once (ENOTCONN,
    never a hang), and the next mount of the same destination (what a relaunch does with a
    stale mount) uploads every one of them whole."""
    storage, dst, payloads = remount_after_rclone_died(
        store_emulator, store_config, host_env, bucket
    )
    for n, payload in payloads.items():
        assert store_emulator.read_object(storage.name, n) == payload, n
        assert (dst / n).read_bytes() == payload, n
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


class OrderNotKept(AssertionError):
    """The store showed a file before one created before it."""


def test_files_a_dead_daemon_left_go_up_in_creation_order(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """The order promise across a daemon's death: the files it left pending (killed with
    SIGKILL) reach the store in creation order, not in the name order in which the next
    daemon finds them in its cache folder (the keepers' close-order journal on the node's
    disk)."""
    storage, dst, payloads = remount_after_rclone_died(
        store_emulator, store_config, host_env, bucket
    )
    try:
        events = [e for e in store_emulator.events(storage.name) if e.key in payloads]
        assert_visible_prefix(events, list(payloads), error=OrderNotKept)
    finally:
        bash(mounting.unmount_command(str(dst), 60, host_env))
