"""A state database written by an older skycore keeps working: the managed jobs' tables, once
created by the managed-jobs package itself, are part of the state schema now, and a table
missing columns the schema has gained since gets them. Real SQLite files, no cloud."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from skycore import state
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus

# The clusters table and the managed-job tables exactly as the previous release created them
# (the managed-job ones from its skycore/jobs/state.py, on first use of a managed job).
OLD_CLUSTERS = """
CREATE TABLE clusters (
    name TEXT PRIMARY KEY, status TEXT NOT NULL, provider TEXT NOT NULL,
    num_nodes INTEGER NOT NULL, resources TEXT NOT NULL, handle TEXT,
    status_reason TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, updated_at REAL NOT NULL
);
"""
OLD_MANAGED_JOBS = """
CREATE TABLE IF NOT EXISTS managed_jobs (
    job_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, status TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '', cluster TEXT NOT NULL DEFAULT '',
    task_id TEXT NOT NULL DEFAULT '', task_yaml TEXT NOT NULL DEFAULT '',
    log_path TEXT NOT NULL DEFAULT '', use_spot INTEGER NOT NULL DEFAULT 0,
    strategy TEXT NOT NULL DEFAULT 'FAILOVER', max_restarts_on_errors INTEGER NOT NULL DEFAULT 0,
    recovery_count INTEGER NOT NULL DEFAULT 0, restarts_on_errors INTEGER NOT NULL DEFAULT 0,
    controller_pid INTEGER, heartbeat REAL, cancel_requested INTEGER NOT NULL DEFAULT 0,
    submitted_at REAL NOT NULL, started_at REAL, ended_at REAL, last_recovered_at REAL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS managed_job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, ts REAL NOT NULL,
    from_status TEXT, to_status TEXT, reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS managed_job_events_by_job ON managed_job_events (job_id, id);
"""
# A managed_jobs table from before the restart and recovery details were kept.
SLIM_MANAGED_JOBS = """
CREATE TABLE managed_jobs (
    job_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, status TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '', cluster TEXT NOT NULL DEFAULT '',
    task_id TEXT NOT NULL DEFAULT '', task_yaml TEXT NOT NULL DEFAULT '',
    log_path TEXT NOT NULL DEFAULT '', use_spot INTEGER NOT NULL DEFAULT 0,
    strategy TEXT NOT NULL DEFAULT 'FAILOVER', max_restarts_on_errors INTEGER NOT NULL DEFAULT 0,
    recovery_count INTEGER NOT NULL DEFAULT 0, controller_pid INTEGER, heartbeat REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0, submitted_at REAL NOT NULL,
    started_at REAL, ended_at REAL
);
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _old_database(home: Path, schema: str) -> None:
    now = time.time()
    with sqlite3.connect(home / "state.db") as conn:
        conn.executescript(schema)
        conn.execute(
            "INSERT INTO clusters VALUES ('c1', 'UP', 'docker', 1, '{}', NULL, 'ok', ?, ?)",
            (now, now),
        )
        conn.execute(
            "INSERT INTO managed_jobs (name, status, status_reason, cluster, use_spot, "
            "max_restarts_on_errors, submitted_at, started_at) "
            "VALUES ('train', 'RUNNING', 'running', 'c1', 1, 2, ?, ?)",
            (now - 60, now - 30),
        )


def test_an_old_database_reads_and_writes_through_the_new_code(home: Path) -> None:
    _old_database(home, OLD_CLUSTERS + OLD_MANAGED_JOBS)
    with sqlite3.connect(home / "state.db") as conn:
        conn.execute(
            "INSERT INTO managed_job_events (job_id, ts, from_status, to_status, reason) "
            "VALUES (1, 1.0, NULL, 'PENDING', 'submitted')"
        )
    job = jstate.get(1)
    assert job is not None
    assert (job.name, job.status, job.cluster, job.use_spot) == (
        "train", JobStatus.RUNNING, "c1", True,
    )  # fmt: skip
    assert [e.reason for e in jstate.events(1)] == ["submitted"]
    assert jstate.set_status(1, JobStatus.RECOVERING, "preempted", recovery=True)
    assert jstate.set_status(1, JobStatus.RUNNING, "recovered")
    again = jstate.get(1)
    assert again is not None and again.recovery_count == 1
    assert [e.to_status for e in jstate.events(1)][-2:] == ["RECOVERING", "RUNNING"]
    assert jstate.add_job("next", use_spot=False, strategy="FAILOVER", max_restarts_on_errors=0)
    assert [j.job_id for j in jstate.list_jobs()] == [2, 1]
    record = state.get_cluster("c1")
    assert record is not None and record.status == "UP"  # the other tables are there too
    assert state.list_jobs("c1") == []


def test_a_table_missing_newer_columns_gets_them(home: Path) -> None:
    _old_database(home, OLD_CLUSTERS + SLIM_MANAGED_JOBS)
    job = jstate.get(1)
    assert job is not None
    assert (job.extra, job.restarts_on_errors, job.last_recovered_at) == ({}, 0, None)
    assert jstate.set_status(1, JobStatus.RECOVERING, "user code failed", restart_on_error=True)
    jstate.set_extra(1, attempt=2)
    again = jstate.get(1)
    assert again is not None
    assert (again.restarts_on_errors, again.extra) == (1, {"attempt": 2})
    with sqlite3.connect(home / "state.db") as conn:
        names = {r[1] for r in conn.execute("PRAGMA table_info(managed_jobs)")}
        assert {"extra", "restarts_on_errors", "last_recovered_at"} <= names
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"managed_job_events", "mounts", "jobs", "storage"} <= tables
