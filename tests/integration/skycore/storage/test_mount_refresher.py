"""MOUNT_CACHED mounts and the node's refresher under store faults: the writer never waits
for the store, a mount registered during another's listing keeps its order keeper, and
objects others add show up after a refresh."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.emulators.fleet import RunningEmulator
from skycore.config import SkycoreConfig
from skycore.node.mountd import rc as node_rc
from skycore.node.mountd.refresher import ordered_mounts
from skycore.storage import Storage, mounting
from skycore.storage.mounting import MountOptions, RcloneEnv
from tests.integration.skycore.storage.mount_helpers import (
    bash,
    mount_bucket,
    unmount_and_delete,
)
from tests.polling import wait_for
from tests.smoke import fault_events

FAULT_KINDS = ("deny", "outage", "errors")
FAULT_GUARD_S = 120.0  # the faults end by themselves only if the test hangs (it clears them)
WRITE_S = 1.0  # hang guard: 5 small files created, written, closed: ~0.01 s measured


def test_cached_writer_never_waits_for_the_store(
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    host_env: RcloneEnv,
    unique_name: Callable[[str], str],
    record_property: Callable[[str, object], None],
) -> None:
    """In a MOUNT_CACHED mount, creating, writing and closing 5 files returns while the
    store refuses (403), holds (outage) or fails (503) every request, and the files reach
    the store whole and in creation order once it is back. The faults end once the writes
    have returned. (Before, with rclone's 10 s directory cache expired: no file could be
    created under a 403, and the writer waited out an outage, 8 s, or a 503 storm, 8.6-22.7
    s.)

    The directory cache is as cold as it gets: rclone lists a directory on demand only when
    its listing is older than the mount's DirCacheTime (vfs/dir.go ``_age``), which here is
    the mount's life (asserted on the live VFS). So a listing made a second ago and one made
    more than 10 s ago (cold for the old 10 s DirCacheTime) are the same state for rclone,
    and the test need not wait. The node's refresher lists each mount every second here:
    during the faults its listings fail (deny, errors) or are held (outage), and the
    writer never waits for them."""
    em = store_emulator
    buckets = {kind: unique_name(f"cw{kind[:3]}") for kind in FAULT_KINDS}
    mounts: dict[str, Path] = {}
    try:
        for kind, name in buckets.items():
            url = em.make_bucket(name, owner="user", public=False)
            refresh = MountOptions(refresh_s=1)
            mounts[kind] = mount_bucket(url, kind, store_config, host_env, options=refresh).dst
        served = node_rc.served(host_env.mounts_base)[0]
        for dst in mounts.values():
            sock, fs = served[str(dst)]
            kept_ns = node_rc.rc(sock, "vfs/stats", {"fs": fs})["opt"]["DirCacheTime"]
            assert kept_ns >= 365 * 24 * 3600 * 10**9, kept_ns  # never stale on its own
        faults = {k: em.add_fault(k, bucket=buckets[k], seconds=FAULT_GUARD_S) for k in FAULT_KINDS}
        # The refresher's listings now meet the faults: wait until one has failed (403).
        sock, denied_fs = served[str(mounts["deny"])]
        log = Path(sock).parent / "refresher.log"
        wait_for(
            "the refresher to try to list (and fail)",
            lambda: f"refreshing {denied_fs}: failed" in (log.read_text() if log.exists() else ""),
            timeout=4,
            poll=0.05,
        )
        names = ["e-first.bin", "c-second.bin", "a-third.bin", "d-fourth.bin", "b-fifth.bin"]
        payloads: dict[str, dict[str, bytes]] = {}
        took: dict[str, float] = {}
        for kind, dst in mounts.items():
            payloads[kind] = {n: os.urandom((64 << 10) + i) for i, n in enumerate(names)}
            started = time.monotonic()
            for n in names:  # creation order is not name order
                with open(dst / n, "wb") as f:
                    f.write(payloads[kind][n])
            took[kind] = time.monotonic() - started
        record_property("create_5_files_s", json.dumps({k: round(t, 3) for k, t in took.items()}))
        lasted = [fault_events.lasts(em.store, f) for f in faults.values()]
        assert all(lasted), "a fault ended before the writer returned"
        # A held writer would take the faults' guard time; a local write, hundredths.
        assert max(took.values()) <= WRITE_S, took
        # None of them got through while the faults lasted.
        for kind in FAULT_KINDS:
            assert not [e for e in em.events(buckets[kind]) if e.key in names], kind
        for fault in faults.values():
            em.clear_faults(fault_id=fault["id"])
        for kind, dst in mounts.items():
            drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
            assert drain.returncode == 0, drain.stderr
            writes = [e for e in em.events(buckets[kind]) if e.op != "delete" and e.key in names]
            assert [e.key for e in writes] == names, (kind, writes)
            for n in names:
                assert em.read_object(buckets[kind], n) == payloads[kind][n], (kind, n)
                assert (dst / n).read_bytes() == payloads[kind][n], (kind, n)
            assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0
    finally:
        for name in buckets.values():
            em.clear_faults(bucket=name)
        unmount_and_delete(em, host_env, mounts.values(), buckets.values())


def test_a_mount_registered_while_another_lists_keeps_its_order_keeper(
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    host_env: RcloneEnv,
    unique_name: Callable[[str], str],
) -> None:
    """Two ordered mounts of one daemon, A and B: B is mounted and registered with the
    refresher while A's mount-time listing is held in the store (an outage on A's GETs).
    When A's listing ends and A registers, B stays registered: a mount that drops from the
    registry has no order keeper, and its uploads would never go."""
    em = store_emulator
    names = {k: unique_name(f"rg{k}") for k in ("a", "b")}
    urls = {k: em.make_bucket(n, owner="user", public=False) for k, n in names.items()}
    dsts: list[Path] = []
    storage_a = Storage.from_spec(name=None, source=urls["a"], store=None, mode="MOUNT_CACHED")
    storage_a.check(store_config)  # its probe lists A: before the outage
    dst_a = Path(host_env.mounts_base).parent / "reg-a"
    dsts.append(dst_a)
    outage = em.add_fault("outage", bucket=names["a"], method="GET", seconds=FAULT_GUARD_S)
    pool = ThreadPoolExecutor(1)
    try:
        mount_a = pool.submit(bash, storage_a.mount_command(str(dst_a), store_config, env=host_env))
        fault_events.wait_hits(em.store, outage, 1, timeout=60)
        # A is served once its daemon registers it; its listing stays held all the while.
        served = wait_for(
            "A to be served while its listing is held",
            lambda: (s := node_rc.served(host_env.mounts_base)[0]).get(str(dst_a)) and s,
            timeout=60,
        )
        assert not mount_a.done(), "A's mount did not wait for its listing"
        sock, fs_a = served[str(dst_a)]
        d = os.path.dirname(sock)
        dst_b = mount_bucket(urls["b"], "reg-b", store_config, host_env).dst
        dsts.append(dst_b)
        fs_b = node_rc.served(host_env.mounts_base)[0][str(dst_b)][1]
        assert fs_b in ordered_mounts(d), "B was not registered"
        assert not mount_a.done(), "A's mount did not wait for its listing"
        em.clear_faults(fault_id=outage["id"])
        assert mount_a.result(timeout=120).returncode == 0, mount_a.result().stderr
        assert set(ordered_mounts(d)) >= {fs_a, fs_b}, ordered_mounts(d)
        (dst_b / "kept.bin").write_bytes(b"b" * 1000)
        drain = bash(mounting.drain_command(str(dst_b), 60, host_env), timeout=120)
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert "no order keeper" not in drain.stdout + drain.stderr, drain.stderr
        assert em.read_object(names["b"], "kept.bin") == b"b" * 1000
    finally:
        em.clear_faults(bucket=names["a"])
        pool.shutdown(wait=True)
        unmount_and_delete(em, host_env, dsts, names.values())


def test_objects_others_add_show_up_after_a_refresh(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A MOUNT_CACHED mount keeps its listing, so an object another writer adds shows up
    only when the node's refresher lists the mount again: within the refresh period and one
    listing (here refresh_s=1; 12 s by default), never on its own."""
    refresh = MountOptions(refresh_s=1)
    storage, dst, _ = mount_bucket(bucket, "others", store_config, host_env, options=refresh)
    (dst / "mine.bin").write_bytes(b"m" * 1000)
    assert bash(mounting.drain_command(str(dst), 60, host_env)).returncode == 0
    store_emulator.write_object(storage.name, "theirs/added.txt", b"theirs")
    wait_for(  # in about 2 s; 30 s is a hang guard
        "another writer's object to show up",
        lambda: "theirs" in os.listdir(dst),
        timeout=30,
        poll=0.05,
    )
    assert (dst / "theirs" / "added.txt").read_bytes() == b"theirs"
    assert (dst / "mine.bin").read_bytes() == b"m" * 1000  # still there, whole
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0
