"""Mount many requests and make COPY snapshots in one run (``up-many``), and the live probe."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from skycore.node.mountd.copying import copy_one
from skycore.node.mountd.daemon import cmd_mount, retire, start_daemon, wait_mounted
from skycore.node.mountd.rc import RcError, mountinfo, norm, say, served, warn
from skycore.node.mountd.refresher import keep_listing, spawn_refresher

GiB = 1 << 30
CACHE_MAX = 10 * GiB  # SkyPilot's default --vfs-cache-max-size
CACHE_SHARE = 2  # ... or 1/2 of the node's cache disk, when that is less
MIN_FREE_MAX = 1 * GiB  # uploaded files go once the disk has less free than this ...
MIN_FREE_SHARE = 10  # ... or 1/10 of it, when that is less


def cache_bounds(vfs: dict[str, Any], d: str) -> dict[str, Any]:
    """``vfs`` (a mount's vfsOpt) with the bounds of a cached mount's cache on the disk that
    holds the daemon folder ``d``: CacheMaxSize, when the entry set none, min(10 GiB, half the
    disk); CacheMinFreeSpace min(1 GiB, a tenth of it), so that several mounts sharing the
    disk never fill it with files already in the store. rclone never evicts a file that is
    open or not yet uploaded, whatever the bounds."""
    if vfs.get("CacheMode") != "full":
        return vfs
    try:
        disk = os.statvfs(d)
    except OSError:
        return vfs
    total = disk.f_blocks * disk.f_frsize
    out = {"CacheMinFreeSpace": min(MIN_FREE_MAX, total // MIN_FREE_SHARE), **vfs}
    out.setdefault("CacheMaxSize", min(CACHE_MAX, total // CACHE_SHARE))
    return out


def cmd_up_many(specs_json: str, *args: str) -> int:
    """Mount the requests ``INDEX...`` of ``specs_json`` (a JSON list of {rclone, config, dir,
    transfers, extra, fs, dst, vfs, mount}) and make the COPY snapshots of ``--copies
    COPIES_JSON`` (see ``copy_many``): each daemon started once, every mount/mount call and
    copy issued at once, then wait until every mount point answers (one process for all
    the mounts and copies of a node: python's and rclone's start-ups were most of a node's
    mounting CPU)."""
    copies: list[dict[str, Any]] = []
    indices = list(args)
    if indices[:1] == ["--copies"]:
        copies = json.loads(indices[1])
        indices = indices[2:]
    specs = json.loads(specs_json)
    todo = [specs[int(i)] for i in indices]
    daemons: dict[str, dict[str, Any]] = {}
    for s in [*todo, *copies]:
        daemons.setdefault(s["dir"], s)
    for d, s in daemons.items():
        if start_daemon(s["rclone"], s["config"], d, s["transfers"], *s["extra"]) is None:
            return 1
    failed: list[dict[str, Any]] = []
    copy_failed: list[dict[str, Any]] = []

    refreshed: set[str] = set()

    def one(s: dict[str, Any]) -> None:
        sock = os.path.join(s["dir"], "rc.sock")
        vfs, mnt = json.dumps(cache_bounds(s["vfs"], s["dir"])), json.dumps(s["mount"])
        config = json.dumps(s.get("rc_config") or {})
        if cmd_mount(sock, s["fs"], s["dst"], vfs, mnt, config) != 0 or not wait_mounted(s["dst"]):
            failed.append(s)
            return
        if s.get("refresh") is None:
            return
        try:
            if keep_listing(s["dir"], s["dst"], float(s["refresh"]), s.get("order")):
                refreshed.add(s["dir"])
        except (OSError, RcError) as e:
            warn(f"skycore: warning: {s['dst']} is mounted but not listed ({e})")

    def copy(c: dict[str, Any]) -> None:
        if not copy_one(os.path.join(c["dir"], "rc.sock"), c["sources"], c["dst"]):
            copy_failed.append(c)

    threads = [threading.Thread(target=one, args=(s,)) for s in todo]
    threads += [threading.Thread(target=copy, args=(c,)) for c in copies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in failed:
        log = os.path.join(s["dir"], "rclone.log")
        warn(f"skycore: rclone failed to mount {s['dst']}; last lines of {log}:")
        try:
            with open(log, errors="replace") as f:
                warn("".join(f.readlines()[-20:]))
        except OSError:
            pass
    for d in refreshed:
        spawn_refresher(d)
    # The copies' daemon serves no mount: it quits now, giving its memory back.
    for d in {c["dir"] for c in copies}:
        if not any(s["dir"] == d for s in todo):
            retire(os.path.join(d, "rc.sock"))
    return 1 if failed or copy_failed else 0


def cmd_copy_many(copies_json: str) -> int:
    """The COPY snapshots of ``copies_json`` alone (``up-many`` with no mount)."""
    return cmd_up_many("[]", "--copies", copies_json)


def live_mounts(base: str, dsts: list[str]) -> list[str]:
    """The ``dsts`` mounted and served by an answering daemon (the live-mount probe)."""
    table, _ = served(base)
    mounted = mountinfo()
    out = []
    for dst in dsts:
        p = norm(dst)
        if p in table and p in mounted:
            try:
                os.stat(p)
            except OSError:
                continue
            out.append(dst)
    return out


def cmd_live(base: str, dsts: list[str]) -> int:
    """Print ``SKYCORE_LIVE <dst>`` for each ``dst`` mounted and served by an answering
    daemon."""
    for dst in live_mounts(base, dsts):
        say("SKYCORE_LIVE " + dst)
    return 0
