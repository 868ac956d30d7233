"""The drain rule (see the package docstring) and unmount."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time

from skycore.node.mountd.cachefull import MARK, report
from skycore.node.mountd.daemon import quit_if_idle
from skycore.node.mountd.keeper import OrderKeeper, hurry
from skycore.node.mountd.order import released
from skycore.node.mountd.rc import (
    BUSY_FUSE_POLLS,
    CONFIRM_POLLS,
    POLL_S,
    RCLONE_GONE,
    STABLE_POLLS,
    RcError,
    mountinfo,
    norm,
    rc,
    say,
    served,
    warn,
)
from skycore.node.mountd.refresher import ordered_mounts


def fuse_waiting(majmin: str | None) -> int | None:
    """FUSE requests of the connection ``majmin`` not yet answered (None: unknown)."""
    if not majmin:
        return None
    try:
        with open(f"/sys/fs/fuse/connections/{majmin.split(':')[1]}/waiting") as f:
            return int(f.read().strip())
    except (OSError, ValueError, IndexError):
        return None


def never_due(sock: str, fs: str) -> bool:
    """True if an upload of VFS ``fs`` waits with an ordered mount's write-back (rclone
    would never start it by itself): its mount is ordered, whatever the refresher knows."""
    try:
        queue = rc(sock, "vfs/queue", {"fs": fs}).get("queue") or []
    except (OSError, RcError):
        return False
    return not all(released(item) for item in queue)


def say_cache_full(sock: str, fs: str, dst: str) -> None:
    """Say once (``cachefull.report``) that the cache of ``dst`` was full since it last
    drained."""
    try:
        line = report(os.path.dirname(sock), fs, dst)
    except (OSError, ValueError, KeyError, TypeError) as e:
        line = f"{MARK} {dst}: could not read the cache-full records ({e})"
    if line:
        say(line)


def drain(base: str, timeout: float, dsts: list[str]) -> int:
    """The drain rule (see the module docstring) for every ``dst``; 0, 1 or 2."""
    table, _ = served(base)
    mounted = mountinfo()
    targets: dict[str, tuple[str, str, str | None]] = {}
    for dst in dsts:
        p = norm(dst)
        if p in table:
            sock, fs = table[p]
            targets[dst] = (sock, fs, mounted.get(p, ("", ""))[0] or None)
        elif p in mounted and mounted[p][1] == "fuse.rclone":
            warn(f"skycore: rclone serving {dst} {RCLONE_GONE}")
            return 2
        else:
            say(f"skycore: no rclone serving {dst}; nothing to drain")
    deadline = time.monotonic() + timeout
    clean = dict.fromkeys(targets, 0)
    busy_fuse = dict.fromkeys(targets, 0)
    last_print: dict[str, int] = {}
    pending: dict[str, tuple[int, int]] = {}
    keepers: dict[str, OrderKeeper] = {}
    for dst, (sock, fs, _) in targets.items():
        hold = ordered_mounts(os.path.dirname(sock)).get(fs)
        if hold is not None:  # released here too, one at a time, if the refresher is late
            keepers[dst] = OrderKeeper(sock, fs, hold)
    while targets:
        for dst, (sock, fs, majmin) in list(targets.items()):
            waiting = fuse_waiting(majmin)  # first the kernel's queue, then rclone's
            try:
                stats = rc(sock, "vfs/stats", {"fs": fs})
            except OSError as e:
                warn(f"skycore: rclone serving {dst} {RCLONE_GONE}: {e}")
                return 2
            except RcError as e:
                warn(f"skycore: unexpected vfs/stats for {dst}: {e}")
                return 2
            cache = stats.get("diskCache")
            q, up = (cache["uploadsQueued"], cache["uploadsInProgress"]) if cache else (0, 0)
            pending[dst] = (q, up)
            if waiting:
                busy_fuse[dst] += 1
            if q or up:
                clean[dst] = 0
                if dst not in keepers and never_due(sock, fs):  # an unregistered ordered mount
                    warn(f"skycore: {dst} is ordered but has no order keeper; releasing here")
                    keepers[dst] = OrderKeeper(sock, fs)
                if dst in keepers:
                    with contextlib.suppress(OSError, RcError):
                        keepers[dst].poll()
                elif q:  # those that only wait for the write-back delay go now
                    hurry(sock, fs)
                now = int(time.monotonic())
                if last_print.get(dst) != now:
                    last_print[dst] = now
                    left = int(deadline - time.monotonic())
                    say(f"skycore: draining {dst}: {q} queued, {up} uploading ({left}s left)")
            elif not waiting or busy_fuse[dst] > BUSY_FUSE_POLLS:
                clean[dst] += 1
            need = STABLE_POLLS if waiting is None else CONFIRM_POLLS
            if clean[dst] >= need:
                say(f"skycore: {dst} drained")
                say_cache_full(sock, fs, dst)
                del targets[dst]
        if targets and time.monotonic() > deadline:
            for dst, (sock, fs, _) in targets.items():
                q, up = pending.get(dst, (0, 0))
                warn(f"skycore: timed out draining {dst}: {q} queued, {up} uploading")
                say_cache_full(sock, fs, dst)
            return 1
        if targets:
            time.sleep(POLL_S)
    return 0


def lazy_unmount(path: str) -> None:
    for cmd in (["fusermount3", "-uz", path], ["fusermount", "-uz", path], ["umount", "-l", path]):
        try:
            if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
                return
        except OSError:
            continue


def cmd_unmount(base: str, timeout: float, dsts: list[str]) -> int:
    """Drain each ``dst``, then unmount it; refuse (1) with uploads pending. A mount whose
    rclone is gone is unmounted lazily (its cache stays on disk for the next mount). A daemon
    left without mounts quits (its cache index is then saved)."""
    status = 0
    for dst in dsts:
        p = norm(dst)
        if p not in mountinfo():
            say(f"skycore: {dst} is not mounted")
            continue
        rc_ = drain(base, timeout, [dst])
        if rc_ == 1:
            warn(f"skycore: not unmounting {dst}: uploads are still pending")
            status = 1
            continue
        if rc_ == 2:
            warn(f"skycore: rclone for {dst} is gone; unmounting the stale mount lazily")
            lazy_unmount(p)
            continue
        sock = served(base)[0].get(p, ("", ""))[0]
        try:
            rc(sock, "mount/unmount", {"mountPoint": p}, timeout=60)
        except (OSError, RcError) as e:
            warn(f"skycore: rclone could not unmount {dst} ({e}); unmounting it directly")
            for cmd in (["fusermount3", "-u", p], ["umount", p]):
                if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
                    break
        say(f"skycore: unmounted {dst}")
        quit_if_idle(sock)
    return status
