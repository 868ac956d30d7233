"""The controller of one managed job: ``python -m skycore.managed.controller JOB_ID``.

It runs detached on this machine (its own session, output to the job's controller.log),
holds the job's controller lock for its whole life and writes a heartbeat every second.

One attempt = ``skycore.execution.launch`` of the task on the job's own cluster, in a worker
thread, while the controller polls the provider every POLL_S seconds:

- every node UP once and then one missing or not UP: a preemption. The job goes RECOVERING
  (recovery count + 1); on the nodes still UP the run is stopped and the cached mounts are
  drained and unmounted (at most PREEMPT_DRAIN_TIMEOUT_S: the preempted node's writes are
  gone, the survivors' are kept); then what is left of the cluster is removed (which also
  ends the worker's streams), and the strategy relaunches it: same region first (FAILOVER),
  storage mounted again, setup and run again with the same SKYPILOT_TASK_ID;
- the run exits non-zero on a healthy cluster: a user failure. FAILED / FAILED_SETUP, unless
  ``job_recovery.max_restarts_on_errors`` allows another restart;
- no nodes could be had (provisioning failed) after the strategy's retries: FAILED_NO_RESOURCE;
- cancel requested: the run is killed, cached mounts drain, the cluster is torn down.

A job ends (any terminal state) only after its cluster is torn down with ``down`` semantics:
cached mounts drained and unmounted, nodes removed, persistent: false storage deleted. A
controller started for a job whose previous controller died (see ``skycore.managed.core``)
stops the orphaned run, drains what it wrote and relaunches it instead of leaking a cluster.

Nodes are removed without a drain only when none of them is UP (nothing is left to drain).
While a node is UP, a failed ``down`` or drain (e.g. a drain timeout: nothing was unmounted,
nothing lost) is retried TEARDOWN_TRIES times with backoff; if it still fails the cluster is
kept with its cached writes and the job ends FAILED, saying to run ``skycore down``.
"""

from __future__ import annotations

import argparse
import enum
import io
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, TextIO

import filelock

from skycore import execution
from skycore.config import ConfigError, load_config
from skycore.core import DRAIN_TIMEOUT_S
from skycore.core.fit import provider_of
from skycore.core.jobs import cancel_job
from skycore.core.nodes import NodeStatus
from skycore.errors import ProvisionError, StageError, UserError
from skycore.managed import paths, recovery
from skycore.managed.job_cluster import JOIN_AFTER_KILL_S, JobCluster
from skycore.state import managed_jobs as jstate
from skycore.state.clusters import CLUSTER_UP, get_cluster
from skycore.state.jobs import (
    JOB_CANCELLED,
    JOB_FAILED_SETUP,
    JOB_RUNNING,
    JOB_SUCCEEDED,
    get_job,
    list_jobs,
)
from skycore.state.managed_jobs import JobStatus
from skycore.task import Task

POLL_S = 0.5
LOCK_WAIT_S = 2.0
HEARTBEAT_S = 1.0
# How long a failed attempt's nodes are watched before the failure counts as the user's.
PREEMPT_GRACE_S = 2.0


class Outcome(enum.Enum):
    """How one attempt ended."""

    SUCCEEDED = "SUCCEEDED"
    PREEMPTED = "PREEMPTED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    NO_RESOURCE = "NO_RESOURCE"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"


@dataclass
class Attempt:
    """The outcome of one attempt and why."""

    outcome: Outcome
    reason: str


