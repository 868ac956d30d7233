"""Node disks: a real filesystem of ``resources.disk_size`` GiB per node for its mount caches.

Each disk is a sparse ext4 image (no reserved blocks, so a 1 GiB disk holds about 1 GiB),
loop-mounted on the host and bound into the node at ``NODE_MOUNTS_BASE``:

    $SKYCORE_HOME/node-disks/<cluster>/<rank>/disk.img     the image
    $SKYCORE_HOME/node-disks/<cluster>/<rank>/fs/          its loop mount
    $SKYCORE_HOME/node-disks/<cluster>/<rank>/fs/mounts/   what the node sees

A disk is made when its node is created (a stale one of a vanished node of the same name is
replaced, never reused), unmounted when its node stops and mounted again before it starts
(the image keeps the data, like a cloud disk), and deleted with its node. The node is bound
to ``fs/mounts``, which exists only while the image is mounted: a node never starts on an
empty folder of the host's disk. ``locks/<cluster>.disks.lock`` serialises the disk work of
one cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import filelock

from skycore.config import skycore_home
from skycore.errors import ProvisionError

NODE_MOUNTS_BASE = "/var/lib/skycore/mounts"
"""Where a node keeps its mount caches (equals ``skycore.storage.rclone_env.NODE_MOUNTS_BASE``,
which this layer may not import; a unit test checks they agree)."""
DISKS_DIR = "node-disks"
GIB = 1 << 30
_MOUNT_POINT_RE = re.compile(rf"/{DISKS_DIR}/[a-z][-a-z0-9]*/[0-9]+/fs$")
_OCTAL_RE = re.compile(r"\\([0-7]{3})")
_SBIN = ":/usr/sbin:/sbin"
_RELEASE_WAIT_S = 5.0


@dataclass(frozen=True)
class NodeDisk:
    """The disk of node ``rank`` of ``cluster``: its folder on the host."""

    root: Path

    @property
    def image(self) -> Path:
        """The sparse ext4 image."""
        return self.root / "disk.img"

    @property
    def mountpoint(self) -> Path:
        """Where the image is loop-mounted on the host."""
        return self.root / "fs"

    @property
    def source(self) -> Path:
        """The folder bound into the node at NODE_MOUNTS_BASE (exists only while mounted)."""
        return self.mountpoint / "mounts"


def disks_home() -> Path:
    """The folder holding every node disk of this skycore home."""
    return skycore_home() / DISKS_DIR


def disk_of(cluster: str, rank: int) -> NodeDisk:
    """The disk of node ``rank`` of ``cluster`` (whether or not it exists)."""
    return NodeDisk(disks_home() / cluster / str(rank))


def cluster_disks(cluster: str) -> dict[int, NodeDisk]:
    """The disks of ``cluster`` that exist on the host, by rank."""
    folder = disks_home() / cluster
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return {}
    return {int(n): NodeDisk(folder / n) for n in names if n.isdigit()}


def is_disk_root(path: Path) -> bool:
    """True if ``path`` has the shape of a node disk's folder (``.../node-disks/C/R``)."""
    return bool(_MOUNT_POINT_RE.search(str(path / "fs")))


@contextmanager
def cluster_lock(cluster: str, blocking: bool = True) -> Iterator[bool]:
    """Hold the disk lock of ``cluster``; yields False (holding nothing) when ``blocking``
    is False and another holds it."""
    path = skycore_home() / "locks" / f"{cluster}.disks.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=600 if blocking else 0)
    except filelock.Timeout:
        if blocking:
            raise ProvisionError(
                f"Another skycore command holds the node disks of cluster '{cluster}' "
                f"({path}). Wait for it to finish, then retry."
            ) from None
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _run(argv: list[str]) -> tuple[int, str]:
    path = os.environ.get("PATH", "") + _SBIN
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        check=False,
    )
    return proc.returncode, (proc.stderr or proc.stdout).strip()


