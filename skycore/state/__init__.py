"""skycore's local state: one SQLite file (``$SKYCORE_HOME/state.db``, WAL mode).

Tables: storage (buckets skycore knows about), clusters (one row per cluster, with its
provider handle), cluster_events (every status change with its reason), jobs (the job queue of
each cluster), mounts (the storage mounted on each cluster, replayed by ``start``) and
managed_jobs with managed_job_events (the managed jobs and their status changes).
Every function opens its own short connection, so separate processes (CLI, managed-job
controllers, pytest-xdist workers) can share the file safely.

Modules: db (schema, connections, migrations), storages, clusters (and their events),
jobs, mounts, managed_jobs. skycore's own modules import a name from the module that defines
it; this package hands on the names that harness and the tests use as ``state.<name>``, and
``state.managed_jobs`` (its names, ``add_job``, ``list_jobs``, ``get``, would clash with a
cluster's job queue).
"""

from skycore.state import managed_jobs
from skycore.state.clusters import (
    CLUSTER_INIT,
    CLUSTER_STOPPED,
    CLUSTER_TERMINATED,
    CLUSTER_UP,
    ClusterRecord,
    ClusterTransitionError,
    cluster_events,
    get_cluster,
    list_clusters,
    remove_cluster,
    set_cluster_status,
    upsert_cluster,
)
from skycore.state.db import db_path
from skycore.state.jobs import (
    JOB_CANCELLED,
    JOB_FAILED,
    JOB_FAILED_DRIVER,
    JOB_FAILED_SETUP,
    JOB_RUNNING,
    JOB_SUCCEEDED,
    JOB_TERMINAL,
    add_job,
    get_job,
    list_jobs,
    set_job_status,
)
from skycore.state.mounts import MountRecord, get_cluster_mounts, set_cluster_mounts
from skycore.state.storages import get_storage, list_storage, remove_storage

__all__ = [
    "CLUSTER_INIT",
    "CLUSTER_STOPPED",
    "CLUSTER_TERMINATED",
    "CLUSTER_UP",
    "JOB_CANCELLED",
    "JOB_FAILED",
    "JOB_FAILED_DRIVER",
    "JOB_FAILED_SETUP",
    "JOB_RUNNING",
    "JOB_SUCCEEDED",
    "JOB_TERMINAL",
    "ClusterRecord",
    "ClusterTransitionError",
    "MountRecord",
    "add_job",
    "cluster_events",
    "db_path",
    "get_cluster",
    "get_cluster_mounts",
    "get_job",
    "get_storage",
    "list_clusters",
    "list_jobs",
    "list_storage",
    "managed_jobs",
    "remove_cluster",
    "remove_storage",
    "set_cluster_mounts",
    "set_cluster_status",
    "set_job_status",
    "upsert_cluster",
]
