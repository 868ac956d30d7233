"""The disks of docker nodes (``disks``): which node has one (its label), mounting it before
the node starts, deleting it with the node, and deleting the disks of nodes that are gone."""

from __future__ import annotations

from pathlib import Path

from docker.models.containers import Container

from skycore.config import SkycoreConfig
from skycore.provision import disks
from skycore.provision.docker_engine import LABEL_DISK, labels_of, list_nodes, name_of


def disk_of(c: Container) -> disks.NodeDisk | None:
    """The node's own disk, if it was launched with one."""
    root = labels_of(c).get(LABEL_DISK)
    return disks.NodeDisk(Path(root)) if root and disks.is_disk_root(Path(root)) else None


def start(c: Container) -> None:
    """Start a stopped node, its disk mounted first."""
    disk = disk_of(c)
    if disk is not None:
        disks.ensure_mounted(disk, name_of(c))
    c.start()


def remove(c: Container) -> None:
    """Remove a node with its disk."""
    c.remove(force=True, v=True)
    disk = disk_of(c)
    if disk is not None:
        disks.remove(disk)


def in_use(cluster_name: str, containers: dict[int, Container]) -> bool:
    """True if the cluster has disks on this machine or nodes launched with one."""
    return bool(disks.cluster_disks(cluster_name)) or any(
        disk_of(c) is not None for c in containers.values()
    )


def reap_held(cluster_name: str, live: set[int]) -> None:
    """Delete the disks of the cluster's nodes that are not in ``live`` (the disk lock is
    held)."""
    for rank, disk in disks.cluster_disks(cluster_name).items():
        if rank not in live:
            disks.remove(disk)


def reap(cluster_name: str, config: SkycoreConfig | None, wait: bool) -> None:
    """Delete the disks of nodes that are gone (preempted, removed outside skycore). Without
    ``wait``, skipped while another command works on the cluster's disks."""
    with disks.cluster_lock(cluster_name, blocking=wait) as held:
        if held:
            reap_held(cluster_name, set(list_nodes(cluster_name, config)))  # listed under it


def unmount_stopped(cluster_name: str, config: SkycoreConfig | None) -> None:
    """Unmount from the host the disks of the cluster's nodes that are not running (their
    images stay); delete those of nodes that are gone."""
    with disks.cluster_lock(cluster_name):
        now = list_nodes(cluster_name, config)
        reap_held(cluster_name, set(now))
        for c in now.values():
            disk = disk_of(c)
            if disk is not None and c.status != "running":
                disks.unmount(disk.mountpoint)


def remove_all(cluster_name: str, removed: list[Container], config: SkycoreConfig | None) -> None:
    """Delete every disk of a cluster whose nodes were removed: the ones left in this skycore
    home and those the removed nodes name (wherever they are)."""
    with disks.cluster_lock(cluster_name):
        reap_held(cluster_name, set(list_nodes(cluster_name, config)))
        for c in removed:
            disk = disk_of(c)
            if disk is not None:
                disks.remove(disk)


def release(cluster_name: str, rank: int, config: SkycoreConfig | None = None) -> None:
    """Delete the disk of node ``rank`` if that node is gone (a preemption takes it)."""
    if rank in disks.cluster_disks(cluster_name):
        reap(cluster_name, config, wait=True)
