"""Managed jobs in the state database: one row per job plus every status change.

The tables (managed_jobs, managed_job_events) are part of the state database's schema
(``skycore.state.db``). Every function opens its own short connection, so the CLI, the
detached controllers and tests share the file safely.

A job moves PENDING -> STARTING -> RUNNING -> SUCCEEDED; a preemption (or a restart allowed by
``max_restarts_on_errors``) goes through RECOVERING back to RUNNING. Terminal states are
SUCCEEDED, FAILED, FAILED_SETUP, FAILED_NO_RESOURCE and CANCELLED; nothing leaves them. Every
transition is recorded with its time and reason.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from skycore.errors import TransitionError as TransitionError
from skycore.state.db import Event, connect, from_row, query_all, query_one


class JobStatus(enum.StrEnum):
    """The status of a managed job."""

    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    RECOVERING = "RECOVERING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    FAILED_NO_RESOURCE = "FAILED_NO_RESOURCE"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """True for the states a job never leaves."""
        return self in TERMINAL


TERMINAL = frozenset(
    {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.FAILED_SETUP,
        JobStatus.FAILED_NO_RESOURCE,
        JobStatus.CANCELLED,
    }
)

# Which states a job may move to from each non-terminal state.
ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.STARTING, *TERMINAL}),
    JobStatus.STARTING: frozenset({JobStatus.RUNNING, JobStatus.RECOVERING, *TERMINAL}),
    JobStatus.RUNNING: frozenset({JobStatus.RECOVERING, *TERMINAL}),
    JobStatus.RECOVERING: frozenset({JobStatus.RUNNING, *TERMINAL}),
}


@dataclass(frozen=True)
class ManagedJob:
    """One managed job as recorded."""

    job_id: int
    name: str | None
    status: JobStatus
    status_reason: str
    cluster: str
    task_id: str
    task_yaml: str
    log_path: str
    use_spot: bool
    strategy: str
    max_restarts_on_errors: int
    recovery_count: int
    restarts_on_errors: int
    controller_pid: int | None
    heartbeat: float | None
    cancel_requested: bool
    submitted_at: float
    started_at: float | None
    ended_at: float | None
    last_recovered_at: float | None
    extra: dict[str, Any]


@dataclass(frozen=True)
class JobEvent(Event):
    """One recorded event of a job: a status change, or a note when from == to."""

    job_id: int


def _row(row: sqlite3.Row) -> ManagedJob:
    return from_row(
        ManagedJob,
        row,
        status=JobStatus,
        use_spot=bool,
        cancel_requested=bool,
        extra=lambda v: json.loads(v or "{}"),
    )


def _event(
    conn: sqlite3.Connection, job_id: int, from_s: str | None, to_s: str | None, reason: str
) -> None:
    conn.execute(
        "INSERT INTO managed_job_events (job_id, ts, from_status, to_status, reason) "
        "VALUES (?, ?, ?, ?, ?)",
        (job_id, time.time(), from_s, to_s, reason),
    )


def add_job(
    name: str | None,
    *,
    use_spot: bool,
    strategy: str,
    max_restarts_on_errors: int,
) -> ManagedJob:
    """Record a new PENDING job; the caller fills in cluster, task id and paths next."""
    with connect() as conn:
        cur = conn.execute(
            "INSERT INTO managed_jobs (name, status, status_reason, use_spot, strategy, "
            "max_restarts_on_errors, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                name,
                JobStatus.PENDING.value,
                "submitted",
                int(use_spot),
                strategy,
                max_restarts_on_errors,
                time.time(),
            ),
        )
        job_id = int(cur.lastrowid or 0)
        _event(conn, job_id, None, JobStatus.PENDING.value, "submitted")
        row = conn.execute("SELECT * FROM managed_jobs WHERE job_id = ?", (job_id,)).fetchone()
    return _row(row)


_UPDATABLE = {
    "cluster",
    "task_id",
    "task_yaml",
    "log_path",
    "controller_pid",
    "heartbeat",
    "last_recovered_at",
}


def update(job_id: int, **fields: Any) -> None:
    """Set plain fields of a job (cluster, task_id, task_yaml, log_path, controller_pid...)."""
    bad = set(fields) - _UPDATABLE
    if bad:
        raise ValueError(f"not updatable: {sorted(bad)}")
    if not fields:
        return
    cols = ", ".join(f"{k} = ?" for k in fields)
    with connect() as conn:
        conn.execute(f"UPDATE managed_jobs SET {cols} WHERE job_id = ?", (*fields.values(), job_id))


def set_extra(job_id: int, **values: Any) -> None:
    """Merge ``values`` into the job's free-form JSON details."""
    with connect() as conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT extra FROM managed_jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            return
        extra = json.loads(row["extra"] or "{}")
        extra.update(values)
        conn.execute(
            "UPDATE managed_jobs SET extra = ? WHERE job_id = ?", (json.dumps(extra), job_id)
        )


