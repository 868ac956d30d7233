"""skycore's local state: one SQLite file (``$SKYCORE_HOME/state.db``, WAL mode).

Tables: storage (buckets skycore knows about), clusters (one row per cluster, with its
provider handle), cluster_events (every status change with its reason), jobs (the job queue of
each cluster) and mounts (the storage mounted on each cluster, replayed by ``start``).
Every function opens its own short connection, so separate processes (CLI, managed-job
controllers, pytest-xdist workers) can share the file safely.
"""

from __future__ import annotations

import enum
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skycore.config import skycore_home

_SCHEMA = """
CREATE TABLE IF NOT EXISTS storage (
    name TEXT PRIMARY KEY,
    store TEXT NOT NULL,
    source TEXT,
    sky_managed INTEGER NOT NULL,
    persistent INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS clusters (
    name TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    provider TEXT NOT NULL,
    num_nodes INTEGER NOT NULL,
    resources TEXT NOT NULL,
    handle TEXT,
    status_reason TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster TEXT NOT NULL,
    ts REAL NOT NULL,
    from_status TEXT,
    to_status TEXT,
    reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cluster_events_by_cluster ON cluster_events (cluster, id);
CREATE TABLE IF NOT EXISTS jobs (
    cluster TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    name TEXT,
    status TEXT NOT NULL,
    num_nodes INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    log_dir TEXT NOT NULL,
    driver_pid INTEGER,
    exit_code INTEGER,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    PRIMARY KEY (cluster, job_id)
);
CREATE TABLE IF NOT EXISTS mounts (
    cluster TEXT NOT NULL,
    dst TEXT NOT NULL,
    storage_name TEXT,
    mode TEXT NOT NULL,
    persistent INTEGER NOT NULL DEFAULT 1,
    mount_command TEXT,
    spec TEXT,
    PRIMARY KEY (cluster, dst)
);
"""


def db_path() -> Path:
    """Path of the state database."""
    return skycore_home() / "state.db"


