"""The docker engine under the docker provider: its client, the nodes' names, labels and
addresses, and the listing of a cluster's containers as nodes."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import docker.errors
import requests
from docker.models.containers import Container

from skycore import node_images
from skycore.config import SkycoreConfig, load_config
from skycore.provision import ClusterInfo, NodeInfo, NodeStatus, ProvisionError

PROVIDER = "docker"
LABEL_CLUSTER = "skycore.cluster"
LABEL_RANK = "skycore.rank"
LABEL_IP = "skycore.ip"
LABEL_HOSTNAME = "skycore.hostname"
LABEL_DISK = "skycore.disk"
"""The host folder of a node's own disk (only on nodes launched with a disk_size)."""
STOP_TIMEOUT_S = 2

F = TypeVar("F", bound=Callable[..., Any])


def engine_errors(fn: F) -> F:
    """Turn a failing or unreachable engine into a ProvisionError (one clear paragraph)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ProvisionError:
            raise
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise ProvisionError(
                f"The docker engine failed during {fn.__name__}: {e}. Check it with "
                "'harness status' (or 'docker info'), then retry the command."
            ) from e

    return wrapper  # type: ignore[return-value]


def config_or_load(config: SkycoreConfig | None) -> SkycoreConfig:
    """``config``, or the config file's when None."""
    return config if config is not None else load_config()


def client(config: SkycoreConfig | None = None) -> docker.DockerClient:
    """A docker SDK client for the configured engine (cached per host, shared with the dry
    run's image check: ``skycore.node_images.client``)."""
    return node_images.client(config_or_load(config))


def container_name(cluster_name: str, rank: int) -> str:
    """Name of the container of node ``rank``."""
    return f"skycore-{cluster_name}-{rank}"


def node_ip(cluster_name: str, rank: int) -> str:
    """The loopback address of node ``rank``: 127.X.Y.(rank+1), X and Y from the name."""
    digest = hashlib.sha256(cluster_name.encode()).digest()
    return f"127.{1 + digest[0] % 254}.{digest[1]}.{rank + 1}"


def list_nodes(cluster_name: str, config: SkycoreConfig | None) -> dict[int, Container]:
    """The cluster's containers by rank, from ONE engine call (the listing carries their
    state and labels: no inspection per node, so a node removed meanwhile is simply absent,
    never a 404)."""
    listed = client(config).containers.list(
        all=True, sparse=True, filters={"label": f"{LABEL_CLUSTER}={cluster_name}"}
    )
    return {int(labels_of(c)[LABEL_RANK]): c for c in listed}


def labels_of(c: Container) -> dict[str, str]:
    """A container's labels, from a listing (sparse) or an inspection."""
    labels = c.attrs.get("Labels")
    if labels is None:
        labels = c.attrs.get("Config", {}).get("Labels")
    return dict(labels or {})


def status_of(c: Container) -> NodeStatus | None:
    state = c.attrs.get("State", c.status)
    if isinstance(state, dict):  # an inspection; a listing has the bare word
        state = state.get("Status", c.status)
    if state == "running":
        return NodeStatus.UP
    if state in ("created", "exited", "paused"):
        return NodeStatus.STOPPED
    return None  # dead / removing: as good as gone


def hostname_of(cluster_name: str, rank: int) -> str:
    """The hostname node ``rank`` is created with."""
    return f"{cluster_name}-{rank}"[:63]


def name_of(c: Container, fallback: str = "") -> str:
    """A container's name, from an inspection or a listing (sparse: ``Names``)."""
    names = c.attrs.get("Names") or []
    return c.name or (names[0].lstrip("/") if names else fallback or str(c.id)[:12])


def _node(cluster_name: str, rank: int, c: Container) -> NodeInfo:
    labels = labels_of(c)
    name = name_of(c, container_name(cluster_name, rank))
    hostname = c.attrs.get("Config", {}).get("Hostname") or labels.get(
        LABEL_HOSTNAME, hostname_of(cluster_name, rank)
    )
    return NodeInfo(
        rank=rank,
        instance_id=c.id or "",
        name=name,
        hostname=hostname,
        ip=labels.get(LABEL_IP, node_ip(cluster_name, rank)),
        status=status_of(c),
    )


def cluster_info(cluster_name: str, containers: dict[int, Container]) -> ClusterInfo:
    nodes = [_node(cluster_name, r, containers[r]) for r in sorted(containers)]
    return ClusterInfo(cluster_name, PROVIDER, nodes)
