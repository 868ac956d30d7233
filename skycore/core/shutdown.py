"""Taking a cluster down: drain and unmount its mounts, then stop its nodes (STOPPED) or
remove them with its persistent: false storage and forget it (down)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from skycore import logs, provision
from skycore.backend.handle import (
    get_handle,
    up_nodes,
)
from skycore.backend.mounts import drain_mounts
from skycore.config import SkycoreConfig
from skycore.core.jobs import settle_orphan_jobs
from skycore.errors import ClusterError, StageError
from skycore.provision import ProvisionError
from skycore.state.clusters import (
    CLUSTER_INIT,
    CLUSTER_STOPPED,
    ClusterRecord,
    get_cluster,
    remove_cluster,
    set_cluster_status,
)
from skycore.state.mounts import MountRecord, get_cluster_mounts
from skycore.storage import recipes
from skycore.storage.common import StorageMode

MOUNTS_REMOVED = "mounts removed by stop/down"


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
