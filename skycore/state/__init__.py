"""skycore's local state: one SQLite file (``$SKYCORE_HOME/state.db``, WAL mode).

Tables: storage (buckets skycore knows about), clusters (one row per cluster, with its
provider handle), cluster_events (every status change with its reason), jobs (the job queue of
each cluster), mounts (the storage mounted on each cluster, replayed by ``start``) and
managed_jobs with managed_job_events (the managed jobs and their status changes).
Every function opens its own short connection, so separate processes (CLI, managed-job
controllers, pytest-xdist workers) can share the file safely.

Modules: db (schema, connections, migrations), storages, clusters (and their events),
jobs, mounts, managed_jobs. Callers use ``state.<name>``: every public name is re-exported
here, except managed_jobs's, which callers reach as ``state.managed_jobs.<name>`` (its names,
``add_job``, ``list_jobs``, ``get``, would clash with a cluster's job queue).
"""

from skycore.state import managed_jobs
from skycore.state.clusters import (
    CLUSTER_INIT,
    CLUSTER_STOPPED,
    CLUSTER_TERMINATED,
    CLUSTER_TRANSITIONS,
    CLUSTER_UP,
    ClusterEvent,
    ClusterRecord,
    ClusterStatus,
    ClusterTransitionError,
    add_cluster_event,
    cluster_events,
    get_cluster,
    list_clusters,
    remove_cluster,
    set_cluster_handle,
    set_cluster_status,
    upsert_cluster,
)
from skycore.state.db import (
    add_event,
    connect,
    db_path,
    legacy_mount_spec,
    query_all,
    query_one,
)
from skycore.state.jobs import (
    JOB_CANCELLED,
    JOB_FAILED,
    JOB_FAILED_DRIVER,
    JOB_FAILED_SETUP,
    JOB_PENDING,
    JOB_RUNNING,
    JOB_SETTING_UP,
    JOB_SUCCEEDED,
    JOB_TERMINAL,
    JobRecord,
    add_job,
    get_job,
    list_jobs,
    new_task_id,
    next_job_id,
    set_job_status,
)
from skycore.state.mounts import (
    MountRecord,
    clusters_using_storage,
    get_cluster_mounts,
    set_cluster_mounts,
)
from skycore.state.storages import (
    StorageRecord,
    add_storage,
    get_storage,
    list_storage,
    remove_storage,
    set_storage_status,
)

__all__ = [
    "CLUSTER_INIT",
    "CLUSTER_STOPPED",
    "CLUSTER_TERMINATED",
    "CLUSTER_TRANSITIONS",
    "CLUSTER_UP",
    "JOB_CANCELLED",
    "JOB_FAILED",
    "JOB_FAILED_DRIVER",
    "JOB_FAILED_SETUP",
    "JOB_PENDING",
    "JOB_RUNNING",
    "JOB_SETTING_UP",
    "JOB_SUCCEEDED",
    "JOB_TERMINAL",
    "ClusterEvent",
    "ClusterRecord",
    "ClusterStatus",
    "ClusterTransitionError",
    "JobRecord",
    "MountRecord",
    "StorageRecord",
    "add_cluster_event",
    "add_event",
    "add_job",
    "add_storage",
    "cluster_events",
    "clusters_using_storage",
    "connect",
    "db_path",
    "get_cluster",
    "get_cluster_mounts",
    "get_job",
    "get_storage",
    "legacy_mount_spec",
    "list_clusters",
    "list_jobs",
    "list_storage",
    "managed_jobs",
    "new_task_id",
    "next_job_id",
    "query_all",
    "query_one",
    "remove_cluster",
    "remove_storage",
    "set_cluster_handle",
    "set_cluster_mounts",
    "set_cluster_status",
    "set_job_status",
    "set_storage_status",
    "upsert_cluster",
]
