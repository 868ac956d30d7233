"""What wakes a node's mount daemons up: inotify on a daemon's folder and a pidfd on its rclone.

A daemon's refresher (``refresher.cmd_refresher``) sleeps in ``DaemonWatch.wait`` until one of
these happens, instead of asking rclone every few milliseconds whether anything changed:

- rclone wrote to its log (``rclone.log``, at INFO): a file was closed ("queuing for
  upload"), an upload ended ("upload succeeded", "failed to upload", "upload canceled"), a
  cache file was removed, or the cache disk was full ("no space left on device");
- an upload hold (``holds/<digest>.<pid>.<thread>``, a refresh listing the mount) ended;
- the registry of mounts (``refresh.json``) was replaced, or a thread of this process pokes;
- the daemon's process ended (a pidfd), or a timer that the caller asked for ran out.

Lines rclone's cache cleaner writes every poll interval ("vfs cache: cleaned:") wake nobody:
on an idle node they are the only lines. Without inotify (a node whose python3 has no
ctypes) ``wait`` returns after the caller's fallback period, so the keepers poll as before.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import struct
import threading
from dataclasses import dataclass, field
from typing import BinaryIO

IN_MODIFY = 0x00000002
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")
LOG_NAME = "rclone.log"
REGISTRY_NAME = "refresh.json"
HOLDS_DIR = "holds"
NO_SPACE = "no space left on device"
_NO_SPACE_PATH = re.compile(r"(/\S+): " + NO_SPACE)
_QUIET_LINE = "vfs cache: cleaned:"  # the cleaner's periodic line: nothing happened
_QUEUED = ": vfs cache: queuing for upload"
# "2026/12/05 11:04:32 INFO  : dir/ckpt.bin: vfs cache: upload succeeded try #1"
_SUCCEEDED = re.compile(r"^\S+ \S+ INFO\s+: (.+): vfs cache: upload succeeded try #\d+$")
READ_MAX = 1 << 20  # the most of rclone's log read at once


class Inotify:
    """A non-blocking inotify instance (libc through ctypes); OSError when there is none."""

    def __init__(self) -> None:
        import ctypes

        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd: int = fd

    def watch(self, path: str, mask: int) -> int:
        """Watch ``path`` for ``mask``; the watch descriptor (OSError when it fails)."""
        import ctypes

        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path} failed")
        return int(wd)

    def read(self) -> list[tuple[int, int, str]]:
        """The pending events: (watch descriptor, mask, name) each; [] when none."""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        out, pos = [], 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, pos)
            raw = data[pos + _EVENT.size : pos + _EVENT.size + size]
            out.append((wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
            pos += _EVENT.size + size
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass
class Woken:
    """Why ``DaemonWatch.wait`` returned (all False: the timeout ran out)."""

    uploads: bool = False  # rclone logged an upload-queue event (any of the below)
    queued: bool = False  # ... a file closed ("queuing for upload")
    ended: bool = False  # ... anything else: an upload failed, was cancelled, a file removed
    succeeded: list[str] = field(default_factory=list)  # files whose upload succeeded
    holds_ended: set[str] = field(default_factory=set)  # digests of the mounts whose hold ended
    registry: bool = False  # the mounts' registry changed, or a thread poked
    gone: bool = False  # the daemon's process ended
    no_space: list[str] = field(default_factory=list)  # cache paths rclone could not write


class DaemonWatch:
    """The wake-ups of the daemon whose folder is ``d`` (see the module docstring)."""

    def __init__(self, d: str) -> None:
        self.d = d
        self.log_path = os.path.join(d, LOG_NAME)
        self.holds = os.path.join(d, HOLDS_DIR)
        os.makedirs(self.holds, exist_ok=True)
        self.notify: Inotify | None
        try:
            self.notify = Inotify()
            self.notify.watch(d, IN_MODIFY | IN_CREATE | IN_MOVED_TO)
            self.holds_wd = self.notify.watch(self.holds, IN_DELETE)
        except (OSError, AttributeError, ImportError):
            self.notify = None
        self._poke_r, self._poke_w = os.pipe()
        os.set_blocking(self._poke_r, False)
        self._lock = threading.Lock()
        self.pidfd: int | None = None
        self._log: BinaryIO | None = None
        self._log_ino = 0
        self._partial = b""
        self._open_log(at_end=True)

    @property
    def evented(self) -> bool:
        """True when events wake ``wait`` (False: only its timeout does)."""
        return self.notify is not None

    def follow_pid(self, pid: int) -> bool:
        """Wake ``wait`` (``gone``) when process ``pid`` ends; False when it cannot."""
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None
        opener = getattr(os, "pidfd_open", None)
        if opener is None:
            return False
        try:
            self.pidfd = opener(pid)
        except OSError:
            return False
        return True

    def poke(self) -> None:
        """Wake ``wait`` from another thread (it reports ``registry``)."""
        with contextlib.suppress(OSError):
            os.write(self._poke_w, b"x")

    def wait(self, timeout: float | None) -> Woken:
        """Sleep until an event or ``timeout`` seconds (None: no timeout); what happened."""
        fds = [self._poke_r]
        if self.notify is not None:
            fds.append(self.notify.fd)
        if self.pidfd is not None:
            fds.append(self.pidfd)
        woken = Woken()
        ready, _, _ = select.select(fds, [], [], None if timeout is None else max(0.0, timeout))
        if self._poke_r in ready:
            with contextlib.suppress(OSError):
                os.read(self._poke_r, 4096)
            woken.registry = True
        if self.pidfd is not None and self.pidfd in ready:
            woken.gone = True
        if self.notify is not None and self.notify.fd in ready:
            log_changed = False
            for wd, _mask, name in self.notify.read():
                if wd == self.holds_wd:
                    woken.holds_ended.add(name.split(".", 1)[0])
                elif name == LOG_NAME:
                    log_changed = True
                elif name == REGISTRY_NAME:
                    woken.registry = True
            if log_changed:
                self._read_log(woken)
        return woken

    def _open_log(self, at_end: bool) -> None:
        """Follow ``rclone.log`` as it is now (from its end, or from its start)."""
        try:
            f = open(self.log_path, "rb")  # noqa: SIM115 (kept open to follow it)
        except OSError:
            return
        if at_end:
            f.seek(0, os.SEEK_END)
        if self._log is not None:
            self._log.close()
        self._log, self._log_ino, self._partial = f, os.fstat(f.fileno()).st_ino, b""

    def _read_log(self, woken: Woken) -> None:
        """Read what rclone appended (across a rotation: the old file to its end, then the new
        one from its start) and note what it means in ``woken``."""
        try:
            ino = os.stat(self.log_path).st_ino
        except OSError:
            ino = self._log_ino
        chunks: list[bytes] = []
        if self._log is not None:
            chunks.append(self._log.read(READ_MAX))
        if ino != self._log_ino or self._log is None:
            self._open_log(at_end=False)
            if self._log is not None:
                chunks.append(self._log.read(READ_MAX))
        text = self._partial + b"".join(chunks)
        lines, _, self._partial = text.rpartition(b"\n")
        for raw in lines.split(b"\n"):
            line = raw.decode("utf-8", "replace")
            if not line or _QUIET_LINE in line:
                continue
            if NO_SPACE in line:
                m = _NO_SPACE_PATH.search(line)
                if m:
                    woken.no_space.append(m.group(1))
            if "vfs cache" not in line and NO_SPACE not in line:
                continue
            woken.uploads = True
            if _QUEUED in line:
                woken.queued = True
                continue
            m = _SUCCEEDED.search(line)
            if m:
                woken.succeeded.append(m.group(1))
            else:
                woken.ended = True

    def close(self) -> None:
        for fd in (self._poke_r, self._poke_w, self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.notify is not None:
            self.notify.close()
        if self._log is not None:
            self._log.close()
