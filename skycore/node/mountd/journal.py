"""The close order of an ordered mount's uploads, on the node's disk, so that it outlives the
rclone daemon.

rclone numbers the uploads it queues (its write-back id) in the order their files were
closed, and the order keeper releases them by that number. A daemon that dies (SIGKILL, OOM)
leaves its closed files in its cache folder; the next daemon finds them by walking that folder
and queues them again in NAME order. So every order keeper writes down, under the queue lock
and before it releases anything, each upload it sees for the first time: one line
``[daemon pid, write-back id, file name]`` in ``<daemon dir>/keeper/<digest of the VFS>.order``.
The rank of an upload is its line's number.

When a new daemon's first look finds uploads it does not know (the files a dead daemon
left), they take the rank of their name's newest line, and the journal is rewritten with
them in that order. A left file with no line was closed after the last look of the dead
daemon's keepers, so after every file with one: those go last, oldest data file first (their
cache file's modification time). When the queue is empty the journal is emptied.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

KEEPER_DIR = "keeper"
START = 0  # the write-back id of a daemon's start line (rclone's ids start at 1)


def state_dir(d: str) -> str:
    """The folder of a daemon's keeper state (journals, cache-full records)."""
    return os.path.join(d, KEEPER_DIR)


def digest(fs: str) -> str:
    """A short stable name for VFS ``fs``."""
    return hashlib.sha256(fs.encode()).hexdigest()[:16]


class CloseOrder:
    """The journal of VFS ``fs`` of the daemon whose folder is ``d``. Use it only under the
    daemon's queue lock (``keeper.queue_lock``): every keeper of the node, in any process,
    reads and appends the same file."""

    def __init__(self, d: str, fs: str) -> None:
        self.path = os.path.join(state_dir(d), digest(fs) + ".order")
        self._ino = -1
        self._offset = 0
        self._lines = 0
        self._by_item: dict[tuple[int, int], int] = {}
        self._by_name: dict[str, int] = {}
        self._started: set[int] = set()

    def _reset(self) -> None:
        self._offset = self._lines = 0
        self._by_item, self._by_name, self._started = {}, {}, set()

    def _load(self) -> None:
        """Read what was appended since the last call (all of it after a rewrite)."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._reset()
            self._ino = -1
            return
        if st.st_ino != self._ino or st.st_size < self._offset:
            self._reset()
            self._ino = st.st_ino
        if st.st_size == self._offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        for raw in data[:end].splitlines():
            try:
                pid, item_id, name = json.loads(raw)
            except (ValueError, TypeError):
                continue
            self._note(int(pid), int(item_id), str(name))
        self._offset += end

    def _note(self, pid: int, item_id: int, name: str) -> None:
        rank = self._lines
        self._lines += 1
        if item_id == START:
            self._started.add(pid)
            return
        self._by_item[(pid, item_id)] = rank
        self._by_name[name] = rank

    def _write(self, lines: list[tuple[int, int, str]], replace: bool) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        text = "".join(json.dumps(list(line)) + "\n" for line in lines)
        if replace:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.path)
            self._reset()
            self._ino = os.stat(self.path).st_ino
        else:
            with open(self.path, "a") as f:
                f.write(text)
        for line in lines:
            self._note(*line)
        self._offset = os.stat(self.path).st_size

    def ranks(
        self, queue: list[dict[str, Any]], pid: int, cache_path: Callable[[], str] = lambda: ""
    ) -> dict[int, int]:
        """{write-back id: rank} of every item of ``queue`` (rclone ``vfs/queue``) of the
        daemon ``pid``, writing down the items seen for the first time. ``cache_path``: the
        VFS's cache data folder (rclone ``vfs/stats`` diskCache.path), asked for only when it
        orders left files that have no line."""
        self._load()
        if not queue:
            if self._lines > 1 or pid not in self._started:
                self._write([(pid, START, "")], replace=True)
            return {}
        items = sorted(queue, key=lambda i: int(i["id"]))
        if pid not in self._started:
            self._adopt(items, pid, cache_path)
        new = [(pid, int(i["id"]), str(i["name"])) for i in items
               if (pid, int(i["id"])) not in self._by_item]  # fmt: skip
        if new:
            self._write(new, replace=False)
        return {int(i["id"]): self._by_item[(pid, int(i["id"]))] for i in items}

    def _adopt(self, items: list[dict[str, Any]], pid: int, cache_path: Callable[[], str]) -> None:
        """The first look of daemon ``pid``: rewrite the journal with the items it queued at
        its start (a dead daemon's files) in their close order."""
        known = [i for i in items if str(i["name"]) in self._by_name]
        known.sort(key=lambda i: self._by_name[str(i["name"])])
        unknown = [i for i in items if str(i["name"]) not in self._by_name]
        folder = cache_path() if unknown else ""

        def closed_at(item: dict[str, Any]) -> tuple[float, int]:
            with contextlib.suppress(OSError):
                return os.stat(os.path.join(folder, str(item["name"]))).st_mtime, int(item["id"])
            return float("inf"), int(item["id"])

        unknown.sort(key=closed_at)
        lines = [(pid, START, "")]
        lines += [(pid, int(i["id"]), str(i["name"])) for i in known + unknown]
        self._write(lines, replace=True)
