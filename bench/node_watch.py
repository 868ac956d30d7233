"""Watch a cluster's head node from the host while a job runs, without running anything in
the node: its cache disk (``resources.disk_size``, loop-mounted on the host), its rclone
daemon's rc socket and log on that disk, and its container's cgroup.

Every ``every`` seconds (monotonic) a thread samples the mount cache's size as rclone counts
it (rc ``vfs/stats``: bytes used, uploads queued and in progress), the disk's used bytes
(statvfs), the CPU-seconds of the node's cgroup (bench/node_idle.py's reading), and reads
what rclone added to its log (every cache cleaner line, and up to KEEP_LINES others, with the
time it was read). A node that is replaced (a preemption, then the recovery's new node with a
new disk) is a new ``Node`` record: what the old one logged up to its last sample is kept.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node_idle import cgroup_cpu_s
from training_model import CLEANED_RE

DAEMON = "rcd-t1"  # the daemon of ordered mounts (transfers 1)
KEEP_LINES = 2000


@dataclass
class Sample:
    """One look at the node (None: not readable then)."""

    t: float
    cache_bytes: int | None
    queued: int | None
    uploading: int | None
    disk_used: int | None
    cpu_s: float | None


@dataclass
class Node:
    """One node's life as watched: its container, samples and cleaner lines."""

    container: str
    disk_total: int | None = None
    samples: list[Sample] = field(default_factory=list)
    cleaner: list[tuple[float, str]] = field(default_factory=list)
    """(monotonic time it was read, the cleaner line), oldest first."""
    log_lines: int = 0
    no_space_lines: int = 0
    other_lines: list[tuple[float, str]] = field(default_factory=list)
    """(time it was read, line) of rclone's other log lines (uploads, errors), at most
    ``KEEP_LINES`` of them: the evidence when a run goes wrong (the node's disk goes with it)."""

    def cpu_per_minute(self) -> float | None:
        """CPU-seconds per minute of its cgroup over the samples that read it."""
        cpu = [(s.t, s.cpu_s) for s in self.samples if s.cpu_s is not None]
        if len(cpu) < 2 or cpu[-1][0] <= cpu[0][0]:
            return None
        return (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0]) * 60

    def peak(self, attr: str) -> int | None:
        values = [getattr(s, attr) for s in self.samples if getattr(s, attr) is not None]
        return max(values) if values else None

    def as_json(self, t0: float) -> dict[str, Any]:
        cpu = [(s.t, s.cpu_s) for s in self.samples if s.cpu_s is not None]
        return {
            "container": self.container,
            "disk_total_bytes": self.disk_total,
            "samples": len(self.samples),
            "watched_s": round(self.samples[-1].t - self.samples[0].t, 3) if self.samples else 0,
            "cpu_s": round(cpu[-1][1] - cpu[0][1], 3) if len(cpu) >= 2 else None,
            "cpu_s_per_min": _round(self.cpu_per_minute()),
            "peak_cache_bytes": self.peak("cache_bytes"),
            "peak_disk_used_bytes": self.peak("disk_used"),
            "cleaner_lines": [(round(t - t0, 3), line) for t, line in self.cleaner],
            "rclone_log_lines": self.log_lines,
            "no_space_lines": self.no_space_lines,
            "rclone_other_lines": [(round(t - t0, 3), line) for t, line in self.other_lines],
        }


def _round(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


class NodeWatch:
    """Samples node 0 of ``cluster`` every ``every`` seconds in a thread (``start``/``stop``).
    ``mounts_dir`` gives the host folder bound into the node (its disk's ``fs/mounts``),
    ``container`` the node's container (or None): (name, init pid)."""

    def __init__(
        self,
        mounts_dir: Any,
        container: Any,
        mount_point: str,
        every: float = 0.5,
    ) -> None:
        self._mounts_dir = mounts_dir
        self._container = container
        self.mount_point = mount_point
        self.every = every
        self.nodes: list[Node] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)
        self._pid: int | None = None
        self._last_pid: int | None = None
        self._log: tuple[int, int] | None = None  # (inode, offset) of rclone.log read so far
        self._partial = b""
        self._fs: str | None = None
        self.errors: list[str] = []

    def start(self) -> NodeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                self._sample()
            except Exception as e:  # a node going away mid-sample: keep watching
                if len(self.errors) < 50:
                    self.errors.append(f"{type(e).__name__}: {e}")
            self._stop.wait(max(0.0, self.every - (time.monotonic() - t)))

    def _node(self) -> Node | None:
        """The node now (a new record when its container changed); None while there is none."""
        if self._pid is None or not Path(f"/proc/{self._pid}").exists():
            found = self._container()
            if found is None:
                self._pid = None
                return None
            name, pid = found
            if pid != self._last_pid:  # a new container (a recovery's node has the same name)
                self.nodes.append(Node(name))
                self._log, self._partial, self._fs = None, b"", None
            self._pid = self._last_pid = pid
        return self.nodes[-1] if self.nodes else None

    def _sample(self) -> None:
        node = self._node()
        if node is None:
            return
        t = time.monotonic()
        cpu = cgroup_cpu_s(self._pid) if self._pid else None
        base = Path(self._mounts_dir())
        disk_used = None
        with contextlib.suppress(OSError):
            st = os.statvfs(base)
            node.disk_total = st.f_blocks * st.f_frsize
            disk_used = (st.f_blocks - st.f_bfree) * st.f_frsize
        stats = self._vfs_stats(base / DAEMON)
        self._read_log(node, base / DAEMON / "rclone.log")
        node.samples.append(
            Sample(
                t,
                stats.get("bytesUsed"),
                stats.get("uploadsQueued"),
                stats.get("uploadsInProgress"),
                disk_used,
                cpu,
            )
        )

    def _vfs_stats(self, daemon: Path) -> dict[str, Any]:
        """rclone's diskCache figures of the mount (empty when it does not answer)."""
        from skycore.node.mountd.rc import RcError, rc

        sock = daemon / "rc.sock"
        if not sock.exists():
            return {}
        # A unix socket's path is limited to 107 bytes: reach it through a folder's fd.
        fd = os.open(daemon, os.O_PATH)
        try:
            short = f"/proc/self/fd/{fd}/rc.sock"
            try:
                if self._fs is None:
                    mounts = rc(short, "mount/listmounts", timeout=5).get("mountPoints") or []
                    for m in mounts:
                        if m.get("MountPoint") == self.mount_point:
                            self._fs = str(m["Fs"])
                if self._fs is None:
                    return {}
                out = rc(short, "vfs/stats", {"fs": self._fs}, timeout=5)
            except (OSError, RcError):
                return {}
        finally:
            os.close(fd)
        cache = out.get("diskCache") or {}
        return cache if isinstance(cache, dict) else {}

    def _read_log(self, node: Node, path: Path) -> None:
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed below)
        except OSError:
            return
        with f:
            inode = os.fstat(f.fileno()).st_ino
            if self._log is None or self._log[0] != inode:
                self._log, self._partial = (inode, 0), b""  # a new or rotated log
            f.seek(self._log[1])
            chunk = f.read()
            self._log = (inode, self._log[1] + len(chunk))
        now = time.monotonic()
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            line = raw.decode(errors="replace")
            node.log_lines += 1
            if CLEANED_RE.search(line):
                node.cleaner.append((now, line))
                continue
            if "no space left on device" in line:
                node.no_space_lines += 1
            if len(node.other_lines) < KEEP_LINES:
                node.other_lines.append((now, line))
