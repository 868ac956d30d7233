"""A cluster's nodes as its provider sees them, for the callers above core: the CLI's
``status`` and name checks, ``down`` of a cluster that has nodes but no record, and a
managed job watching (and removing) the nodes of its own cluster."""

from __future__ import annotations

from skycore import provision
from skycore.backend.handle import node_resources
from skycore.config import SkycoreConfig
from skycore.provision import NodeStatus
from skycore.state.clusters import ClusterRecord

__all__ = [
    "NodeStatus",
    "cluster_name_problem",
    "node_ips",
    "node_resources_text",
    "node_statuses",
    "remove_nodes",
]


def cluster_name_problem(name: str) -> str | None:
    """None if ``name`` is a valid cluster name, else a message saying how to fix it."""
    return provision.check_cluster_name(name)


def node_statuses(provider: str, cluster: str, config: SkycoreConfig) -> dict[int, NodeStatus]:
    """The status of each existing node of ``cluster`` by rank (nodes that are gone are
    absent); ProvisionError when the provider cannot tell."""
    return provision.query_instances(provider, cluster, config)


def node_ips(record: ClusterRecord) -> list[str]:
    """The recorded IP address of each node of ``record``, in rank order (none before its
    nodes were first provisioned)."""
    if not record.handle:
        return []
    return provision.ClusterInfo.from_dict(record.handle).ips


def node_resources_text(record: ClusterRecord) -> str:
    """What each node of ``record`` has of its own ('1 GiB disk, 2 CPUs, 0.5 GiB memory'),
    '' when it was launched without disk_size, cpus and memory."""
    return node_resources(record.resources).describe()


def remove_nodes(provider: str, cluster: str, config: SkycoreConfig) -> None:
    """Remove every node of ``cluster`` with its disk at once: no drain, the record is kept
    (``forget_cluster`` drops it)."""
    provision.terminate_instances(provider, cluster, config)
