"""A node's mount step (``up-many`` with a request): make every mount point ready, mount the
requests that are not live yet and make the COPY snapshots in one run, then serialize the
FUSE releases of ordered mounts.

The request (JSON): ``{"base": BASE, "mounts": [SPEC...], "copies": [COPY...]}``; a SPEC is
what ``up.cmd_up_many`` takes plus ``remote`` and ``mode`` (for the message) and ``serialize``
(the fusectl setting of its FUSE connection to set to 1, '' for none).

A live mount is left alone; a stale one (rclone gone) is lazily unmounted first; files in a
mount point that is not mounted (stray local writes) are moved aside to
``<dst>.skycore-stray-<time>`` with a warning, never deleted and never blocking the mount.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import time
from typing import Any

from skycore.node.mountd.drain import cmd_unmount
from skycore.node.mountd.rc import mountinfo, norm, say, warn
from skycore.node.mountd.up import cmd_up_many, live_mounts

ALREADY_LIVE = 3  # prep: the mount point is mounted and served by an answering daemon
FUSECTL = "/sys/fs/fuse/connections"


def expand(path: str) -> str:
    """``path`` with a leading ``~`` (``~`` or ``~/...``) made ``$HOME``."""
    if path == "~" or path.startswith("~/"):
        return os.environ.get("HOME", "") + path[1:]
    return path


def is_mounted(path: str) -> bool:
    return norm(path) in mountinfo()


def _quiet(argv: list[str], stderr: bool = False) -> bool:
    """Run ``argv`` (its output hidden, stderr shown with ``stderr``); True when it worked."""
    try:
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=None if stderr else subprocess.DEVNULL
        )
    except OSError:
        return False
    return done.returncode == 0


def _make_dir(dst: str) -> bool:
    """Create the folder ``dst`` (and its parents); False, having said why, if it cannot be."""
    try:
        os.makedirs(dst, exist_ok=True)
    except OSError as e:
        warn(f"skycore: {dst}: {e}")
        return False
    return True


def prep(dst: str, live_now: set[str]) -> int:
    """Make mount point ``dst`` ready: 0 (mount it), ALREADY_LIVE, or 1 (failed)."""
    if is_mounted(dst):
        if _quiet(["timeout", "10", "stat", dst]) and dst in live_now:
            say(f"skycore: {dst} is already mounted")
            return ALREADY_LIVE
        warn(f"skycore: {dst} holds a stale mount; unmounting it lazily")
        if not (
            _quiet(["fusermount3", "-uz", dst])
            or _quiet(["fusermount", "-uz", dst])
            or _quiet(["umount", "-l", dst], stderr=True)
        ):
            return 1
    if not _make_dir(dst):
        return 1
    try:
        empty = not os.listdir(dst)
    except OSError:
        empty = True
    if not empty:
        stray = f"{dst}.skycore-stray-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        if not _quiet(["mv", dst, stray], stderr=True):
            return 1
        if not _make_dir(dst):
            return 1
        warn(
            f"skycore: warning: {dst} held files that are not in the bucket (written while it "
            f"was not mounted); they were moved aside to {stray}, not deleted"
        )
    return 0


def serialize_releases(base: str, dst: str, setting: str) -> bool:
    """Make the kernel send the FUSE RELEASE requests of the mount at ``dst`` one at a time
    (``setting`` of its fusectl connection set to 1, and read back). If that cannot be done
    the fresh mount is undone and False returned: order is a promise, never a warning."""
    majmin = mountinfo().get(norm(dst), ("", ""))[0]
    conn = f"{FUSECTL}/{majmin.split(':')[1] if ':' in majmin else ''}"
    if not os.path.isdir(conn):
        _quiet(["mount", "-t", "fusectl", "fusectl", FUSECTL])
    try:
        with open(f"{conn}/{setting}", "w") as f:
            f.write("1\n")
        with open(f"{conn}/{setting}") as f:
            ok = f.read().strip() == "1"
    except OSError:
        ok = False
    if not ok:
        warn(
            f"skycore: cannot serialize FUSE releases for {dst} (writing 1 to {conn}/{setting} "
            "failed: fusectl is not mounted or is read-only), so uploads could leave in another "
            "order than the files were closed; the mount is undone. Run nodes with a writable "
            f"{FUSECTL}, or set transfers > 1 on this mount to accept unordered uploads."
        )
        sink = io.StringIO()
        with (
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            contextlib.suppress(Exception),
        ):
            cmd_unmount(base, 10, [dst])
        if is_mounted(dst) and not _quiet(["fusermount3", "-u", dst]):
            _quiet(["umount", "-l", dst], stderr=True)
        return False
    with contextlib.suppress(OSError), open(f"{conn}/congestion_threshold", "w") as f:
        f.write("1\n")
    return True


def daemon_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``specs`` as ``up.cmd_up_many`` takes them (``transfers`` a command-line word)."""
    return [{**s, "transfers": str(s["transfers"])} for s in specs]


def mount_many(request: dict[str, Any]) -> int:
    """The mount step of ``request`` (see the module docstring): 0 when every mount answers
    and every copy is made, 1 otherwise (the first mount point that cannot be made ready
    stops the step before anything is mounted)."""
    base = request["base"]
    mounts = daemon_specs(request.get("mounts") or [])
    copies = daemon_specs(request.get("copies") or [])
    dsts = [expand(m["dst"]) for m in mounts]
    already = [d for d in dsts if is_mounted(d)]
    live_now = set(live_mounts(base, already)) if already else set()
    up: list[int] = []
    for i, dst in enumerate(dsts):
        code = prep(dst, live_now)
        if code == 0:
            up.append(i)
        elif code != ALREADY_LIVE:
            return code
    if up or copies:
        args = ["--copies", json.dumps(copies)] if copies else []
        if cmd_up_many(json.dumps(mounts), *args, *map(str, up)) != 0:
            return 1
    for i in up:
        spec = mounts[i]
        if spec.get("serialize") and not serialize_releases(base, dsts[i], spec["serialize"]):
            return 1
        say(f"skycore: mounted {spec['remote']} at {dsts[i]} ({spec['mode']})")
    return 0
