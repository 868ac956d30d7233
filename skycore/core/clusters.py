"""The cluster lifecycle: names and locks, refresh from the provider, and every status
transition of provisioning, stop, start and teardown (the backend does the node work)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import filelock

from skycore import logs, provision
from skycore.backend import provision as backend_provision
from skycore.backend.handle import (
    ClusterHandle,
    describe_resources,
    get_handle,
    node_resources,
    resources_of,
    up_nodes,
)
from skycore.backend.mounts import drain_mounts, remount
from skycore.config import SkycoreConfig, skycore_home
from skycore.core.jobs import settle_orphan_jobs
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
from skycore.state.mounts import MountRecord, get_cluster_mounts
from skycore.storage import recipes
from skycore.storage.common import StorageMode
from skycore.task import Task


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


MOUNTS_REMOVED = "mounts removed by stop/down"


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


def stop_nodes(
    record: ClusterRecord, config: SkycoreConfig, log_path: Path, say: Callable[[str], None]
) -> str | None:
    """Drain and unmount the cached mounts, stop the nodes -> STOPPED; a note for the stage,
    or None when the cluster was already stopped."""
    name = record.name
    running = up_nodes(get_handle(record, config))
    if record.status == CLUSTER_STOPPED and running is None:
        return None
    if running is not None:
        settle_orphan_jobs(record, config)
        say(_drain_words(config)[0])
        n = drain_mounts(running, log_path, unmount=True, say=say)
        logs.append(log_path, f"drained and unmounted {n} mount(s)")
        if n:
            # The mount points are plain local folders now: no exec may write there even
            # if stopping the nodes fails below.
            set_cluster_status(name, CLUSTER_INIT, MOUNTS_REMOVED)
    say("stopping nodes")
    try:
        provision.stop_instances(record.provider, name, config)
    except ProvisionError as e:
        set_cluster_status(name, CLUSTER_INIT, f"stop failed: {e}")
        raise StageError(f"Stopping the nodes failed: {e}", log_path) from None
    set_cluster_status(name, CLUSTER_STOPPED, "stopped by user")
    return f"{running.num_nodes if running else 0} node(s) stopped; {_drain_words(config)[1]}"


def _drain_words(config: SkycoreConfig) -> tuple[str, str]:
    """(progress line, outcome) of unmounting before a stop or a down: a drain first, unless
    the mount recipe of MOUNT_CACHED entries runs nothing before a stop."""
    recipe = recipes.takes(config, StorageMode.MOUNT_CACHED)
    if recipe is None or recipe.drains_before_stop:
        return "draining cached mounts and unmounting", "mounts drained"
    return "unmounting", f"mounts unmounted, not drained (as the {recipe.name} recipe does)"


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


def teardown(name: str, config: SkycoreConfig, log_path: Path, say: Callable[[str], None]) -> str:
    record = get_cluster(name)
    provider = record.provider if record else "docker"
    if record is None and not provision.query_instances(provider, name, config):
        raise ClusterError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    mounts = get_cluster_mounts(name)
    if record is not None:
        running = up_nodes(get_handle(record, config))
        if running is not None and mounts:
            say(_drain_words(config)[0])
            drain_mounts(running, log_path, unmount=True, say=say)
            # Until the nodes are gone, nothing may run there against plain local folders.
            set_cluster_status(name, CLUSTER_INIT, MOUNTS_REMOVED)
    say("removing nodes")
    try:
        provision.terminate_instances(provider, name, config)
    except ProvisionError as e:
        raise StageError(f"Removing the nodes failed: {e}", log_path) from None
    try:
        deleted, kept = _delete_ephemeral_storage(mounts, name, config, log_path, say)
    finally:
        # The nodes are gone: forget the cluster even if deleting its storage failed.
        remove_cluster(name, "terminated by user (down)")
    note = "nodes removed"
    if deleted:
        note += f"; deleted storage {', '.join(deleted)} (persistent: false)"
    if kept:
        note += f"; kept storage {', '.join(kept)} (still used by other clusters)"
    return note


def _delete_ephemeral_storage(
    mounts: list[MountRecord],
    cluster: str,
    config: SkycoreConfig,
    log_path: Path,
    say: Callable[[str], None],
) -> tuple[list[str], list[str]]:
    """Delete the persistent: false buckets of a torn-down cluster: (deleted, kept).

    A bucket whose record is already gone counts as deleted; one that another cluster's
    recorded mounts still use is kept. Every bucket is tried; failures are reported together.
    """
    names = sorted({m.storage_name for m in mounts if m.storage_name and not m.persistent})
    if not names:
        return [], []
    from skycore.storage import catalog

    deleted: list[str] = []
    kept: list[str] = []
    failures: list[str] = []
    for storage_name in names:
        say(f"deleting storage {storage_name}")
        try:
            summary = catalog.delete_storage(
                storage_name, config, missing_ok=True, for_cluster=cluster
            )
        except catalog.StorageInUse as e:
            kept.append(storage_name)
            logs.append(log_path, f"kept storage {storage_name}: {e}")
            continue
        except Exception as e:
            logs.append(log_path, f"deleting storage {storage_name} failed: {e}")
            failures.append(f"{storage_name} ({e})")
            continue
        deleted.append(storage_name)
        logs.append(log_path, f"storage {storage_name}: {summary}")
    if failures:
        names_left = " ".join(f.split(" ", 1)[0] for f in failures)
        raise StageError(
            f"The nodes of '{cluster}' are removed and the cluster is forgotten, but deleting "
            f"its persistent: false storage failed: {'; '.join(failures)}. Delete it with "
            f"'skycore storage delete {names_left}'.",
            log_path,
        )
    return deleted, kept
