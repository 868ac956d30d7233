"""The state database: its schema (every table, the managed jobs' too), a short connection per
call (WAL mode), migrations of older files, and the reader of mount commands recorded by
older versions."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from skycore.config import skycore_home
from skycore.stores import store_classes

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
CREATE TABLE IF NOT EXISTS managed_jobs (
    job_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT,
    status TEXT NOT NULL,
    status_reason TEXT NOT NULL DEFAULT '',
    cluster TEXT NOT NULL DEFAULT '',
    task_id TEXT NOT NULL DEFAULT '',
    task_yaml TEXT NOT NULL DEFAULT '',
    log_path TEXT NOT NULL DEFAULT '',
    use_spot INTEGER NOT NULL DEFAULT 0,
    strategy TEXT NOT NULL DEFAULT 'FAILOVER',
    max_restarts_on_errors INTEGER NOT NULL DEFAULT 0,
    recovery_count INTEGER NOT NULL DEFAULT 0,
    restarts_on_errors INTEGER NOT NULL DEFAULT 0,
    controller_pid INTEGER,
    heartbeat REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    last_recovered_at REAL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS managed_job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    ts REAL NOT NULL,
    from_status TEXT,
    to_status TEXT,
    reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS managed_job_events_by_job ON managed_job_events (job_id, id);
"""


def db_path() -> Path:
    """Path of the state database."""
    return skycore_home() / "state.db"


_ready: set[tuple[Path, int]] = set()
"""(path, inode) of each database this process has put in WAL mode with the schema."""
_ready_lock = threading.Lock()


def _make_ready(path: Path) -> None:
    """Put the database at ``path`` in WAL mode with the schema in place, once per file.

    Two first connections at once (threads of one dry run, or two commands) used to switch a
    new file to WAL together, and SQLite answers one of them "database is locked" at once,
    without waiting: so one thread and one process at a time (a file lock beside it)."""
    with _ready_lock:
        if path.exists() and (path, path.stat().st_ino) in _ready:
            return
        with FileLock(str(path) + ".init.lock", timeout=60):
            conn = sqlite3.connect(path, timeout=30)
            conn.row_factory = sqlite3.Row
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
                _migrate(conn)
                conn.commit()
            finally:
                conn.close()
        _ready.add((path, path.stat().st_ino))


@contextmanager
def connect() -> Iterator[sqlite3.Connection]:
    """A connection to the state database (WAL mode, the schema in place); commits on
    success."""
    path = db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    _make_ready(path)
    conn = sqlite3.connect(path, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


@cache
def _schema_columns() -> dict[str, list[sqlite3.Row]]:
    """Each table of the schema with its columns (``PRAGMA table_info`` rows)."""
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    try:
        conn.executescript(_SCHEMA)
        tables = [
            r["name"] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {t: conn.execute(f"PRAGMA table_info({t})").fetchall() for t in tables}
    finally:
        conn.close()


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Add to each table of an older file the columns the schema has gained since (each with
    the schema's type and default)."""
    for table, wanted in _schema_columns().items():
        have = {r["name"] for r in conn.execute(f"PRAGMA table_info({table})")}
        for col in wanted:
            if col["name"] in have or col["name"].startswith("sqlite_"):
                continue
            default = f" DEFAULT {col['dflt_value']}" if col["dflt_value"] is not None else ""
            not_null = " NOT NULL" if col["notnull"] and default else ""
            conn.execute(
                f"ALTER TABLE {table} ADD COLUMN {col['name']} {col['type']}{not_null}{default}"
            )


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a database written by an older skycore up to date (idempotent, cheap): the
    columns added since, and mounts recorded as bash turned into specs."""
    _add_missing_columns(conn)
    legacy = conn.execute(
        "SELECT rowid, cluster, dst, mode, mount_command FROM mounts "
        "WHERE spec IS NULL AND mount_command IS NOT NULL"
    ).fetchall()
    for row in legacy:
        spec = legacy_mount_spec(row["mount_command"], row["mode"])
        if spec is None:
            add_event(
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


def add_event(
    conn: sqlite3.Connection,
    cluster: str,
    from_status: str | None,
    to_status: str | None,
    reason: str,
) -> None:
    """Record a cluster event (a status change, or a note) in ``conn``'s transaction."""
    conn.execute(
        "INSERT INTO cluster_events (cluster, ts, from_status, to_status, reason) "
        "VALUES (?, ?, ?, ?, ?)",
        (cluster, time.time(), from_status, to_status, reason),
    )


def query_one(sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
    """The first row ``sql`` selects, or None."""
    with connect() as conn:
        row: sqlite3.Row | None = conn.execute(sql, params).fetchone()
    return row


def query_all(sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    """Every row ``sql`` selects."""
    with connect() as conn:
        return list(conn.execute(sql, params).fetchall())


@dataclass(frozen=True)
class Event:
    """One recorded event: a status change and why, or a note when from == to."""

    ts: float
    from_status: str | None
    to_status: str | None
    reason: str


R = TypeVar("R")


def from_row(record: type[R], row: sqlite3.Row, **convert: Callable[[Any], Any]) -> R:
    """The dataclass ``record`` made of ``row``'s columns of the same names, each column in
    ``convert`` passed through its function first (e.g. ``persistent=bool``)."""
    values = {}
    for field in fields(record):  # type: ignore[arg-type]
        value = row[field.name]
        values[field.name] = convert[field.name](value) if field.name in convert else value
    return record(**values)