class Controller(JobCluster):
    """Runs one managed job to a terminal state (see the module docstring)."""

    def __init__(self, job_id: int, out: TextIO | None = None) -> None:
        super().__init__(job_id, out)
        self._stop = threading.Event()

    # -- small helpers ----------------------------------------------------------------------

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                jstate.update(self.job_id, heartbeat=time.time())
            except Exception as e:  # a busy database must not kill the controller
                self.say(f"heartbeat not recorded: {e}")

    def _cancel_requested(self) -> bool:
        return self._job().cancel_requested

    @staticmethod
    def _missing(statuses: dict[int, NodeStatus], num_nodes: int) -> list[int]:
        return [r for r in range(num_nodes) if statuses.get(r) is not NodeStatus.UP]

    def _load_task(self) -> Task:
        job = self._job()
        secrets = paths.secrets_path(self.job_id)
        given = json.loads(secrets.read_text()) if secrets.exists() else None
        task = Task.from_yaml(job.task_yaml, secret_overrides=given)
        self.provider = provider_of(task)
        return task

    # -- the job ----------------------------------------------------------------------------

    def run(self) -> int:
        """Take the job's controller lock and run the job; 0 unless the controller broke."""
        paths.job_dir(self.job_id).mkdir(parents=True, exist_ok=True)
        # A probe (core.controller_alive) holds the lock for microseconds; a live controller
        # holds it for good. Waiting LOCK_WAIT_S tells them apart.
        lock = filelock.FileLock(str(paths.lock_path(self.job_id)), timeout=LOCK_WAIT_S)
        try:
            lock.acquire()
        except filelock.Timeout:
            self.say("another controller runs this job; this one exits")
            return 0
        heart = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
        try:
            jstate.update(self.job_id, controller_pid=os.getpid(), heartbeat=time.time())
            heart.start()
            try:
                self.config = load_config()
            except ConfigError as e:
                self._status(JobStatus.FAILED, str(e))
                return 0
            self._run_job()
            return 0
        except Exception as e:
            self.say("controller error:\n" + traceback.format_exc())
            self._end(JobStatus.FAILED, f"controller error: {type(e).__name__}: {e}")
            return 1
        finally:
            self._stop.set()
            self._forget_secrets()
            lock.release()

    def _forget_secrets(self) -> None:
        """Delete the secrets' values once the job has ended: no attempt will need them."""
        try:
            if self._job().status.terminal:
                paths.secrets_path(self.job_id).unlink(missing_ok=True)
        except Exception as e:  # a busy database leaves the file for the next controller
            self.say(f"secrets not removed yet: {e}")

    def _run_job(self) -> None:
        job = self._job()
        if job.status.terminal:
            self.say(f"already {job.status.value}; nothing to do")
            return
        try:
            task = self._load_task()
        except (UserError, ProvisionError) as e:
            # An adopted job may have left a cluster behind.
            if job.cancel_requested:
                self._end(JobStatus.CANCELLED, "cancelled by user")
            else:
                self._end(JobStatus.FAILED, str(e))
            return
        if job.status is not JobStatus.PENDING and self._adopt(job, task):
            return
        strategy = recovery.strategy_for(job.strategy, self.provider)
        while True:
            job = self._job()
            if job.status.terminal:
                return
            if job.cancel_requested:
                self._end(JobStatus.CANCELLED, "cancelled by user")
                return
            if job.status is JobStatus.PENDING:
                self._status(JobStatus.STARTING, f"launching cluster {self.cluster}")
            attempt = self._launch(strategy, task)
            if self._handle(attempt):
                return

    def _handle(self, attempt: Attempt) -> bool:
        """Act on an attempt's outcome; True when the job reached a terminal state."""
        out = attempt.outcome
        if out is Outcome.PREEMPTED:
            return False  # RECOVERING was recorded when it was detected; relaunch
        if out in (Outcome.FAILED, Outcome.FAILED_SETUP):
            job = self._job()
            if recovery.may_restart_on_error(job):
                # Keep what setup or run wrote to cached mounts before the nodes go.
                self._drain_survivors()
                self._cleanup_cluster(f"restarting after a user failure: {attempt.reason}")
                n = job.restarts_on_errors + 1
                self._status(
                    JobStatus.RECOVERING,
                    f"{attempt.reason}; restart {n}/{job.max_restarts_on_errors} "
                    "(job_recovery.max_restarts_on_errors)",
                    restart_on_error=True,
                )
                return False
        final = {
            Outcome.SUCCEEDED: JobStatus.SUCCEEDED,
            Outcome.CANCELLED: JobStatus.CANCELLED,
            Outcome.FAILED: JobStatus.FAILED,
            Outcome.FAILED_SETUP: JobStatus.FAILED_SETUP,
            Outcome.NO_RESOURCE: JobStatus.FAILED_NO_RESOURCE,
            Outcome.ERROR: JobStatus.FAILED,
        }[out]
        self._end(final, attempt.reason)
        return True

    def _launch(self, strategy: recovery.Strategy, task: Task) -> Attempt:
        """Launch with the strategy's regions and retries until an attempt gets nodes."""
        plan = strategy.launch_plan(self.region)
        last = Attempt(Outcome.NO_RESOURCE, "no region to launch in")
        for i, (region, wait) in enumerate(plan):
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self._cancel_requested():
                    return Attempt(Outcome.CANCELLED, "cancelled by user")
                time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
            same = " (same region first)" if region == self.region else ""
            self._note(
                f"launching cluster {self.cluster} in region {region}{same}, try {i + 1}/"
                f"{len(plan)} ({strategy.name})"
            )
            attempt = self._attempt(task)
            if attempt.outcome is not Outcome.NO_RESOURCE:
                self.region = region
                return attempt
            last = attempt
            self._note(f"no nodes in region {region}: {attempt.reason}")
            self._cleanup_cluster("launch failed")
        return last

    # -- one attempt ------------------------------------------------------------------------

    def _attempt(self, task: Task) -> Attempt:
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = execution.launch(
                    task,
                    self.cluster,
                    console=self.console,
                    config=self.config,
                    stream=True,
                    task_id=self.task_id,
                )
            except BaseException as e:
                box["error"] = e

        worker = threading.Thread(target=work, name="launch", daemon=True)
        worker.start()
        seen_up = False
        running = False
        while worker.is_alive():
            if self._cancel_requested():
                return self._cancel_running(worker)
            statuses = self._query()
            if statuses is not None:
                missing = self._missing(statuses, task.num_nodes)
                if not missing and not seen_up:
                    seen_up = True
                    self._note(f"nodes up: {task.num_nodes} node(s) of {self.cluster}")
                elif missing and seen_up:
                    return self._preempted(worker, missing)
            if seen_up and not running and self._run_started():
                running = True
                job = self._job()
                after = " after a recovery" if job.status is JobStatus.RECOVERING else ""
                self._status(JobStatus.RUNNING, f"run started on {task.num_nodes} node(s){after}")
            worker.join(POLL_S)
        return self._classify(box, seen_up, task)

    def _run_started(self) -> bool:
        jobs = list_jobs(self.cluster)
        return bool(jobs) and jobs[-1].status == JOB_RUNNING

    def _classify(self, box: dict[str, Any], seen_up: bool, task: Task) -> Attempt:
        result: execution.RunResult | None = box.get("result")
        error: BaseException | None = box.get("error")
        if result is not None and result.job_status == JOB_SUCCEEDED:
            return Attempt(Outcome.SUCCEEDED, "the run finished on every node; mounts drained")
        record = get_cluster(self.cluster)
        had_nodes = seen_up or bool(record is not None and record.handle)
        missing = self._missing_after_failure(task.num_nodes) if had_nodes else []
        if missing and record is not None:
            return self._preempted(None, missing)
        if result is not None:
            code = None
            if result.job_id is not None:
                cjob = get_job(self.cluster, result.job_id)
                code = cjob.exit_code if cjob else None
            if result.job_status == JOB_CANCELLED:
                return Attempt(Outcome.CANCELLED, "cancelled by user")
            if result.job_status == JOB_FAILED_SETUP:
                return Attempt(Outcome.FAILED_SETUP, f"setup failed (exit {code})")
            return Attempt(Outcome.FAILED, f"the run failed (exit {code})")
        if isinstance(error, UserError):
            return Attempt(Outcome.ERROR, error.message)
        if isinstance(error, StageError | ProvisionError) and (
            record is None or record.status != CLUSTER_UP
        ):
            return Attempt(Outcome.NO_RESOURCE, f"provisioning failed: {error}")
        return Attempt(Outcome.ERROR, f"launch failed: {type(error).__name__}: {error}")

    def _missing_after_failure(self, num_nodes: int) -> list[int]:
        """Nodes gone after the launch failed. A node being removed can still show as running
        for a moment after its commands died, so look again for PREEMPT_GRACE_S first."""
        deadline = time.monotonic() + PREEMPT_GRACE_S
        while True:
            statuses = self._query()
            missing = self._missing(statuses, num_nodes) if statuses is not None else []
            if missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.2)

    def _preempted(self, worker: threading.Thread | None, missing: list[int]) -> Attempt:
        nodes = ", ".join(map(str, missing))
        reason = f"preempted: node(s) {nodes} of cluster {self.cluster} gone"
        self._status(JobStatus.RECOVERING, reason, recovery=True)
        self._drain_survivors()
        self._cleanup_cluster(reason, worker)
        return Attempt(Outcome.PREEMPTED, reason)

    def _cancel_running(self, worker: threading.Thread) -> Attempt:
        """Stop the attempt for a cancel: kill the run (its mounts drain) or the nodes."""
        self._note("cancelling: stopping the run")
        jobs = list_jobs(self.cluster)
        record = get_cluster(self.cluster)
        if jobs and record is not None and jobs[-1].status == JOB_RUNNING:
            cjob = jobs[-1]
            try:
                cancel_job(record, cjob.job_id, self.config)
            except Exception as e:
                self.say(f"killing the run failed ({e}); draining, then removing the nodes")
                self._drain_survivors()
                self._terminate()
            # The pipeline drains the cached mounts before it returns.
            worker.join(DRAIN_TIMEOUT_S)
        else:
            # Provisioning or setup: nothing of the run to keep; stop it by removing nodes.
            self._terminate()
            worker.join(JOIN_AFTER_KILL_S)
        return Attempt(Outcome.CANCELLED, "cancelled by user")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the detached controller process."""
    parser = argparse.ArgumentParser(prog="python -m skycore.managed.controller")
    parser.add_argument("job_id", type=int)
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    return Controller(args.job_id).run()


if __name__ == "__main__":
    sys.exit(main())