def create(disk: NodeDisk, size_gib: int) -> None:
    """A fresh, empty disk of ``size_gib`` GiB, mounted; a stale one there is removed first.
    On failure nothing of it is left and ProvisionError says why."""
    remove(disk)
    try:
        disk.mountpoint.mkdir(parents=True)
        with open(disk.image, "wb") as f:
            f.truncate(size_gib * GIB)
        rc, out = _run(
            ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_journal_init=1", str(disk.image)]
        )
        if rc != 0:
            raise ProvisionError(
                f"resources.disk_size: making the {size_gib} GiB filesystem of a node failed "
                f"(mkfs.ext4 {disk.image}: {out or f'exit {rc}'}). Install e2fsprogs, or "
                "leave disk_size out."
            )
        _mount(disk)
        disk.source.mkdir()
    except BaseException:
        remove(disk)
        raise


def _mount(disk: NodeDisk) -> None:
    rc, out = _run(["mount", "-o", "loop,noatime", str(disk.image), str(disk.mountpoint)])
    if rc != 0:
        raise ProvisionError(
            f"resources.disk_size: loop-mounting a node's disk failed (mount -o loop "
            f"{disk.image}: {out or f'exit {rc}'}). Node disks need root and loop devices on "
            "the machine that runs skycore; run skycore as root there, or leave disk_size out."
        )


def _attached(image: Path) -> bool:
    """True while a loop device still backs ``image``."""
    rc, out = _run(["losetup", "-j", str(image)])
    return rc == 0 and bool(out.strip())


def ensure_mounted(disk: NodeDisk, node: str) -> None:
    """Mount the disk of a node about to start, unless it is mounted already."""
    if disk.mountpoint.is_mount():
        return
    if not disk.image.is_file():
        raise ProvisionError(
            f"The disk of node {node} ({disk.image}) is gone, so the node cannot start with "
            f"its data. Remove the cluster with 'skycore down' and launch it again."
        )
    # A node that stopped a moment ago may still hold the image; never mount it twice.
    deadline = time.monotonic() + _RELEASE_WAIT_S
    while _attached(disk.image):
        if time.monotonic() > deadline:
            raise ProvisionError(
                f"The disk of node {node} ({disk.image}) is still in use by a loop device "
                "('losetup -j' shows it). Stop whatever holds it, then retry."
            )
        time.sleep(0.1)
    disk.mountpoint.mkdir(parents=True, exist_ok=True)
    _mount(disk)


def unmount(mountpoint: Path) -> None:
    """Unmount a disk; a busy one is detached now and released when its last user goes."""
    if not mountpoint.is_mount():
        return
    rc, _ = _run(["umount", str(mountpoint)])
    if rc != 0 and mountpoint.is_mount():
        rc, out = _run(["umount", "-l", str(mountpoint)])
        if rc != 0:
            raise ProvisionError(f"Unmounting the node disk {mountpoint} failed: {out}.")


def remove(disk: NodeDisk) -> None:
    """Unmount and delete a disk (nothing if it does not exist)."""
    if not disk.root.exists():
        return
    unmount(disk.mountpoint)
    shutil.rmtree(disk.root, ignore_errors=True)
    with contextlib.suppress(OSError):
        disk.root.parent.rmdir()  # the cluster's folder, once its last disk is gone


def mounted_disks() -> list[Path]:
    """Every node disk mounted on this machine, whatever skycore home it belongs to."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(errors="surrogateescape").splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = _OCTAL_RE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])  # \040: " "
            if _MOUNT_POINT_RE.search(point):
                points.append(Path(point))
    return points


def unmount_all(under: Path | None = None) -> list[Path]:
    """Unmount every node disk on this machine, or only those ``under`` a folder (their
    images stay: a node mounts its disk again when it starts); the mount points unmounted."""
    done = []
    for point in mounted_disks():
        if under is not None and not point.is_relative_to(under):
            continue
        try:
            unmount(point)
        except ProvisionError:
            continue
        done.append(point)
    return done


def free_bytes() -> tuple[int, Path]:
    """Free space where node disks live: (bytes, the folder measured)."""
    folder = disks_home()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free, folder


def tools_problem() -> str | None:
    """Why node disks cannot be made on this machine (None if they can)."""
    if os.geteuid() != 0:
        return "node disks are loop-mounted images, which needs skycore to run as root"
    path = os.environ.get("PATH", "") + _SBIN
    missing = [
        t for t in ("mkfs.ext4", "mount", "umount", "losetup") if not shutil.which(t, path=path)
    ]
    if missing:
        return f"{', '.join(missing)} is missing (install e2fsprogs and mount)"
    return None
