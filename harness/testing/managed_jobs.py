"""Managed jobs of the training program (tests/fixtures/train), through skycore's public
commands: ``skycore jobs ...`` in a process of its own (a job's controller outlives it), the
job's log, status and events, the checkpoints it left in its bucket, and a clean-up of the
controllers and clusters of what was launched.

The defaults (the task's steps, the hang guards) are those of tests/smoke/test_recovery.py;
the recipe matrix (tests/matrix) passes its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from harness.testing.buckets import TestBucket
from harness.testing.polling import wait_for
from skycore import provision
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus

TRAIN_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "train"
JOBS_CLI = [sys.executable, "-m", "skycore.cli", "jobs"]

STEPS, EVERY, CKPT_MIB, STEP_S = 30, 5, 2, 0.15
# A hang guard: the controller sees a preemption within about a second (its poll, 0.5 s, and
# a 2 s grace for a node that just lost its commands). How fast is bench/recovery.py's
# (target 5 s).
DETECT_GUARD_S = 30.0
CKPT_KEY_RE = re.compile(r"^ckpt/checkpoint-(\d+)\.(bin|json)$")
RUN_LINE = re.compile(r"^(?:\(head, rank=0\) )?(RESUME step=(\d+)|saved checkpoint (\d+)) ", re.M)


def jobs_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``skycore jobs ...`` in its own process (the controller must outlive it)."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [*JOBS_CLI, *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def checkpoint_keys(step: int) -> list[str]:
    """The keys of checkpoint ``step``, in the order the program writes them."""
    return [f"ckpt/checkpoint-{step:06d}.bin", f"ckpt/checkpoint-{step:06d}.json"]


def complete_checkpoints(keys: list[str]) -> list[int]:
    """Steps whose data and manifest are both among ``keys``."""
    kinds: dict[int, set[str]] = {}
    for key in keys:
        m = CKPT_KEY_RE.match(key)
        if m:
            kinds.setdefault(int(m.group(1)), set()).add(m.group(2))
    return sorted(s for s, k in kinds.items() if k == {"bin", "json"})


def checkpoint_matches(bucket: TestBucket, step: int) -> bool:
    """True if checkpoint ``step`` in the bucket is one a resume may use: its manifest parses
    and names this step, and the data has the size and sha256 the manifest records."""
    data_key, manifest_key = checkpoint_keys(step)
    try:
        manifest = json.loads(bucket.read(manifest_key))
        data = bucket.read(data_key)
    except Exception:  # gone or unreadable: not usable, whatever the store says
        return False
    return (
        isinstance(manifest, dict)
        and manifest.get("step") == step
        and len(data) == manifest.get("size")
        and hashlib.sha256(data).hexdigest() == manifest.get("sha256")
    )


def durable_checkpoints(bucket: TestBucket) -> list[int]:
    """Steps of the checkpoints in the bucket now (listed and read from the store) that a
    resume may use: data and manifest both there and matching."""
    return [s for s in complete_checkpoints(bucket.list_keys()) if checkpoint_matches(bucket, s)]


def attempts(log: str) -> list[tuple[int, list[int]]]:
    """Per run of the program (its RESUME lines): (the step it resumed from, the steps it
    logged as saved)."""
    found: list[tuple[int, list[int]]] = []
    for m in RUN_LINE.finditer(log):
        if m.group(2) is not None:
            found.append((int(m.group(2)), []))
        elif found:
            found[-1][1].append(int(m.group(3)))
    return found


class ManagedJobs:
    """Launch managed jobs of the training program and look at them; :meth:`cleanup` ends
    them (their controllers and clusters)."""

    def __init__(self, tmp_path: Path, own_jobs_only: bool = False) -> None:
        self.tmp_path = tmp_path
        # In a home shared with other tests' jobs (side-by-side scenarios), cleanup touches
        # only the jobs launched here; otherwise every job of the test's own home.
        self.own_jobs_only = own_jobs_only
        self.launched: set[int] = set()

    def spec(
        self,
        bucket: TestBucket,
        *,
        steps: int = STEPS,
        setup: str = "python3 --version",
        extra: str = "",
        job_recovery: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The training task with its checkpoints on ``bucket`` (MOUNT_CACHED)."""
        resources: dict[str, Any] = {}
        if job_recovery is not None:
            resources["job_recovery"] = job_recovery
        spec: dict[str, Any] = {
            "name": "train",
            "workdir": str(TRAIN_DIR),
            "file_mounts": {"/checkpoints": bucket.mount_entry("MOUNT_CACHED")},
            "setup": setup,
            "run": (
                f"python3 train.py --ckpt-dir /checkpoints/ckpt --steps {steps} --every {EVERY} "
                f"--ckpt-mib {CKPT_MIB} --step-seconds {STEP_S} {extra}"
            ),
        }
        if resources:
            spec["resources"] = resources
        return spec

    def launch(
        self, spec: dict[str, Any], name: str = "train", timeout: float = 120
    ) -> jstate.ManagedJob:
        """``skycore jobs launch TASK --use-spot -n NAME -y -d`` in a separate process
        (``timeout`` s at the most)."""
        path = self.tmp_path / f"{name}-{time.time_ns()}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        argv = ["launch", str(path), "--use-spot", "-n", name, "-y", "-d"]
        result = jobs_cli(*argv, timeout=timeout)
        assert result.returncode == 0, result.stdout + result.stderr
        m = re.search(r"Managed job (\d+)", result.stdout)
        assert m, result.stdout
        job = jstate.get(int(m.group(1)))
        assert job is not None and job.use_spot
        self.launched.add(job.job_id)
        return job

    def log(self, job: jstate.ManagedJob) -> str:
        """The job's whole log so far."""
        path = Path(job.log_path)
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, job: jstate.ManagedJob, pattern: str, timeout: float = 90) -> re.Match[str]:
        """Wait for a line matching ``pattern`` in the job log."""
        rx = re.compile(pattern, re.M)
        found: re.Match[str] = wait_for(
            f"/{pattern}/ in job {job.job_id}'s log", lambda: rx.search(self.log(job)), timeout
        )
        return found

    def wait_status(
        self, job: jstate.ManagedJob, *statuses: JobStatus, timeout: float = 90
    ) -> jstate.ManagedJob:
        """Wait until the job is in one of ``statuses``; the job then."""

        def check() -> jstate.ManagedJob | None:
            now = jstate.get(job.job_id)
            return now if now is not None and now.status in statuses else None

        try:
            found: jstate.ManagedJob = wait_for(
                f"job {job.job_id} to be {'/'.join(statuses)}", check, timeout
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- job log ---\n{self.log(job)[-6000:]}") from None
        return found

    def wait_done(self, job: jstate.ManagedJob, timeout: float = 120) -> jstate.ManagedJob:
        """Wait until the job is terminal and its controller has exited."""
        try:
            return core.wait(job.job_id, timeout)
        except TimeoutError as e:
            raise AssertionError(f"{e}\n--- job log ---\n{self.log(job)[-6000:]}") from None

    def resumes(self, job: jstate.ManagedJob) -> list[tuple[int, float]]:
        """(step, time) of every RESUME line: one per attempt that reached the run."""
        return [
            (int(m.group(1)), float(m.group(2)))
            for m in re.finditer(
                r"^(?:\(head, rank=0\) )?RESUME step=(\d+) \S+ t=([\d.]+)", self.log(job), re.M
            )
        ]

    def events(self, job: jstate.ManagedJob) -> list[jstate.JobEvent]:
        """The job's recorded events."""
        return jstate.events(job.job_id)

    def cleanup(self) -> None:
        """Cancel what still runs, wait for the controllers, remove any leftover nodes."""
        jobs = jstate.list_jobs()
        if self.own_jobs_only:
            jobs = [job for job in jobs if job.job_id in self.launched]
        for job in jobs:
            jstate.request_cancel(job.job_id)
        for job in jobs:
            try:
                core.wait(job.job_id, 90)
            except TimeoutError:
                pid = (jstate.get(job.job_id) or job).controller_pid
                if pid and _is_controller(pid):
                    os.kill(pid, signal.SIGKILL)
        for job in jobs:
            if job.cluster:
                provision.terminate_instances("docker", job.cluster)


def check_detection(
    managed: ManagedJobs, job: jstate.ManagedJob, expected_recoveries: int
) -> jstate.ManagedJob:
    """The controller marks the preempted job RECOVERING, saying why (the job then)."""
    now = managed.wait_status(job, JobStatus.RECOVERING, timeout=DETECT_GUARD_S)
    recovering = [
        e
        for e in managed.events(job)
        if e.to_status == JobStatus.RECOVERING and "preempted" in e.reason
    ]
    assert len(recovering) == expected_recoveries
    assert now.recovery_count == expected_recoveries
    return now


def _is_controller(pid: int) -> bool:
    try:
        return b"skycore.managed.controller" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
