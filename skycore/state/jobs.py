"""The job queue of each cluster: ids, statuses and exit codes."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from skycore.state.db import connect

JOB_PENDING = "PENDING"
JOB_SETTING_UP = "SETTING_UP"
JOB_RUNNING = "RUNNING"
JOB_SUCCEEDED = "SUCCEEDED"
JOB_FAILED = "FAILED"
JOB_FAILED_SETUP = "FAILED_SETUP"
JOB_FAILED_DRIVER = "FAILED_DRIVER"
JOB_CANCELLED = "CANCELLED"
JOB_TERMINAL = frozenset(
    {JOB_SUCCEEDED, JOB_FAILED, JOB_FAILED_SETUP, JOB_FAILED_DRIVER, JOB_CANCELLED}
)


@dataclass(frozen=True)
class JobRecord:
    """One job submitted to a cluster (by ``launch`` or ``exec``)."""

    cluster: str
    job_id: int
    name: str | None
    status: str
    num_nodes: int
    task_id: str
    log_dir: str
    driver_pid: int | None
    exit_code: int | None
    submitted_at: float
    started_at: float | None
    ended_at: float | None


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(**{k: row[k] for k in row.keys()})  # noqa: SIM118


def next_job_id(cluster: str, conn: sqlite3.Connection | None = None) -> int:
    """The id after the last job of ``cluster`` recorded here (1 for none)."""
    if conn is None:
        with connect() as own:
            return next_job_id(cluster, own)
    (last,) = conn.execute(
        "SELECT COALESCE(MAX(job_id), 0) FROM jobs WHERE cluster = ?", (cluster,)
    ).fetchone()
    return int(last) + 1


def new_task_id(cluster: str, job_id: int | str, now: float | None = None) -> str:
    """SKYPILOT_TASK_ID of a new job: ``sky-<time>-<us>_<cluster>_<job id>``."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.localtime(now))
    return f"sky-{stamp}-{int(now * 1e6) % 1_000_000:06d}_{cluster}_{job_id}"


def add_job(
    cluster: str,
    name: str | None,
    num_nodes: int,
    log_dir: str,
    driver_pid: int | None,
    status: str = JOB_PENDING,
    task_id: str | None = None,
    job_id: int | None = None,
    submitted_at: float | None = None,
) -> JobRecord:
    """Append a job to a cluster's queue; job ids count from 1 per cluster. ``job_id``: an
    id reserved elsewhere (the cluster's own job table), which must be free here too."""
    with connect() as conn:
        conn.execute("BEGIN IMMEDIATE")
        if job_id is None:
            job_id = next_job_id(cluster, conn)
        now = time.time() if submitted_at is None else submitted_at
        if task_id is None:
            task_id = new_task_id(cluster, job_id, now)
        conn.execute(
            "INSERT INTO jobs (cluster, job_id, name, status, num_nodes, task_id, log_dir, "
            "driver_pid, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cluster, job_id, name, status, num_nodes, task_id, log_dir, driver_pid, now),
        )
        row = conn.execute(
            "SELECT * FROM jobs WHERE cluster = ? AND job_id = ?", (cluster, job_id)
        ).fetchone()
    return _job(row)


def set_job_status(cluster: str, job_id: int, status: str, exit_code: int | None = None) -> bool:
    """Move a job to ``status``; terminal states record the end time (and exit code).

    A job that already reached a terminal status keeps it: the update only applies while the
    job is unfinished. Returns whether the job changed (False: it was already finished, or
    it does not exist), so callers can act only on a transition they made.
    """
    now = time.time()
    unfinished = f"status NOT IN ({', '.join('?' for _ in JOB_TERMINAL)})"
    terminal = tuple(sorted(JOB_TERMINAL))
    where = f"WHERE cluster = ? AND job_id = ? AND {unfinished}"
    with connect() as conn:
        if status == JOB_RUNNING:
            cur = conn.execute(
                f"UPDATE jobs SET status = ?, started_at = COALESCE(started_at, ?) {where}",
                (status, now, cluster, job_id, *terminal),
            )
        elif status in JOB_TERMINAL:
            cur = conn.execute(
                f"UPDATE jobs SET status = ?, exit_code = ?, ended_at = ? {where}",
                (status, exit_code, now, cluster, job_id, *terminal),
            )
        else:
            cur = conn.execute(
                f"UPDATE jobs SET status = ? {where}",
                (status, cluster, job_id, *terminal),
            )
        return cur.rowcount > 0


def get_job(cluster: str, job_id: int) -> JobRecord | None:
    """One job of a cluster, or None."""
    with connect() as conn:
        row = conn.execute(
            "SELECT * FROM jobs WHERE cluster = ? AND job_id = ?", (cluster, job_id)
        ).fetchone()
    return _job(row) if row else None


def list_jobs(cluster: str | None = None) -> list[JobRecord]:
    """Jobs of one cluster (or all), oldest first."""
    with connect() as conn:
        if cluster is None:
            rows = conn.execute("SELECT * FROM jobs ORDER BY submitted_at").fetchall()
        else:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE cluster = ? ORDER BY job_id", (cluster,)
            ).fetchall()
    return [_job(r) for r in rows]