@contextmanager
def connect() -> Iterator[sqlite3.Connection]:
    """A connection in WAL mode with the schema in place; commits on success."""
    path = db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        _migrate(conn)
        yield conn
        conn.commit()
    finally:
        conn.close()


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a database written by an older skycore up to date (idempotent, cheap)."""
    columns = {r["name"] for r in conn.execute("PRAGMA table_info(mounts)")}
    if "spec" not in columns:
        conn.execute("ALTER TABLE mounts ADD COLUMN spec TEXT")
    legacy = conn.execute(
        "SELECT rowid, cluster, dst, mode, mount_command FROM mounts "
        "WHERE spec IS NULL AND mount_command IS NOT NULL"
    ).fetchall()
    for row in legacy:
        spec = legacy_mount_spec(row["mount_command"], row["mode"])
        if spec is None:
            _add_event(
                conn,
                row["cluster"],
                None,
                None,
                f"the mount of {row['dst']} recorded by an older skycore could not be migrated; "
                "launch the task again to record it",
            )
        conn.execute(
            "UPDATE mounts SET spec = ?, mount_command = NULL WHERE rowid = ?",
            (json.dumps(spec) if spec is not None else None, row["rowid"]),
        )


_LEGACY_REMOTE = re.compile(r" mount '?([^'\s]+)'? \"\$DST\"")
_LEGACY_ON_THE_FLY = re.compile(r'^:[^,]+,account=([^,]+),.*":(.*)$')


def legacy_mount_spec(command: str, mode: str) -> dict[str, Any] | None:
    """The mount spec of a mount recorded as bash by skycore before specs (its remote path,
    mode, --transfers and --read-only), or None when the command is not recognised."""
    from skycore.storage.registry import store_classes

    match = _LEGACY_REMOTE.search(command)
    if match is None:
        return None
    remote, _, path = match.group(1).partition(":")
    found: tuple[str, bool, str | None] | None = None
    for name, cls in store_classes().items():
        if remote in (cls.remote_name(), cls.remote_name(anonymous=True)):
            found = (name, remote == cls.remote_name(anonymous=True), None)
    fly = _LEGACY_ON_THE_FLY.match(match.group(1))
    if found is None and fly is not None:
        account_stores = [n for n, c in store_classes().items() if c.url_has_account]
        if account_stores:
            found = (account_stores[0], True, fly.group(1))
            path = fly.group(2)
    if found is None or not path:
        return None
    store, anonymous, account = found
    bucket, _, prefix = path.partition("/")
    transfers = re.search(r"--transfers'? '?(\d+)", command)
    return {
        "store": store,
        "bucket": bucket,
        "prefix": prefix,
        "account": account,
        "mode": mode,
        "anonymous": anonymous,
        "read_only": "--read-only" in command,
        "transfers": int(transfers.group(1)) if transfers else 1,
    }


@dataclass(frozen=True)
class StorageRecord:
    """A bucket skycore created or used."""

    name: str
    store: str
    source: str | None
    sky_managed: bool
    persistent: bool
    status: str
    created_at: float


def _storage(row: sqlite3.Row) -> StorageRecord:
    return StorageRecord(
        name=row["name"],
        store=row["store"],
        source=row["source"],
        sky_managed=bool(row["sky_managed"]),
        persistent=bool(row["persistent"]),
        status=row["status"],
        created_at=row["created_at"],
    )


def add_storage(
    name: str, store: str, source: str | None, sky_managed: bool, persistent: bool, status: str
) -> None:
    """Record a bucket (or update its record)."""
    with connect() as conn:
        conn.execute(
            "INSERT INTO storage (name, store, source, sky_managed, persistent, status, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "store=excluded.store, source=excluded.source, sky_managed=excluded.sky_managed, "
            "persistent=excluded.persistent, status=excluded.status",
            (name, store, source, int(sky_managed), int(persistent), status, time.time()),
        )


def set_storage_status(name: str, status: str) -> None:
    """Change the status of a recorded bucket."""
    with connect() as conn:
        conn.execute("UPDATE storage SET status = ? WHERE name = ?", (status, name))


def get_storage(name: str) -> StorageRecord | None:
    """The record of one bucket, or None."""
    with connect() as conn:
        row = conn.execute("SELECT * FROM storage WHERE name = ?", (name,)).fetchone()
    return _storage(row) if row else None


def list_storage() -> list[StorageRecord]:
    """Every recorded bucket, oldest first."""
    with connect() as conn:
        rows = conn.execute("SELECT * FROM storage ORDER BY created_at").fetchall()
    return [_storage(r) for r in rows]


def remove_storage(name: str) -> None:
    """Forget a bucket."""
    with connect() as conn:
        conn.execute("DELETE FROM storage WHERE name = ?", (name,))


# ---------------------------------------------------------------------------------------------
# Clusters and their events
# ---------------------------------------------------------------------------------------------


class ClusterStatus(enum.StrEnum):
    """A cluster's recorded status. UP means every node answered its health check AND the
    workdir and file mounts are in place: anything less (provisioning, syncing, an
    interrupted launch, mounts removed by stop/down) is INIT, which 'skycore launch' repairs."""

    INIT = "INIT"
    UP = "UP"
    STOPPED = "STOPPED"


CLUSTER_INIT = ClusterStatus.INIT
CLUSTER_UP = ClusterStatus.UP
CLUSTER_STOPPED = ClusterStatus.STOPPED
CLUSTER_TERMINATED = "TERMINATED"  # only ever an event: a terminated cluster has no row

# Which status may follow which (None: no record yet). STOPPED never becomes UP directly:
# start goes through INIT (resume, health, re-mount) first.
CLUSTER_TRANSITIONS: dict[ClusterStatus | None, frozenset[ClusterStatus]] = {
    None: frozenset({ClusterStatus.INIT}),
    ClusterStatus.INIT: frozenset(ClusterStatus),
    ClusterStatus.UP: frozenset(ClusterStatus),
    ClusterStatus.STOPPED: frozenset({ClusterStatus.STOPPED, ClusterStatus.INIT}),
}


class ClusterTransitionError(RuntimeError):
    """A status change the cluster state machine forbids (a bug, never a user error)."""


def _check_transition(name: str, old: str | None, new: ClusterStatus, reason: str) -> None:
    old_status = ClusterStatus(old) if old is not None else None
    if ClusterStatus(new) not in CLUSTER_TRANSITIONS[old_status]:
        raise ClusterTransitionError(
            f"cluster {name}: {old_status} -> {new} is not an allowed change ({reason})"
        )


@dataclass(frozen=True)
class ClusterRecord:
    """A cluster as recorded: status, what it was launched with and the provider's handle."""

    name: str
    status: str
    provider: str
    num_nodes: int
    resources: dict[str, Any]
    handle: dict[str, Any] | None
    status_reason: str
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class ClusterEvent:
    """One status change of a cluster and why it happened."""

    cluster: str
    ts: float
    from_status: str | None
    to_status: str | None
    reason: str


