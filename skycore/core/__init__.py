"""The core: the cluster lifecycle (clusters.py; fit.py, what a task may ask of a cluster;
shutdown.py, stop and down) and the job operations (jobs.py). It owns every cluster and job
status transition; execution's stage lists, the CLI and the managed jobs controller come
through here, and the backend does the node work.

skycore's own modules import a name from the module that defines it; this package hands on
the names that harness, the tests and the docs use as ``core.<name>``, and the backend's
timeouts for the layers above, which may not import the backend."""

from skycore.backend.mounts import DRAIN_TIMEOUT_S
from skycore.backend.provision import HEALTH_TIMEOUT_S
from skycore.core.clusters import (
    cluster_lock,
    existing_or_nodes,
    mark_ready,
    mark_syncing,
    provision_cluster,
    refresh_status,
)
from skycore.core.fit import check_exec_fits, check_same_resources, provider_of
from skycore.core.jobs import reconcile_job
from skycore.core.nodes import cluster_name_problem, node_ips, node_statuses, remove_nodes
from skycore.core.shutdown import MOUNTS_REMOVED, stop_nodes, teardown

__all__ = [
    "DRAIN_TIMEOUT_S",
    "HEALTH_TIMEOUT_S",
    "MOUNTS_REMOVED",
    "check_exec_fits",
    "check_same_resources",
    "cluster_lock",
    "cluster_name_problem",
    "existing_or_nodes",
    "mark_ready",
    "mark_syncing",
    "node_ips",
    "node_statuses",
    "provider_of",
    "provision_cluster",
    "reconcile_job",
    "refresh_status",
    "remove_nodes",
    "stop_nodes",
    "teardown",
]
