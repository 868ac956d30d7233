"""A managed job and its own cluster: the job's log lines and statuses, its nodes as the
provider sees them, and every way its cluster ends (drain the survivors of a preemption,
tear down, adopt the orphaned run of a dead controller). ``Controller`` builds the attempt
loop on top (skycore/managed/controller.py)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from rich.console import Console

from skycore import execution
from skycore.config import SkycoreConfig
from skycore.core import HEALTH_TIMEOUT_S
from skycore.core.clusters import forget_cluster
from skycore.core.jobs import stop_jobs_and_drain
from skycore.core.nodes import NodeStatus, node_statuses, remove_nodes
from skycore.managed import paths
from skycore.state import managed_jobs as jstate
from skycore.state.clusters import ClusterRecord, get_cluster
from skycore.state.jobs import JOB_SUCCEEDED, JobRecord, list_jobs
from skycore.state.managed_jobs import JobStatus
from skycore.task import Task

# After the nodes are removed the worker's streams end at once; a worker still inside the
# health check waits out HEALTH_TIMEOUT_S first.
JOIN_AFTER_KILL_S = HEALTH_TIMEOUT_S + 30
# After a preemption, how long the surviving nodes' cached mounts may take to drain.
PREEMPT_DRAIN_TIMEOUT_S = 60.0
# A teardown (or an orphan's drain) that fails while a node is UP is retried this many times
# in all, waiting TEARDOWN_BACKOFF_S[i] before retry i + 1 (the last value repeats).
TEARDOWN_TRIES = 3
TEARDOWN_BACKOFF_S = (5.0, 15.0)


class JobCluster:
    """One managed job and its cluster (see the module docstring)."""

    def __init__(self, job_id: int, out: TextIO | None = None) -> None:
        self.job_id = job_id
        self.out = out or sys.stdout
        self.console = Console(
            file=self.out, width=120, force_terminal=False, highlight=False, soft_wrap=True
        )
        self.config: SkycoreConfig  # loaded in run(), where a bad config fails the job
        job = self._job()
        self.cluster = job.cluster
        self.task_id = job.task_id
        self.provider = "docker"
        self.region: str | None = None
        self.teardown_tries = TEARDOWN_TRIES
        self.teardown_backoff: Sequence[float] = TEARDOWN_BACKOFF_S

    def _job(self) -> jstate.ManagedJob:
        job = jstate.get(self.job_id)
        if job is None:
            raise RuntimeError(f"managed job {self.job_id} is not recorded")
        return job

    def say(self, message: str) -> None:
        """A controller line in the job log."""
        stamp = time.strftime("%H:%M:%S")
        print(f"[jobs {stamp}] job {self.job_id}: {message}", file=self.out, flush=True)

    def _status(self, status: JobStatus, reason: str, **kw: Any) -> None:
        if jstate.set_status(self.job_id, status, reason, **kw):
            self.say(f"{status.value}: {reason}")

    def _note(self, reason: str) -> None:
        jstate.add_event(self.job_id, reason)
        self.say(reason)

    def _query(self) -> dict[int, NodeStatus] | None:
        try:
            return node_statuses(self.provider, self.cluster, self.config)
        except Exception as e:  # the engine hiccuped: try again at the next poll
            self.say(f"query_instances failed: {e}")
            return None

    # -- clusters ---------------------------------------------------------------------------

    def _terminate(self) -> None:
        """Remove every node of the job's cluster, retrying while the engine is busy (e.g.
        a preempted node's removal still in progress)."""
        last: Exception | None = None
        for _ in range(20):
            try:
                remove_nodes(self.provider, self.cluster, self.config)
                return
            except Exception as e:
                last = e
                time.sleep(0.5)
        self.say(f"removing the nodes of {self.cluster} failed: {last}")

    def _cleanup_cluster(self, reason: str, worker: threading.Thread | None = None) -> None:
        """Remove the job's nodes at once, without a drain, and forget the cluster; the job's
        storage is kept for the relaunch. Callers drain first whatever must be kept (see
        _drain_survivors, _teardown_final)."""
        self._terminate()
        if worker is not None:
            worker.join(JOIN_AFTER_KILL_S)
            if worker.is_alive():
                self.say("the launch did not end after its nodes were removed; going on")
            # A launch that was still provisioning may have created nodes meanwhile.
            self._terminate()
        forget_cluster(self.cluster, f"managed job {self.job_id}: {reason}")

    def _any_node_up(self) -> bool:
        """True if a node of the cluster is UP, or if the provider cannot tell (a drain may
        still be owed to it)."""
        statuses = self._query()
        return statuses is None or any(s is NodeStatus.UP for s in statuses.values())

    def _kept_reason(self, error: Exception) -> str:
        return (
            f"cluster {self.cluster} kept: uploads still pending; run 'skycore down "
            f"{self.cluster}' (teardown failed: {error})"
        )

    def _retry_while_up(
        self,
        what: str,
        step: Callable[[], None],
        tries: int,
        backoff: Sequence[float],
    ) -> Exception | None:
        """Run ``step`` (a down or a drain) until it succeeds. None when it did, or when it
        failed with no node UP (nothing left to drain); the last error when it failed
        ``tries`` times while a node was UP."""
        last: Exception | None = None
        tries = max(1, tries)
        for i in range(tries):
            try:
                step()
                return None
            except Exception as e:
                last = e
            if not self._any_node_up():
                self.say(f"{what} failed ({last}); no node is UP, so nothing is left to drain")
                return None
            if i + 1 < tries:
                wait = backoff[min(i, len(backoff) - 1)] if backoff else 0.0
                self.say(f"{what} failed (try {i + 1}/{tries}): {last}; retrying in {wait:g} s")
                time.sleep(wait)
        self.say(f"{what} failed (try {tries}/{tries}): {last}")
        return last

    def _teardown_final(self) -> str | None:
        """``down``: drain and unmount, remove nodes, delete persistent: false storage.

        None when the cluster is gone. A failed ``down`` removes the nodes without a drain
        only when no node is UP; otherwise it is retried, and if it keeps failing the cluster
        is kept (its cached writes are never thrown away): returns why, for the job's reason.
        """

        def down() -> None:
            exists = get_cluster(self.cluster) is not None or bool(self._query())
            if exists:
                self.say(f"tearing down cluster {self.cluster}")
                execution.down(self.cluster, console=self.console, config=self.config)

        error = self._retry_while_up("teardown", down, self.teardown_tries, self.teardown_backoff)
        if error is None:
            if get_cluster(self.cluster) is not None or self._query():
                self._cleanup_cluster("teardown failed with no node UP")
            return None
        return self._kept_reason(error)

    def _end(self, status: JobStatus, reason: str) -> None:
        """Tear the cluster down and end the job in ``status``; FAILED (cluster kept) if the
        teardown could not drain it."""
        kept = self._teardown_final()
        if kept is None:
            self._status(status, reason)
        elif status is JobStatus.FAILED:
            self._status(JobStatus.FAILED, f"{reason}; {kept}")
        else:
            self._status(JobStatus.FAILED, f"{kept}; the job had ended {status.value}: {reason}")

    def _drain_survivors(self, timeout: float = PREEMPT_DRAIN_TIMEOUT_S) -> None:
        """Before nodes are removed (a preemption, a restart after a user failure, a cancel
        whose kill failed): stop the run on the nodes still UP and drain and unmount their
        cached mounts, for at most ``timeout`` seconds. A failure is logged and the caller
        goes on (the nodes are removed next either way)."""
        record = get_cluster(self.cluster)
        if record is None:
            return
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                cjobs = list_jobs(self.cluster)
                box["n"] = self._stop_and_drain(record, cjobs, "preempt-drain.log")
            except BaseException as e:
                box["error"] = e

        drainer = threading.Thread(target=work, name="drain", daemon=True)
        drainer.start()
        drainer.join(timeout)
        if drainer.is_alive():
            self._note(
                f"draining the surviving nodes did not end within {timeout:g} s; removing them"
            )
        elif "error" in box:
            self._note(f"draining the surviving nodes failed ({box['error']}); removing them")
        elif box.get("n") is not None:
            self._note(f"drained {box['n']} mount(s) on the surviving nodes")

    def _adopt(self, job: jstate.ManagedJob, task: Task) -> bool:
        """The previous controller died mid-job: stop its orphaned run, drain, tear down.

        Returns True if the job is finished (it had succeeded, or a cancel was pending).
        """
        self._note(
            f"controller restarted: the previous controller (pid {job.controller_pid}) is gone"
        )
        record = get_cluster(self.cluster)
        cjobs = list_jobs(self.cluster) if record else []
        if cjobs and cjobs[-1].status == JOB_SUCCEEDED:
            self._end(JobStatus.SUCCEEDED, "the run finished while no controller watched")
            return True
        if record is not None:

            def drain() -> None:
                n = self._stop_and_drain(record, cjobs, "adopt-drain.log")
                if n is not None:
                    self._note(f"stopped the orphaned run and drained {n} mount(s)")

            error = self._retry_while_up(
                "draining the orphaned run", drain, self.teardown_tries, self.teardown_backoff
            )
            if error is not None:
                self._status(JobStatus.FAILED, self._kept_reason(error))
                return True
        if job.cancel_requested:
            self._end(JobStatus.CANCELLED, "cancelled by user")
            return True
        self._cleanup_cluster("controller restarted")
        self._status(
            JobStatus.RECOVERING,
            "controller restarted: relaunching (the run resumes from what was drained)",
        )
        return False

    def _stop_and_drain(
        self, record: ClusterRecord, cjobs: list[JobRecord], log_name: str
    ) -> int | None:
        """Stop the unfinished jobs on the nodes that are UP, then drain and unmount their
        cached mounts; how many mounts (None: no node is UP). Raises if the drain fails."""
        log = paths.job_dir(self.job_id) / log_name
        return stop_jobs_and_drain(record, cjobs, self.config, log)
