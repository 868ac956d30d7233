"""The backend: what each pipeline stage does to a cluster's nodes, through the provider API
and CommandRunners (never docker directly). It returns facts and never writes cluster status:
execution (the stage lists) and core (the lifecycle and job operations) own every transition.

- handle: a cluster's nodes and runners (``ClusterHandle``, ``get_handle``, ``up_nodes``).
- provision: start or resume the nodes, wait for health.
- sync: the workdir, plain copies, credentials, storage copies and mounts.
- batch: many commands in one exec per node.
- mounts: mount again after a start, drain cached uploads.
- job_parts: a job's setup and run parts on the nodes, its ids, exit codes, logs and cancel.
"""

from skycore.backend.batch import batch_script, merge_mounts, run_batch
from skycore.backend.handle import (
    ClusterHandle,
    describe_resources,
    get_handle,
    resources_of,
    up_nodes,
)
from skycore.backend.job_parts import (
    CANCELLED_EXIT,
    ID_PLACEHOLDER,
    JOBS_DIR,
    NEVER_STARTED,
    cancel_job,
    drain_failure,
    follow_job,
    job_exit_codes,
    read_job_meta,
    refresh_job_logs,
    reserve_job_id,
    run_on_nodes,
)
from skycore.backend.mounts import (
    DRAIN_TIMEOUT_S,
    STORE_PROBE_S,
    STORE_WAIT_S,
    drain_mounts,
    remount,
)
from skycore.backend.provision import HEALTH_TIMEOUT_S, node_problems, start_nodes, wait_healthy
from skycore.backend.sync import (
    WORKDIR,
    check_bucket_sources,
    start_storage_prepare,
    sync_file_mounts,
    sync_workdir,
)
from skycore.errors import ClusterError, StageError

__all__ = [
    "CANCELLED_EXIT",
    "DRAIN_TIMEOUT_S",
    "HEALTH_TIMEOUT_S",
    "ID_PLACEHOLDER",
    "JOBS_DIR",
    "NEVER_STARTED",
    "STORE_PROBE_S",
    "STORE_WAIT_S",
    "WORKDIR",
    "ClusterError",
    "ClusterHandle",
    "StageError",
    "batch_script",
    "cancel_job",
    "check_bucket_sources",
    "describe_resources",
    "drain_failure",
    "drain_mounts",
    "follow_job",
    "get_handle",
    "job_exit_codes",
    "merge_mounts",
    "node_problems",
    "read_job_meta",
    "refresh_job_logs",
    "remount",
    "reserve_job_id",
    "resources_of",
    "run_batch",
    "run_on_nodes",
    "start_nodes",
    "start_storage_prepare",
    "sync_file_mounts",
    "sync_workdir",
    "up_nodes",
    "wait_healthy",
]
