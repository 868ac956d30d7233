"""The core: the cluster lifecycle (clusters.py) and the job operations (jobs.py). It owns
every cluster and job status transition; execution's stage lists, the CLI and the managed
jobs controller come through here, and the backend does the node work."""

from skycore.backend import DRAIN_TIMEOUT_S, HEALTH_TIMEOUT_S
from skycore.core.clusters import (
    MOUNTS_REMOVED,
    SYNCING,
    check_name,
    cluster_lock,
    existing,
    mark_ready,
    mark_syncing,
    provision_cluster,
    refresh_status,
    require_up,
    start_nodes,
    stop_nodes,
    teardown,
)
from skycore.core.job_logs import LogPrinter, print_job_log
from skycore.core.jobs import (
    adopt_job,
    cached_mounts,
    cancel_job,
    cancel_jobs,
    check_node_drains,
    complete_job_logs,
    reconcile_job,
    refresh_jobs,
    settle_orphan_jobs,
    stop_jobs_and_drain,
    submit_job,
)

__all__ = [
    "DRAIN_TIMEOUT_S",
    "HEALTH_TIMEOUT_S",
    "MOUNTS_REMOVED",
    "SYNCING",
    "LogPrinter",
    "adopt_job",
    "cached_mounts",
    "cancel_job",
    "cancel_jobs",
    "check_name",
    "check_node_drains",
    "cluster_lock",
    "complete_job_logs",
    "existing",
    "mark_ready",
    "mark_syncing",
    "print_job_log",
    "provision_cluster",
    "reconcile_job",
    "refresh_jobs",
    "refresh_status",
    "require_up",
    "settle_orphan_jobs",
    "start_nodes",
    "stop_jobs_and_drain",
    "stop_nodes",
    "submit_job",
    "teardown",
]
