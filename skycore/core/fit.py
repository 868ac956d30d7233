"""Whether a task fits a cluster: the provider of its cloud, node resources this machine can
give, and what a relaunch or an exec asks for against the cluster as launched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skycore import provision
from skycore.backend.handle import (
    describe_resources,
    node_resources,
    resources_of,
)
from skycore.errors import ClusterError
from skycore.provision import ProvisionError
from skycore.state.clusters import (
    ClusterRecord,
)
from skycore.task import Task


def provider_of(task: Task) -> str:
    """The provider that runs ``task``'s cloud; ClusterError naming the field if none does,
    or if no node of it can have the task's cpus, memory or disk_size (the free space for
    new disks is checked at PROVISION, once it is known how many nodes are new)."""
    try:
        provider = provision.provider_for_cloud(task.resources.cloud)
    except ProvisionError as e:
        raise ClusterError(str(e)) from None
    check_node_resources(provider, resources_of(task), new_nodes=0)
    return provider


def check_node_resources(provider: str, resources: dict[str, Any], new_nodes: int) -> None:
    """ClusterError (one paragraph: the field, this machine's figure, the fix) when nodes
    of ``resources`` (``resources_of``), ``new_nodes`` of them made now, cannot be had."""
    wanted = node_resources(resources)
    if wanted == provision.NodeResources():
        return
    try:
        provision.check_resources(provider, wanted, new_nodes)
    except ProvisionError as e:
        raise ClusterError(str(e)) from None


def check_same_resources(record: ClusterRecord, task: Task) -> None:
    """ClusterError (saying what to do) when a relaunch asks for other resources."""
    wanted = resources_of(task)
    # Fields added since a cluster was launched count as not asked for (None).
    diff = [k for k in {**record.resources, **wanted} if record.resources.get(k) != wanted.get(k)]
    if diff:
        raise ClusterError(
            f"Cluster '{record.name}' was launched with "
            f"{describe_resources(record.resources)}, but the task asks for "
            f"{describe_resources(wanted)} (different: {', '.join(diff)}). Launch on a "
            f"new cluster (-c NEW_NAME), run 'skycore down {record.name}' first, or change the "
            f"task's {', '.join(_field(k) for k in diff)} back to match."
        )


def _field(key: str) -> str:
    return key if key == "num_nodes" else f"resources.{key}"


def check_exec_fits(
    record: ClusterRecord, task: Task, options: Mapping[str, str] | None = None
) -> None:
    """ClusterError when ``task`` asks for more nodes than the cluster has, or for another
    cloud, image or spot choice than it was launched with; ``options`` maps a field to the
    command-line option that set it (named in the message, else the YAML field is)."""
    options, res, have = options or {}, task.resources, record.resources
    asked: list[tuple[str, Any, Any]] = []  # (field, the task's, the cluster's)
    if task.num_nodes > record.num_nodes:
        asked.append(("num_nodes", task.num_nodes, record.num_nodes))
    for key in ("cloud", "image_id"):
        if getattr(res, key) is not None and getattr(res, key) != have.get(key):
            asked.append((key, getattr(res, key), have.get(key)))
    spot_set = res.use_spot or "use_spot" in options or "use_spot" in res.model_fields_set
    if spot_set and res.use_spot != bool(have.get("use_spot")):
        asked.append(("use_spot", res.use_spot, bool(have.get("use_spot"))))
    if asked:
        flags = [options.get(k, _field(k)) for k, _, _ in asked]
        raise ClusterError(
            "; ".join(
                f"{flag}: the task asks for {k}={want} but cluster '{record.name}' has {k}={got}"
                for flag, (k, want, got) in zip(flags, asked, strict=True)
            )
            + ". exec runs on the cluster as it was launched: change or drop "
            + " and ".join(flags)
            + ", or launch a new cluster with -c: 'skycore launch -c NEW_NAME TASK.yaml ...'."
        )