def _cluster(row: sqlite3.Row) -> ClusterRecord:
    return ClusterRecord(
        name=row["name"],
        status=row["status"],
        provider=row["provider"],
        num_nodes=row["num_nodes"],
        resources=json.loads(row["resources"]),
        handle=json.loads(row["handle"]) if row["handle"] else None,
        status_reason=row["status_reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _add_event(
    conn: sqlite3.Connection,
    cluster: str,
    from_status: str | None,
    to_status: str | None,
    reason: str,
) -> None:
    conn.execute(
        "INSERT INTO cluster_events (cluster, ts, from_status, to_status, reason) "
        "VALUES (?, ?, ?, ?, ?)",
        (cluster, time.time(), from_status, to_status, reason),
    )


def upsert_cluster(
    name: str,
    status: ClusterStatus,
    provider: str,
    num_nodes: int,
    resources: dict[str, Any],
    reason: str,
) -> None:
    """Create a cluster record (or update what it is launched with) and set its status.

    The status change, if any, is recorded as an event with ``reason``; a change outside
    CLUSTER_TRANSITIONS raises ClusterTransitionError.
    """
    now = time.time()
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        _check_transition(name, row["status"] if row else None, status, reason)
        if row is None:
            conn.execute(
                "INSERT INTO clusters (name, status, provider, num_nodes, resources, handle, "
                "status_reason, created_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                (name, status, provider, num_nodes, json.dumps(resources), reason, now, now),
            )
            _add_event(conn, name, None, status, reason)
            return
        conn.execute(
            "UPDATE clusters SET status = ?, provider = ?, num_nodes = ?, resources = ?, "
            "status_reason = ?, updated_at = ? WHERE name = ?",
            (status, provider, num_nodes, json.dumps(resources), reason, now, name),
        )
        if row["status"] != status:
            _add_event(conn, name, row["status"], status, reason)


def set_cluster_status(name: str, status: ClusterStatus, reason: str) -> None:
    """Change a cluster's status: the only way a status changes (with upsert_cluster). The
    change is recorded as an event with ``reason``; one outside CLUSTER_TRANSITIONS raises
    ClusterTransitionError."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        if row is None:
            return
        _check_transition(name, row["status"], status, reason)
        conn.execute(
            "UPDATE clusters SET status = ?, status_reason = ?, updated_at = ? WHERE name = ?",
            (status, reason, time.time(), name),
        )
        if row["status"] != status:
            _add_event(conn, name, row["status"], status, reason)


def add_cluster_event(name: str, reason: str) -> None:
    """Record something notable that did not change the status (e.g. 'provisioning skipped')."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        status = row["status"] if row else None
        _add_event(conn, name, status, status, reason)


def set_cluster_handle(name: str, handle: dict[str, Any] | None) -> None:
    """Store the provider's description of the cluster's nodes."""
    with connect() as conn:
        conn.execute(
            "UPDATE clusters SET handle = ?, updated_at = ? WHERE name = ?",
            (json.dumps(handle) if handle is not None else None, time.time(), name),
        )


def get_cluster(name: str) -> ClusterRecord | None:
    """The record of one cluster, or None."""
    with connect() as conn:
        row = conn.execute("SELECT * FROM clusters WHERE name = ?", (name,)).fetchone()
    return _cluster(row) if row else None


def list_clusters() -> list[ClusterRecord]:
    """Every recorded cluster, oldest first."""
    with connect() as conn:
        rows = conn.execute("SELECT * FROM clusters ORDER BY created_at").fetchall()
    return [_cluster(r) for r in rows]


def remove_cluster(name: str, reason: str) -> None:
    """Forget a terminated cluster with its jobs and mounts; the event history is kept."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        conn.execute("DELETE FROM clusters WHERE name = ?", (name,))
        conn.execute("DELETE FROM jobs WHERE cluster = ?", (name,))
        conn.execute("DELETE FROM mounts WHERE cluster = ?", (name,))
        if row is not None:
            _add_event(conn, name, row["status"], CLUSTER_TERMINATED, reason)


def cluster_events(name: str | None = None, limit: int | None = None) -> list[ClusterEvent]:
    """Status changes of one cluster (or all), oldest first; ``limit`` keeps the newest."""
    query = "SELECT * FROM cluster_events"
    args: tuple[Any, ...] = ()
    if name is not None:
        query += " WHERE cluster = ?"
        args = (name,)
    query += " ORDER BY id DESC"
    if limit is not None:
        query += f" LIMIT {int(limit)}"
    with connect() as conn:
        rows = conn.execute(query, args).fetchall()
    return [
        ClusterEvent(r["cluster"], r["ts"], r["from_status"], r["to_status"], r["reason"])
        for r in reversed(rows)
    ]


# ---------------------------------------------------------------------------------------------
# Jobs of a cluster
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Storage used by a cluster
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MountRecord:
    """A storage entry of a cluster: where it lives on the nodes and how to mount it again.

    ``spec`` (Storage.mount_spec: store, bucket, prefix, account, mode, access, transfers) is
    None for COPY entries (nothing to re-mount); the bash is rendered from it by the current
    code at start and relaunch, never stored. ``storage_name`` names the bucket record so
    ``down`` can delete persistent: false storage.
    """

    cluster: str
    dst: str
    storage_name: str | None
    mode: str
    persistent: bool = True
    spec: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def is_mount(self) -> bool:
        """True for MOUNT / MOUNT_CACHED entries (mounted again by start)."""
        return self.spec is not None


def set_cluster_mounts(cluster: str, mounts: list[MountRecord]) -> None:
    """Replace the recorded storage of a cluster."""
    with connect() as conn:
        conn.execute("DELETE FROM mounts WHERE cluster = ?", (cluster,))
        conn.executemany(
            "INSERT INTO mounts (cluster, dst, storage_name, mode, persistent, spec) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    cluster,
                    m.dst,
                    m.storage_name,
                    m.mode,
                    int(m.persistent),
                    json.dumps(m.spec) if m.spec is not None else None,
                )
                for m in mounts
            ],
        )


def clusters_using_storage(storage_name: str, exclude: str | None = None) -> list[str]:
    """Clusters (other than ``exclude``) whose recorded mounts use storage ``storage_name``."""
    with connect() as conn:
        rows = conn.execute(
            "SELECT DISTINCT cluster FROM mounts WHERE storage_name = ? AND cluster != ? "
            "ORDER BY cluster",
            (storage_name, exclude if exclude is not None else ""),
        ).fetchall()
    return [r["cluster"] for r in rows]


def get_cluster_mounts(cluster: str) -> list[MountRecord]:
    """The storage recorded for a cluster, in the order it was mounted."""
    with connect() as conn:
        rows = conn.execute(
            "SELECT * FROM mounts WHERE cluster = ? ORDER BY rowid", (cluster,)
        ).fetchall()
    return [
        MountRecord(
            cluster=r["cluster"],
            dst=r["dst"],
            storage_name=r["storage_name"],
            mode=r["mode"],
            persistent=bool(r["persistent"]),
            spec=json.loads(r["spec"]) if r["spec"] else None,
        )
        for r in rows
    ]