def set_status(
    job_id: int,
    status: JobStatus,
    reason: str,
    *,
    recovery: bool = False,
    restart_on_error: bool = False,
) -> bool:
    """Move a job to ``status`` and record why; False (nothing changes) if it is terminal.

    ``recovery`` counts a preemption recovery, ``restart_on_error`` a restart allowed by
    max_restarts_on_errors. Raises TransitionError for a move the state machine forbids.
    """
    now = time.time()
    with connect() as conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT status FROM managed_jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise TransitionError(f"managed job {job_id} does not exist")
        old = JobStatus(row["status"])
        if old.terminal:
            return False
        if status != old and status not in ALLOWED[old]:
            raise TransitionError(f"job {job_id}: {old} -> {status} is not allowed")
        sets = ["status = ?", "status_reason = ?"]
        args: list[Any] = [status.value, reason]
        if status is JobStatus.RUNNING:
            sets.append("started_at = COALESCE(started_at, ?)")
            args.append(now)
        if status.terminal:
            sets.append("ended_at = ?")
            args.append(now)
        if recovery:
            sets += ["recovery_count = recovery_count + 1", "last_recovered_at = ?"]
            args.append(now)
        if restart_on_error:
            sets.append("restarts_on_errors = restarts_on_errors + 1")
        conn.execute(f"UPDATE managed_jobs SET {', '.join(sets)} WHERE job_id = ?", (*args, job_id))
        if status != old or recovery or restart_on_error:
            _event(conn, job_id, old.value, status.value, reason)
    return True


def add_event(job_id: int, reason: str) -> None:
    """Record something notable that is not a status change (e.g. 'nodes up')."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM managed_jobs WHERE job_id = ?", (job_id,)).fetchone()
        status = row["status"] if row else None
        _event(conn, job_id, status, status, reason)


def request_cancel(job_id: int) -> bool:
    """Flag a job for cancellation (its controller acts on it); False if already terminal."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM managed_jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None or JobStatus(row["status"]).terminal:
            return False
        conn.execute("UPDATE managed_jobs SET cancel_requested = 1 WHERE job_id = ?", (job_id,))
        _event(conn, job_id, row["status"], row["status"], "cancel requested")
    return True


def get(job_id: int) -> ManagedJob | None:
    """One job, or None."""
    row = query_one("SELECT * FROM managed_jobs WHERE job_id = ?", (job_id,))
    return _row(row) if row else None


def list_jobs() -> list[ManagedJob]:
    """Every managed job, newest first."""
    rows = query_all("SELECT * FROM managed_jobs ORDER BY job_id DESC")
    return [_row(r) for r in rows]


def events(job_id: int) -> list[JobEvent]:
    """The recorded events of a job, oldest first."""
    rows = query_all("SELECT * FROM managed_job_events WHERE job_id = ? ORDER BY id", (job_id,))
    return [from_row(JobEvent, r) for r in rows]
