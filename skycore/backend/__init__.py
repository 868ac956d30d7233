"""The backend: what each pipeline stage does to a cluster's nodes, through the provider API
and CommandRunners (never docker directly). It returns facts and never writes cluster status:
execution (the stage lists) and core (the lifecycle and job operations) own every transition.

- handle: a cluster's nodes and runners (``ClusterHandle``, ``get_handle``, ``up_nodes``).
- provision: start or resume the nodes, wait for health.
- sync: the workdir, plain copies, credentials, storage copies and mounts.
- batch: many commands in one exec per node.
- mounts: mount again after a start, drain cached uploads.
- job_parts: a job's setup and run parts on the nodes, its ids, exit codes, logs and cancel.

skycore's own modules import a name from the module that defines it; this package hands on
the names that harness, the tests and the docs use as ``backend.<name>``.
"""

from skycore.backend.batch import merge_mounts
from skycore.backend.handle import describe_resources, get_handle, resources_of
from skycore.backend.job_parts import CANCELLED_EXIT, JOBS_DIR, cancel_job, run_on_nodes
from skycore.backend.mounts import STORE_WAIT_S

__all__ = [
    "CANCELLED_EXIT",
    "JOBS_DIR",
    "STORE_WAIT_S",
    "cancel_job",
    "describe_resources",
    "get_handle",
    "merge_mounts",
    "resources_of",
    "run_on_nodes",
]
