"""The fault schedule of bench/training_run.py, driven by the training program's own log: a
503 storm over a few checkpoints, an outage of a given length, then one preemption right
after a checkpoint, while the checkpoints before it may still be uploading. Every fault is
scoped to the run's bucket; the times it records are monotonic, in seconds since the run's
start (a checkpoint tried after the outage's end is told by the program's wall-clock time
against the end's, on the same machine: bench_clock's check of the run covers them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import training_model as tm

from harness.cloud import preemption
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus

POLL_S = 0.1


class ScheduleError(Exception):
    """The schedule could not be carried out (the message says what did not happen)."""


class Schedule:
    """Carries out the faults of one run (``run``) and records when each happened."""

    ORDER = (
        "running_s",
        "storm_start_s",
        "storm_end_s",
        "outage_start_s",
        "outage_end_s",
        "preempted_s",
        "recovering_s",
        "resumed_s",
        "done_s",
    )
    """The timeline's keys, in the order they must happen."""

    def __init__(self, args: Any, em: Any, bucket: str, job: jstate.ManagedJob, t0: float):
        self.args = args
        self.em = em
        self.bucket = bucket
        self.job = job
        self.t0 = t0
        self.timeline: dict[str, float] = {}
        self.faults: dict[str, dict[str, Any]] = {}
        self.active: dict[str, int] = {}  # kind -> fault id, while it lasts
        self.recoveries: list[dict[str, Any]] = []

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def log(self) -> str:
        path = Path(self.job.log_path)
        return path.read_text(errors="replace") if path.exists() else ""

    def _status(self) -> jstate.ManagedJob:
        return jstate.get(self.job.job_id) or self.job

    def _start(self, name: str, kind: str, **options: Any) -> None:
        fault = self.em.add_fault(kind, bucket=self.bucket, **options)
        self.active[name] = int(fault["id"])
        self.faults[name] = {"kind": kind, **options, "started_s": self.now()}
        self.timeline[f"{name}_start_s"] = self.faults[name]["started_s"]
        print(f"[{self.now():7.1f} s] {name}: {kind} {options} on {self.bucket}", flush=True)

    def _stop(self, name: str) -> dict[str, Any]:
        fault_id = self.active.pop(name)
        ended = self.em.clear_faults(fault_id=fault_id)
        state = ended[0] if ended else self.em.fault(fault_id)
        info = self.faults[name]
        info.update(ended_s=self.now(), hits=int(state.get("hits", 0)), ended=state.get("ended"))
        self.timeline[f"{name}_end_s"] = info["ended_s"]
        print(f"[{self.now():7.1f} s] {name} over: {info['hits']} request(s) hit", flush=True)
        return info

    def clear_faults(self) -> None:
        """End whatever fault of the schedule still lasts (also after an error)."""
        for name in list(self.active):
            try:
                self._stop(name)
            except Exception as e:  # the gate gone: nothing left to clear
                print(f"clearing {name}: {e}", flush=True)

    def run(self) -> None:
        """Drive the schedule until the job is over (ScheduleError if a step never came)."""
        a = self.args
        deadline = time.monotonic() + a.job_timeout
        outage_ends = None
        outage_ended = None  # the wall-clock time the outage ended (the program's clock)
        while True:
            if time.monotonic() > deadline:
                raise ScheduleError(f"the job was not over after {a.job_timeout:g} s")
            job = self._status()
            if job.status is JobStatus.RUNNING and "running_s" not in self.timeline:
                self.timeline["running_s"] = self.now()
            if job.status.terminal and not core.controller_alive(job.job_id):
                self.timeline["done_s"] = self.now()
                break
            runs = tm.attempts(self.log())
            tries = runs[-1].tries if runs else []
            last = max((s for _, s in tries), default=0)
            if "storm" not in self.faults and last >= a.storm_at:
                self._start("storm", "errors", rate=a.storm_rate, status=503)
            elif "storm" in self.active and last >= a.storm_at + a.storm_checkpoints:
                if self._stop("storm")["hits"] == 0:
                    raise ScheduleError("the 503 storm hit no request")
            elif "storm" in self.faults and "outage" not in self.faults and last >= a.outage_at:
                self._start("outage", "outage")
                outage_ends = time.monotonic() + a.outage_s
            elif "outage" in self.active and outage_ends and time.monotonic() >= outage_ends:
                if self._stop("outage")["hits"] == 0:
                    raise ScheduleError("the outage held no request")
                outage_ended = time.time()
            elif (
                outage_ended is not None
                and not self.recoveries
                and any(t > outage_ended for t, _ in tries)
                and last >= a.preempt_at
            ):
                self._preempt(job, last)
            if job.status.terminal and not self.recoveries:
                raise ScheduleError(f"the job ended {job.status.value} before its preemption")
            time.sleep(POLL_S)
        missing = [k for k in ("storm", "outage") if k not in self.faults]
        if missing or not self.recoveries:
            raise ScheduleError(
                f"the run ended before its {', '.join(missing) or 'preemption'} "
                "(fewer checkpoints than the schedule needs?)"
            )

    def _preempt(self, job: jstate.ManagedJob, after: int) -> None:
        """Preempt node 0 now; wait for the controller to mark the job RECOVERING and note how
        many writes the gate had recorded then (the store when the job was recovered)."""
        at = self.now()
        hit = preemption.preempt(job.cluster, 0)
        self.timeline["preempted_s"] = at
        took = round(self.now() - at, 3)
        print(f"[{at:7.1f} s] preempted {hit.container} after checkpoint {after} ({took} s)")
        deadline = time.monotonic() + 60
        # The recorded events, not the status: the status may have moved on between two looks.
        while not any(
            e.to_status == JobStatus.RECOVERING and "preempted" in e.reason
            for e in jstate.events(job.job_id)
        ):
            if time.monotonic() > deadline:
                raise ScheduleError("the job was not RECOVERING 60 s after its preemption")
            time.sleep(0.05)
        self.timeline["recovering_s"] = self.now()
        self.recoveries.append(
            {
                "after_checkpoint": after,
                "preempted_s": at,
                "preempt_call_s": took,
                "recovering_s": self.timeline["recovering_s"],
                "events_at_recovering": len(self.em.events(self.bucket)),
                "preempted_issued_at": hit.issued_at,
            }
        )
