"""The cluster lifecycle: names and locks, refresh from the provider, and every status
transition of bringing a cluster up: provisioning, start (the backend does the node work;
stop and down are in shutdown.py, what a task may ask of a cluster in fit.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import filelock

from skycore import logs, provision
from skycore.backend import provision as backend_provision
from skycore.backend.handle import (
    ClusterHandle,
    get_handle,
    node_resources,
)
from skycore.backend.mounts import remount
from skycore.config import SkycoreConfig, skycore_home
from skycore.core.fit import check_node_resources
from skycore.errors import ClusterError, StageError
from skycore.provision import ProvisionError
from skycore.state.clusters import (
    CLUSTER_INIT,
    CLUSTER_STOPPED,
    CLUSTER_UP,
    ClusterRecord,
    add_cluster_event,
    get_cluster,
    remove_cluster,
    set_cluster_handle,
    set_cluster_status,
    upsert_cluster,
)


@contextmanager
def cluster_lock(name: str, timeout: float = 600) -> Iterator[None]:
    """Serialise commands that change a cluster (launch, stop, start, down). The name is
    checked first: nothing reaches the filesystem under an invalid name."""
    check_name(name)
    path = skycore_home() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), timeout=timeout)
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            print(
                f"Waiting for another skycore command on cluster '{name}' to finish...",
                file=sys.stderr,
                flush=True,
            )
            lock.acquire()
    except filelock.Timeout:
        raise ClusterError(
            f"Another skycore command is changing cluster '{name}' (lock {path}). Wait for it "
            "to finish, then retry."
        ) from None
    try:
        yield
    finally:
        lock.release()


def refresh_status(name: str, config: SkycoreConfig) -> ClusterRecord | None:
    """Reconcile a cluster's recorded status with what its provider reports.

    An UP or STOPPED cluster whose nodes no longer match becomes INIT with the reason (the
    next launch repairs it). Skipped while another command holds the cluster's lock.
    """
    path = skycore_home() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return get_cluster(name)
    try:
        record = get_cluster(name)
        if record is None or record.status == CLUSTER_INIT:
            return record
        nodes = provision.query_instances(record.provider, name, config)
        want = (
            provision.NodeStatus.UP if record.status == CLUSTER_UP else provision.NodeStatus.STOPPED
        )
        wrong = [
            f"node {r} is {nodes[r].value if r in nodes else 'gone'}"
            for r in range(record.num_nodes)
            if nodes.get(r) is not want
        ]
        if wrong:
            set_cluster_status(
                name,
                CLUSTER_INIT,
                f"refresh: {'; '.join(wrong)} (expected {want.value}); 'skycore launch' repairs it",
            )
        return get_cluster(name)
    finally:
        lock.release()


def check_name(name: str) -> None:
    problem = provision.check_cluster_name(name)
    if problem:
        raise ClusterError(problem + " Pass it with -c/--cluster.")


def require_up(name: str, config: SkycoreConfig) -> tuple[ClusterRecord, ClusterHandle]:
    """The record and handle of an UP cluster, or a ClusterError saying what to run instead."""
    check_name(name)
    record = get_cluster(name)
    if record is None:
        raise ClusterError(
            f"Cluster '{name}' does not exist. Launch it first: 'skycore launch -c {name} "
            "TASK.yaml'."
        )
    if record.status == CLUSTER_STOPPED:
        raise ClusterError(
            f"Cluster '{name}' is STOPPED. Run 'skycore start {name}' first, or 'skycore "
            f"launch -c {name} TASK.yaml' to start it and run the task."
        )
    if record.status != CLUSTER_UP:
        raise ClusterError(
            f"Cluster '{name}' is {record.status} ({record.status_reason}); its nodes are not "
            f"ready. Run 'skycore launch -c {name} TASK.yaml' to repair it."
        )
    handle = get_handle(record, config)
    statuses = provision.query_instances(record.provider, name, config)
    missing = [r for r in range(record.num_nodes) if statuses.get(r) is not provision.NodeStatus.UP]
    if missing:
        reason = f"node(s) {', '.join(map(str, missing))} not running"
        set_cluster_status(name, CLUSTER_INIT, reason)
        raise ClusterError(
            f"Cluster '{name}' is not healthy: {reason}. Run 'skycore launch -c {name} "
            "TASK.yaml' to repair it."
        )
    return record, handle


def existing(name: str) -> ClusterRecord:
    check_name(name)
    record = get_cluster(name)
    if record is None:
        raise ClusterError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    return record


SYNCING = (
    "nodes healthy; workdir and file mounts not all in place yet (an interrupted launch "
    "leaves it so: 'skycore launch' repairs it)"
)


def existing_or_nodes(name: str, config: SkycoreConfig) -> ClusterRecord | None:
    """The record of cluster ``name``; None when it has nodes but no record (a ``down``
    removes those); ClusterError when it has neither."""
    record = get_cluster(name)
    if record is None and not provision.query_instances("docker", name, config):
        raise ClusterError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    return record


def forget_cluster(name: str, reason: str) -> None:
    """Drop the record of cluster ``name`` (its nodes are gone), recording why."""
    remove_cluster(name, reason)


def provision_cluster(
    name: str,
    provider: str,
    num_nodes: int,
    image_id: str | None,
    resources: dict[str, Any],
    config: SkycoreConfig,
    log_path: Path,
    reason: str,
) -> ClusterHandle:
    """Record INIT, create or resume the nodes and wait for health. The cluster stays INIT
    (reason SYNCING): the caller puts the workdir and file mounts in place and only then
    records UP (``mark_ready``). A failure leaves the cluster INIT with the reason recorded
    (the next launch repairs it). Resources this machine cannot give are a ClusterError
    before anything is recorded or made."""
    each = node_resources(resources)
    if each != provision.NodeResources():
        try:
            have = provision.query_instances(provider, name, config)
        except ProvisionError:
            pass  # the engine's failure is reported by start_nodes below
        else:
            new = sum(1 for rank in range(num_nodes) if rank not in have)
            check_node_resources(provider, resources, new)
    upsert_cluster(name, CLUSTER_INIT, provider, num_nodes, resources, reason)
    logs.append(
        log_path,
        f"{reason}: {num_nodes} node(s) on provider {provider}"
        + (f", each with {each.describe()}" if each.describe() else ""),
    )
    try:
        handle = backend_provision.start_nodes(
            name, provider, num_nodes, image_id, config, log_path, resources=each
        )
    except StageError as e:
        _init_because(name, e.reason)
        raise
    set_cluster_handle(name, handle.info.to_dict())
    try:
        backend_provision.wait_healthy(handle, num_nodes, log_path)
    except StageError as e:
        _init_because(name, e.reason)
        raise
    mark_syncing(name)
    return handle


def _init_because(name: str, reason: str) -> None:
    set_cluster_status(name, CLUSTER_INIT, reason)
    add_cluster_event(name, reason)


def mark_syncing(name: str) -> None:
    """Record INIT until the workdir and every mount are in place: a launch interrupted then
    never leaves an UP cluster with bare mount points that exec could write into.
    ``provision_cluster`` records it once the nodes are healthy; a relaunch that reuses an UP
    cluster calls this itself."""
    set_cluster_status(name, CLUSTER_INIT, SYNCING)


def mark_ready(name: str, num_nodes: int, what: str) -> None:
    """Record UP: the nodes are healthy and the workdir and ``what`` are in place."""
    set_cluster_status(
        name, CLUSTER_UP, f"all {num_nodes} node(s) healthy; workdir and {what} in place"
    )


def start_nodes(
    record: ClusterRecord,
    config: SkycoreConfig,
    log_path: Path,
    say: Callable[[str], None],
    store_wait_s: float,
) -> str | None:
    """Resume the nodes, check health, mount recorded storage again -> UP; a note for the
    stage, or None when the cluster was already UP and healthy. A re-mount that fails leaves
    the cluster INIT with the reason."""
    name = record.name
    if record.status == CLUSTER_UP:
        handle = get_handle(record, config)
        if not backend_provision.node_problems(handle, record.num_nodes):
            return None
    handle = provision_cluster(
        name,
        record.provider,
        record.num_nodes,
        record.resources.get("image_id"),
        record.resources,
        config,
        log_path,
        f"start: resuming from {record.status}",
    )
    say("mounting storage again")
    try:
        n = remount(handle, log_path, say, store_wait_s)
    except StageError as e:
        set_cluster_status(name, CLUSTER_INIT, f"re-mount failed: {e}")
        raise
    mark_ready(name, handle.num_nodes, f"{n} mount(s) restored")
    return f"{handle.num_nodes} node(s) UP, {n} mount(s) restored"
