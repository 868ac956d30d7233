"""Where a managed job keeps its files: ``$SKYCORE_HOME/managed_jobs/<id>/``.

task.yaml (the task as submitted, paths resolved, secrets redacted), secrets.json (the
secrets' values, readable by the user alone; only when the task has secrets), controller.log
(everything the controller and the job's nodes print) and controller.lock (held by the live
controller for its whole life: a free lock means no controller runs the job).
"""

from __future__ import annotations

from pathlib import Path

from skycore.config import skycore_home


def jobs_root() -> Path:
    """The folder holding one sub-folder per managed job."""
    return skycore_home() / "managed_jobs"


def job_dir(job_id: int) -> Path:
    """The folder of one managed job."""
    return jobs_root() / str(job_id)


def task_path(job_id: int) -> Path:
    """The job's task YAML as submitted."""
    return job_dir(job_id) / "task.yaml"


def secrets_path(job_id: int) -> Path:
    """The values of the job's secrets (task.yaml names them without values)."""
    return job_dir(job_id) / "secrets.json"


def log_path(job_id: int) -> Path:
    """The job's log: controller lines, stage lines and the nodes' output."""
    return job_dir(job_id) / "controller.log"


def lock_path(job_id: int) -> Path:
    """The lock the job's live controller holds."""
    return job_dir(job_id) / "controller.lock"
