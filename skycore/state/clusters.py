"""Clusters and their events: one row per cluster (status, provider handle) and every status
change with its reason; a status may only follow the statuses the transition table allows."""

from __future__ import annotations

import enum
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from skycore.errors import ClusterTransitionError as ClusterTransitionError
from skycore.state.db import Event, add_event, connect, from_row, query_all, query_one


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
class ClusterEvent(Event):
    """One status change of a cluster and why it happened (or a note about it)."""

    cluster: str


# How the JSON columns of a clusters row become a record's values.
_DECODE: dict[str, Any] = {
    "resources": json.loads,
    "handle": lambda v: json.loads(v) if v else None,
}


def _cluster(row: sqlite3.Row) -> ClusterRecord:
    return from_row(ClusterRecord, row, **_DECODE)


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
            add_event(conn, name, None, status, reason)
            return
        conn.execute(
            "UPDATE clusters SET status = ?, provider = ?, num_nodes = ?, resources = ?, "
            "status_reason = ?, updated_at = ? WHERE name = ?",
            (status, provider, num_nodes, json.dumps(resources), reason, now, name),
        )
        if row["status"] != status:
            add_event(conn, name, row["status"], status, reason)


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
            add_event(conn, name, row["status"], status, reason)


def add_cluster_event(name: str, reason: str) -> None:
    """Record something notable that did not change the status (e.g. 'provisioning skipped')."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        status = row["status"] if row else None
        add_event(conn, name, status, status, reason)


def set_cluster_handle(name: str, handle: dict[str, Any] | None) -> None:
    """Store the provider's description of the cluster's nodes."""
    with connect() as conn:
        conn.execute(
            "UPDATE clusters SET handle = ?, updated_at = ? WHERE name = ?",
            (json.dumps(handle) if handle is not None else None, time.time(), name),
        )


def get_cluster(name: str) -> ClusterRecord | None:
    """The record of one cluster, or None."""
    row = query_one("SELECT * FROM clusters WHERE name = ?", (name,))
    return _cluster(row) if row else None


def list_clusters() -> list[ClusterRecord]:
    """Every recorded cluster, oldest first."""
    return [_cluster(r) for r in query_all("SELECT * FROM clusters ORDER BY created_at")]


def remove_cluster(name: str, reason: str) -> None:
    """Forget a terminated cluster with its jobs and mounts; the event history is kept."""
    with connect() as conn:
        row = conn.execute("SELECT status FROM clusters WHERE name = ?", (name,)).fetchone()
        conn.execute("DELETE FROM clusters WHERE name = ?", (name,))
        conn.execute("DELETE FROM jobs WHERE cluster = ?", (name,))
        conn.execute("DELETE FROM mounts WHERE cluster = ?", (name,))
        if row is not None:
            add_event(conn, name, row["status"], CLUSTER_TERMINATED, reason)


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
    return [from_row(ClusterEvent, r) for r in reversed(query_all(query, args))]
