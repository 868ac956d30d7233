"""Providers: one module each, with the same small API (SkyPilot's provision interface).

Every provider module defines::

    run_instances(cluster_name, num_nodes, image_id, config) -> ClusterInfo
    stop_instances(cluster_name, config) -> None
    start_instances(cluster_name, config) -> ClusterInfo
    terminate_instances(cluster_name, config) -> None
    query_instances(cluster_name, config) -> dict[int, NodeStatus]   # rank -> UP / STOPPED
    get_cluster_info(cluster_name, config) -> ClusterInfo
    get_command_runners(info, config) -> list[CommandRunner]         # one per node, by rank

The functions of this package take the provider's name first and dispatch to its module;
the pipeline only ever talks to providers through them.
"""

from __future__ import annotations

import enum
import importlib
import re
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from skycore.config import SkycoreConfig
from skycore.errors import ProvisionError as ProvisionError
from skycore.stores import clouds

if TYPE_CHECKING:
    from skycore.runner import CommandRunner

_PROVIDERS: dict[str, str] = {"docker": "skycore.provision.docker"}

# Which provider runs the compute of a cloud name a task may give. On the local cloud every
# cloud's nodes are containers: the clouds of the registered stores map to the docker
# provider unless a real provider module is listed here for them.
_CLOUD_TO_PROVIDER: dict[str | None, str] = {
    None: "docker",
    "docker": "docker",
    "local": "docker",
}
_DEFAULT_PROVIDER = "docker"

CLUSTER_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


class NodeStatus(enum.StrEnum):
    """What a provider reports for one node (a node that is gone is simply absent)."""

    UP = "UP"
    STOPPED = "STOPPED"


@dataclass
class NodeInfo:
    """One node of a cluster as the provider sees it."""

    rank: int
    instance_id: str
    name: str
    hostname: str
    ip: str
    status: NodeStatus | None = None


@dataclass
class ClusterInfo:
    """The nodes of a cluster, head (rank 0) first, plus provider-specific details."""

    cluster_name: str
    provider: str
    nodes: list[NodeInfo]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def head(self) -> NodeInfo:
        """The rank-0 node."""
        return self.nodes[0]

    @property
    def ips(self) -> list[str]:
        """Node IPs in rank order (what SKYPILOT_NODE_IPS carries)."""
        return [n.ip for n in self.nodes]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form for the state database."""
        d = asdict(self)
        for n in d["nodes"]:
            n["status"] = n["status"].value if n["status"] is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClusterInfo:
        """Inverse of to_dict."""
        nodes = [
            NodeInfo(**{**n, "status": NodeStatus(n["status"]) if n.get("status") else None})
            for n in d["nodes"]
        ]
        return cls(d["cluster_name"], d["provider"], nodes, d.get("extra", {}))


def check_cluster_name(name: str) -> str | None:
    """None if ``name`` is a valid cluster name, else a message saying how to fix it."""
    if CLUSTER_NAME_RE.match(name):
        return None
    return (
        f"Cluster name {name!r} is invalid: use 1-40 characters of lowercase letters, digits "
        "and '-', starting with a letter and not ending with '-' (e.g. 'my-cluster-1')."
    )


def provider_for_cloud(cloud: str | None) -> str:
    """Name of the provider that runs nodes for ``cloud`` (``resources.cloud``)."""
    key = cloud.lower() if cloud else None
    if key in _CLOUD_TO_PROVIDER:
        return _CLOUD_TO_PROVIDER[key]
    if key in clouds():
        return _DEFAULT_PROVIDER
    known = ", ".join(sorted({*(k for k in _CLOUD_TO_PROVIDER if k), *clouds()}))
    raise ProvisionError(
        f"resources.cloud: {cloud!r} has no provider. Use one of: {known} (or leave it out)."
    )


def get_provider(name: str) -> ModuleType:
    """The module of provider ``name``."""
    if name not in _PROVIDERS:
        raise ProvisionError(f"Unknown provider {name!r}; known: {', '.join(_PROVIDERS)}.")
    return importlib.import_module(_PROVIDERS[name])


def run_instances(
    provider: str,
    cluster_name: str,
    num_nodes: int,
    image_id: str | None = None,
    config: SkycoreConfig | None = None,
) -> ClusterInfo:
    """Create or resume the nodes of a cluster that are not running (ranks 0..num_nodes-1)."""
    info: ClusterInfo = get_provider(provider).run_instances(
        cluster_name, num_nodes, image_id, config
    )
    return info


def stop_instances(provider: str, cluster_name: str, config: SkycoreConfig | None = None) -> None:
    """Stop every node of a cluster, keeping their disks."""
    get_provider(provider).stop_instances(cluster_name, config)


def start_instances(
    provider: str, cluster_name: str, config: SkycoreConfig | None = None
) -> ClusterInfo:
    """Resume every stopped node of a cluster."""
    info: ClusterInfo = get_provider(provider).start_instances(cluster_name, config)
    return info


def terminate_instances(
    provider: str, cluster_name: str, config: SkycoreConfig | None = None
) -> None:
    """Remove every node of a cluster with its disk."""
    get_provider(provider).terminate_instances(cluster_name, config)


def query_instances(
    provider: str, cluster_name: str, config: SkycoreConfig | None = None
) -> dict[int, NodeStatus]:
    """Status of each existing node by rank; nodes that are gone are absent."""
    result: dict[int, NodeStatus] = get_provider(provider).query_instances(cluster_name, config)
    return result


def get_cluster_info(
    provider: str, cluster_name: str, config: SkycoreConfig | None = None
) -> ClusterInfo:
    """The existing nodes of a cluster, by rank."""
    info: ClusterInfo = get_provider(provider).get_cluster_info(cluster_name, config)
    return info


def get_command_runners(
    provider: str, info: ClusterInfo, config: SkycoreConfig | None = None
) -> list[CommandRunner]:
    """One command runner per node of ``info``, in rank order."""
    runners: list[CommandRunner] = get_provider(provider).get_command_runners(info, config)
    return runners
