"""A node's cache disk running full: what rclone could not write, noted by the refresher when
rclone logs it, and said once by the next drain of that mount (and so in the job's log).

When a cached mount's disk is full of files not yet in the store, rclone fails the writer's
write or open with EIO (its FUSE layer turns ENOSPC into EIO) and logs "no space left on
device" with the cache path. Nothing closed before is lost: rclone never evicts a file that
is not uploaded, and frees uploaded ones at its next cache clean (every CachePollInterval).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

from skycore.node.mountd.journal import state_dir
from skycore.node.mountd.rc import RcError, rc

RECORDS = "cache-full.jsonl"
REPORTED = "cache-full-reported.json"
RECORDS_MAX_BYTES = 256 << 10
NOTE_EVERY_S = 1.0  # one record per mount per second at most (rclone retries an open 10 times)
MARK = "skycore: cache full:"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class CacheFullNotes:
    """Records, for the daemon whose folder is ``d``, the writes that failed for space."""

    def __init__(self, d: str) -> None:
        self.d = d
        self.sock = os.path.join(d, "rc.sock")
        self.path = os.path.join(state_dir(d), RECORDS)
        self._paths: dict[str, tuple[str, str]] = {}  # fs -> its cache data and metadata folders
        self._last: dict[str, float] = {}

    def _folders(self, fs: str) -> tuple[str, str]:
        if fs not in self._paths:
            stats = rc(self.sock, "vfs/stats", {"fs": fs}).get("diskCache") or {}
            self._paths[fs] = (str(stats.get("path") or ""), str(stats.get("pathMeta") or ""))
        return self._paths[fs]

    def note(self, cache_paths: list[str], mounts: list[str]) -> None:
        """Record the cache files of ``cache_paths`` that rclone could not write, for the VFS
        of ``mounts`` (VFS names) they belong to."""
        failed: dict[str, list[str]] = {}
        for fs in mounts:
            try:
                folders = [f for f in self._folders(fs) if f]
            except (OSError, RcError):
                continue
            for path in cache_paths:
                for folder in folders:
                    if path.startswith(folder.rstrip("/") + "/"):
                        name = path[len(folder.rstrip("/")) + 1 :]
                        if name not in failed.setdefault(fs, []):
                            failed[fs].append(name)
        now = time.monotonic()
        for fs, names in failed.items():
            if now - self._last.get(fs, -NOTE_EVERY_S) < NOTE_EVERY_S:
                continue
            self._last[fs] = now
            self._append(fs, names)

    def _append(self, fs: str, names: list[str]) -> None:
        try:
            queue = rc(self.sock, "vfs/queue", {"fs": fs}).get("queue") or []
        except (OSError, RcError):
            queue = []
        disk = os.statvfs(self.d)
        record = {
            "t": time.time(),
            "fs": fs,
            "names": names[:5],
            "waiting": len(queue),
            "waiting_bytes": sum(int(i.get("size") or 0) for i in queue),
            "disk_total": disk.f_blocks * disk.f_frsize,
            "disk_free": disk.f_bavail * disk.f_frsize,
        }
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with contextlib.suppress(OSError):
            if os.path.getsize(self.path) > RECORDS_MAX_BYTES:
                os.truncate(self.path, 0)
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")


def _records(d: str, fs: str, since: float) -> list[dict[str, Any]]:
    out = []
    try:
        with open(os.path.join(state_dir(d), RECORDS)) as f:
            lines = f.readlines()
    except OSError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("fs") == fs and float(record["t"]) > since:
            out.append(record)
    return out


def report(d: str, fs: str, dst: str) -> str | None:
    """One line saying that the cache of mount ``dst`` (VFS ``fs`` of the daemon folder
    ``d``) was full since the last report, and of what (None when it was not); the records
    it says are marked as said."""
    marks_path = os.path.join(state_dir(d), REPORTED)
    try:
        with open(marks_path) as f:
            marks = json.load(f)
    except (OSError, ValueError):
        marks = {}
    if not isinstance(marks, dict):
        marks = {}
    records = _records(d, fs, float(marks.get(fs, 0.0)))
    if not records:
        return None
    marks[fs] = max(float(r["t"]) for r in records)
    os.makedirs(os.path.dirname(marks_path), exist_ok=True)
    with open(marks_path + ".tmp", "w") as f:
        json.dump(marks, f)
    os.replace(marks_path + ".tmp", marks_path)
    first, last = records[0], records[-1]
    names: list[str] = []
    for r in records:
        names += [n for n in r.get("names", []) if n not in names]
    peak = max(records, key=lambda r: int(r.get("waiting_bytes") or 0))
    when = time.strftime("%H:%M:%S", time.gmtime(float(first["t"])))
    if last is not first:
        when += " to " + time.strftime("%H:%M:%S", time.gmtime(float(last["t"])))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"{MARK} {dst}: the node's cache disk ({_size(int(last['disk_total']))}) was full at "
        f"{when} UTC, with {peak['waiting']} file(s) ({_size(int(peak['waiting_bytes']))}) "
        f"waiting for the store; writing {shown} failed with EIO (rclone's mount turns ENOSPC "
        "into an I/O error). Files closed before were kept and go up in creation order; space "
        "comes back as uploads end (make resources.disk_size larger or write less at once)."
    )
