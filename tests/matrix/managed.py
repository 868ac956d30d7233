"""Managed jobs of the training program (tests/fixtures/train) for the recipe matrix, through
skycore's public commands: ``skycore jobs launch --use-spot -d`` in a process of its own
(the controller outlives it), the job's log and status, and a clean-up of what was launched.
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
from skycore import provision
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus
from tests.polling import wait_for

TRAIN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "train"
STEPS, EVERY, CKPT_MIB, STEP_S = 60, 5, 2, 0.15
CKPT_KEY = re.compile(r"^ckpt/checkpoint-(\d+)\.(bin|json)$")
RUN_LINE = re.compile(r"^(?:\(head, rank=0\) )?(RESUME step=(\d+)|saved checkpoint (\d+)) ", re.M)


def checkpoint_keys(step: int) -> list[str]:
    """The keys of checkpoint ``step``, in the order the program writes them."""
    return [f"ckpt/checkpoint-{step:06d}.bin", f"ckpt/checkpoint-{step:06d}.json"]


def complete_checkpoints(keys: list[str]) -> list[int]:
    """Steps whose data and manifest are both among ``keys``."""
    kinds: dict[int, set[str]] = {}
    for key in keys:
        m = CKPT_KEY.match(key)
        if m:
            kinds.setdefault(int(m.group(1)), set()).add(m.group(2))
    return sorted(s for s, k in kinds.items() if k == {"bin", "json"})


def usable(bucket: TestBucket, step: int) -> bool:
    """True if checkpoint ``step`` in the store is one a resume may use: its manifest names
    the step, and the data has the size and sha256 the manifest records."""
    try:
        manifest = json.loads(bucket.read(checkpoint_keys(step)[1]))
        data = bucket.read(checkpoint_keys(step)[0])
    except Exception:  # gone or unreadable: not usable
        return False
    return (
        isinstance(manifest, dict)
        and manifest.get("step") == step
        and len(data) == manifest.get("size")
        and hashlib.sha256(data).hexdigest() == manifest.get("sha256")
    )


def durable_checkpoints(bucket: TestBucket) -> list[int]:
    """The steps of the usable checkpoints in the store now."""
    return [s for s in complete_checkpoints(bucket.list_keys()) if usable(bucket, s)]


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
    """Launch managed jobs of the training program and watch them; :meth:`cleanup` ends
    what was launched here (the skycore home may be shared with other scenarios)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.launched: set[int] = set()

    def spec(self, bucket: TestBucket) -> dict[str, Any]:
        """The training task, its checkpoints on ``bucket`` (MOUNT_CACHED)."""
        return {
            "name": "train",
            "workdir": str(TRAIN_DIR),
            "file_mounts": {"/checkpoints": bucket.mount_entry("MOUNT_CACHED")},
            "setup": "python3 --version",
            "run": (
                f"python3 train.py --ckpt-dir /checkpoints/ckpt --steps {STEPS} "
                f"--every {EVERY} --ckpt-mib {CKPT_MIB} --step-seconds {STEP_S}"
            ),
        }

    def launch(self, spec: dict[str, Any], name: str = "train") -> jstate.ManagedJob:
        """``skycore jobs launch TASK --use-spot -n NAME -y -d``."""
        path = self.tmp_path / f"{name}-{time.time_ns()}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        argv = [sys.executable, "-m", "skycore.cli", "jobs", "launch", str(path)]
        done = subprocess.run(
            [*argv, "--use-spot", "-n", name, "-y", "-d"],
            capture_output=True,
            text=True,
            env=dict(os.environ, COLUMNS="200"),
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        m = re.search(r"Managed job (\d+)", done.stdout)
        assert m, done.stdout
        job = jstate.get(int(m.group(1)))
        assert job is not None and job.use_spot
        self.launched.add(job.job_id)
        return job

    def log(self, job: jstate.ManagedJob) -> str:
        path = Path(job.log_path)
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, job: jstate.ManagedJob, pattern: str, timeout: float = 180) -> None:
        """Wait for a line matching ``pattern`` in the job's log."""
        rx = re.compile(pattern, re.M)
        what = f"/{pattern}/ in job {job.job_id}'s log"
        wait_for(what, lambda: rx.search(self.log(job)), timeout)

    def wait_status(
        self, job: jstate.ManagedJob, status: JobStatus, timeout: float
    ) -> jstate.ManagedJob:
        """Wait until the job is ``status``; the job then."""

        def now() -> jstate.ManagedJob | None:
            found = jstate.get(job.job_id)
            return found if found is not None and found.status == status else None

        got: jstate.ManagedJob = wait_for(f"job {job.job_id} to be {status}", now, timeout)
        return got

    def wait_done(self, job: jstate.ManagedJob, timeout: float) -> jstate.ManagedJob:
        """Wait until the job ended and its controller exited."""
        try:
            return core.wait(job.job_id, timeout)
        except TimeoutError as e:
            raise AssertionError(f"{e}\n--- job log ---\n{self.log(job)[-6000:]}") from None

    def cleanup(self) -> None:
        """Cancel what still runs, wait for the controllers, remove leftover nodes."""
        jobs = [j for j in jstate.list_jobs() if j.job_id in self.launched]
        for job in jobs:
            jstate.request_cancel(job.job_id)
        for job in jobs:
            try:
                core.wait(job.job_id, 90)
            except TimeoutError:
                pid = (jstate.get(job.job_id) or job).controller_pid
                if pid and b"skycore.managed.controller" in _cmdline(pid):
                    os.kill(pid, signal.SIGKILL)
        for job in jobs:
            if job.cluster:
                provision.terminate_instances("docker", job.cluster)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
