"""The managed-jobs API behind ``skycore jobs``: launch, queue, cancel, logs.

``launch`` validates the task, records the job (PENDING), saves the task under the job's
folder and starts a detached controller (``python -m skycore.managed.controller ID``, its own
session, stdout to the job log, inheriting SKYCORE_HOME).

Orphans: every call here first adopts orphaned jobs. The rule: a job that is not in a terminal
state, whose controller lock is free (no live controller holds it) and whose last heartbeat
is older than ADOPT_AFTER_S seconds, gets a new controller. The new controller stops what is
left of the old run, drains its cached mounts, tears its cluster down and relaunches it, so
a killed controller never leaks a cluster.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock
import yaml

from skycore.config import load_config
from skycore.errors import JobNotFound as JobNotFound
from skycore.errors import UserError
from skycore.managed import paths
from skycore.managed.recovery import FAILOVER
from skycore.processes import start_detached
from skycore.state import managed_jobs as jstate
from skycore.task import Task

ADOPT_AFTER_S = 5.0


def cluster_name_for(job_id: int, name: str | None) -> str:
    """The job's own cluster: ``<name>-<id>-<6 hex>`` (valid, and unique on a shared engine)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", (name or "job").lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = "job-" + slug
    slug = slug[:20].rstrip("-")
    return f"{slug}-{job_id}-{uuid.uuid4().hex[:6]}"


def task_id_for(job_id: int, name: str | None, submitted_at: float) -> str:
    """The SKYPILOT_TASK_ID every attempt of the job sees (SkyPilot's managed-job form)."""
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.localtime(submitted_at))
    micros = int(submitted_at * 1e6) % 1_000_000
    return f"sky-managed-{stamp}-{micros:06d}_{name or 'job'}_{job_id}-0"


def launch(
    entrypoint: str | Path,
    *,
    name: str | None = None,
    use_spot: bool = False,
    envs: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> jstate.ManagedJob:
    """Submit a task YAML as a managed job and start its controller; returns the job.

    The task is validated first (TaskError: one paragraph, nothing recorded). ``use_spot``
    (``--use-spot``) overrides resources.use_spot; ``envs`` and ``secrets`` are ``--env`` and
    ``--secret``. The task file keeps the secrets' names only; their values go to a file of
    the user's alone (paths.secrets_path), which the controller reads.
    """
    load_config()  # a missing or broken config is reported now, not by the controller
    adopt_orphans()
    task = Task.from_yaml(entrypoint, envs or {}, secret_overrides=secrets)
    if use_spot:
        task.resources = task.resources.model_copy(update={"use_spot": True})
    job_recovery = task.resources.job_recovery
    job = jstate.add_job(
        name or task.name,
        use_spot=bool(task.resources.use_spot),
        strategy=job_recovery.strategy if job_recovery else FAILOVER,
        max_restarts_on_errors=job_recovery.max_restarts_on_errors if job_recovery else 0,
    )
    folder = paths.job_dir(job.job_id)
    folder.mkdir(parents=True, exist_ok=True)
    task_file = paths.task_path(job.job_id)
    task_file.write_text(yaml.safe_dump(task.to_yaml_dict(), sort_keys=False))
    if task.secrets:
        fd = os.open(paths.secrets_path(job.job_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(task.secrets, out)
    jstate.update(
        job.job_id,
        cluster=cluster_name_for(job.job_id, job.name),
        task_id=task_id_for(job.job_id, job.name, job.submitted_at),
        task_yaml=str(task_file),
        log_path=str(paths.log_path(job.job_id)),
    )
    spawn_controller(job.job_id)
    found = jstate.get(job.job_id)
    assert found is not None
    return found


def spawn_controller(job_id: int) -> int:
    """Start the job's controller detached (own session, output to the job log); its pid."""
    log = paths.log_path(job_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    jstate.update(job_id, heartbeat=time.time())
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    with open(log, "ab") as out:
        argv = [sys.executable, "-m", "skycore.managed.controller", str(job_id)]
        return start_detached(argv, out, env).pid


def controller_alive(job_id: int) -> bool:
    """True if a live controller holds the job's lock."""
    path = paths.lock_path(job_id)
    if not path.exists():
        return False
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return True
    lock.release()
    return False


def adopt_orphans(now: float | None = None) -> list[int]:
    """Start a controller for every orphaned job (see the module docstring); their ids."""
    now = time.time() if now is None else now
    adopted = []
    for job in jstate.list_jobs():
        if job.status.terminal or not job.task_yaml:
            continue
        last = job.heartbeat or job.submitted_at
        if now - last < ADOPT_AFTER_S or controller_alive(job.job_id):
            continue
        jstate.add_event(
            job.job_id,
            f"no live controller (last heartbeat {now - last:.0f}s ago): starting a new one",
        )
        spawn_controller(job.job_id)
        adopted.append(job.job_id)
    return adopted


def get(job_id: int) -> jstate.ManagedJob:
    """One job, or JobNotFound with what to run instead."""
    job = jstate.get(job_id)
    if job is None:
        raise JobNotFound(
            f"Managed job {job_id} does not exist. 'skycore jobs queue' lists the jobs."
        )
    return job


def queue() -> list[jstate.ManagedJob]:
    """Every managed job, newest first (orphans are adopted first)."""
    adopt_orphans()
    return jstate.list_jobs()


def cancel(job_ids: list[int] | None = None, all_jobs: bool = False) -> list[int]:
    """Ask the controllers of ``job_ids`` (or of every unfinished job) to cancel.

    The controller kills the run, drains cached mounts and tears the cluster down; the job
    becomes CANCELLED once that is done. Returns the ids that were flagged.
    """
    if not job_ids and not all_jobs:
        raise UserError("Name the job(s) to cancel (skycore jobs cancel ID ...) or pass --all.")
    targets = [j.job_id for j in jstate.list_jobs()] if all_jobs else list(job_ids or [])
    flagged = []
    for job_id in targets:
        if not all_jobs:
            get(job_id)
        if jstate.request_cancel(job_id):
            flagged.append(job_id)
    adopt_orphans()
    return flagged


def wait(job_id: int, timeout: float, poll: float = 0.5) -> jstate.ManagedJob:
    """Wait until the job is terminal and its controller has exited (TimeoutError if not)."""
    deadline = time.monotonic() + timeout
    while True:
        job = get(job_id)
        if job.status.terminal and not controller_alive(job_id):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"managed job {job_id} is still {job.status.value}")
        time.sleep(poll)


def follow_log(
    job_id: int, follow: bool, write: Callable[[str], None], poll: float = 0.3
) -> jstate.ManagedJob:
    """Write the job log; with ``follow`` keep writing until the job is done."""
    job = get(job_id)
    path = Path(job.log_path) if job.log_path else paths.log_path(job_id)
    for chunk in _read_log(path, follow, job_id, poll):
        write(chunk)
    return get(job_id)


def _read_log(path: Path, follow: bool, job_id: int, poll: float) -> Iterator[str]:
    pos = 0
    while True:
        done = get(job_id).status.terminal and not controller_alive(job_id)
        if path.exists():
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
                pos = f.tell()
            if data:
                yield data.decode(errors="replace")
        if not follow or done:
            return
        time.sleep(poll)
