"""A cluster's handle: its nodes and a command runner for each, and what it was launched with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skycore import provision
from skycore.config import SkycoreConfig
from skycore.provision import ClusterInfo
from skycore.runner import CommandRunner
from skycore.state.clusters import ClusterRecord

if TYPE_CHECKING:
    from skycore.task import Task


@dataclass
class ClusterHandle:
    """A cluster's nodes and a command runner for each, in rank order (head first)."""

    name: str
    provider: str
    info: ClusterInfo
    runners: list[CommandRunner]
    config: SkycoreConfig = field(repr=False)

    @property
    def num_nodes(self) -> int:
        """How many nodes the handle covers."""
        return len(self.info.nodes)

    def node_label(self, rank: int) -> str:
        """'head' or 'workerN', as SkyPilot names nodes in output prefixes."""
        return "head" if rank == 0 else f"worker{rank}"


NODE_FIELDS = ("disk_size", "cpus", "memory")
"""The per-node fields of a resources dict (GiB, CPUs, GiB); absent in older records."""
_UNITS = {"disk_size": " GiB", "memory": " GiB"}


def resources_of(task: Task) -> dict[str, Any]:
    """What a cluster is launched with; a relaunch must ask for the same."""
    r = task.resources
    return {
        "cloud": r.cloud,
        "image_id": r.image_id,
        "use_spot": bool(r.use_spot),
        "num_nodes": task.num_nodes,
        "disk_size": r.disk_size,
        "cpus": r.cpus,
        "memory": r.memory,
    }


def node_resources(res: dict[str, Any]) -> provision.NodeResources:
    """What each node of a cluster launched with ``res`` (``resources_of``) gets."""
    return provision.NodeResources(res.get("disk_size"), res.get("cpus"), res.get("memory"))


def describe_resources(res: dict[str, Any]) -> str:
    """A short human form of a resources dict (per-node fields only when set)."""
    return ", ".join(
        f"{k}={v:g}{_UNITS.get(k, '')}" if k in NODE_FIELDS else f"{k}={v}"
        for k, v in res.items()
        if not (k in NODE_FIELDS and v is None)
    )


def up_nodes(handle: ClusterHandle) -> ClusterHandle | None:
    """The part of ``handle`` whose nodes are UP (None if no node is)."""
    up = [i for i, n in enumerate(handle.info.nodes) if n.status is provision.NodeStatus.UP]
    if not up:
        return None
    return ClusterHandle(
        handle.name,
        handle.provider,
        provision.ClusterInfo(handle.name, handle.provider, [handle.info.nodes[i] for i in up]),
        [handle.runners[i] for i in up],
        handle.config,
    )


def get_handle(record: ClusterRecord, config: SkycoreConfig) -> ClusterHandle:
    """The handle of a recorded cluster, with the nodes that exist now."""
    info = provision.get_cluster_info(record.provider, record.name, config)
    runners = provision.get_command_runners(record.provider, info, config)
    return ClusterHandle(record.name, record.provider, info, runners, config)
