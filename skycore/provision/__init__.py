"""Providers: one module each, with the same small API (SkyPilot's provision interface).

Every provider module defines the functions of ``Provider``. The functions of this package
of the same names take the provider's name first and dispatch to its module; the pipeline
only ever talks to providers through them.
"""

from __future__ import annotations

import enum
import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

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


@dataclass(frozen=True)
class NodeResources:
    """What each node of a cluster gets (``resources.disk_size``, ``cpus``, ``memory``): a
    disk of its own for the mount caches (GiB) and limits on CPUs and memory (GiB). None
    is the provider's default: the caches on the node's own filesystem, no limit."""

    disk_size_gib: int | None = None
    cpus: float | None = None
    memory_gib: float | None = None

    def describe(self) -> str:
        """A short human form ('1 GiB disk, 2 CPUs, 0.5 GiB memory'; '' when all default)."""
        parts = []
        if self.disk_size_gib is not None:
            parts.append(f"{self.disk_size_gib} GiB disk")
        if self.cpus is not None:
            parts.append(f"{self.cpus:g} CPU{'' if self.cpus == 1 else 's'}")
        if self.memory_gib is not None:
            parts.append(f"{self.memory_gib:g} GiB memory")
        return ", ".join(parts)


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


class Provider(Protocol):
    """What a provider module defines (SkyPilot's provision interface)."""

    def run_instances(
        self,
        cluster_name: str,
        num_nodes: int,
        image_id: str | None = None,
        config: SkycoreConfig | None = None,
        resources: NodeResources | None = None,
    ) -> ClusterInfo:
        """Create or resume the nodes of a cluster that are not running (ranks
        0..num_nodes-1); the nodes it creates get ``resources``."""

    def check_resources(
        self, resources: NodeResources, num_nodes: int, config: SkycoreConfig | None = None
    ) -> None:
        """ProvisionError (one paragraph naming the field, the machine's figure and the fix)
        when ``num_nodes`` nodes of ``resources`` cannot be had; nothing is changed."""

    def stop_instances(self, cluster_name: str, config: SkycoreConfig | None = None) -> None:
        """Stop every node of a cluster, keeping their disks."""

    def start_instances(
        self, cluster_name: str, config: SkycoreConfig | None = None
    ) -> ClusterInfo:
        """Resume every stopped node of a cluster."""

    def terminate_instances(self, cluster_name: str, config: SkycoreConfig | None = None) -> None:
        """Remove every node of a cluster with its disk."""

    def query_instances(
        self, cluster_name: str, config: SkycoreConfig | None = None
    ) -> dict[int, NodeStatus]:
        """Status of each existing node by rank; nodes that are gone are absent."""

    def get_cluster_info(
        self, cluster_name: str, config: SkycoreConfig | None = None
    ) -> ClusterInfo:
        """The existing nodes of a cluster, by rank."""

    def get_command_runners(
        self, info: ClusterInfo, config: SkycoreConfig | None = None
    ) -> list[CommandRunner]:
        """One command runner per node of ``info``, in rank order."""


def get_provider(name: str) -> Provider:
    """The module of provider ``name``."""
    if name not in _PROVIDERS:
        raise ProvisionError(f"Unknown provider {name!r}; known: {', '.join(_PROVIDERS)}.")
    return cast(Provider, importlib.import_module(_PROVIDERS[name]))


P = ParamSpec("P")
R = TypeVar("R")


def _dispatch(operation: Callable[Concatenate[Provider, P], R]) -> Callable[Concatenate[str, P], R]:
    """``operation`` of ``Provider`` as a function that takes the provider's name first."""

    @functools.wraps(operation)
    def call(provider: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, getattr(get_provider(provider), operation.__name__)(*args, **kwargs))

    return call


run_instances = _dispatch(Provider.run_instances)
check_resources = _dispatch(Provider.check_resources)
stop_instances = _dispatch(Provider.stop_instances)
start_instances = _dispatch(Provider.start_instances)
terminate_instances = _dispatch(Provider.terminate_instances)
query_instances = _dispatch(Provider.query_instances)
get_cluster_info = _dispatch(Provider.get_cluster_info)
get_command_runners = _dispatch(Provider.get_command_runners)
