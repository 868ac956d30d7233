"""Buckets skycore knows about: the storage table."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from skycore.state.db import connect, from_row, query_all, query_one


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
    return from_row(StorageRecord, row, sky_managed=bool, persistent=bool)


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
    row = query_one("SELECT * FROM storage WHERE name = ?", (name,))
    return _storage(row) if row else None


def list_storage() -> list[StorageRecord]:
    """Every recorded bucket, oldest first."""
    return [_storage(r) for r in query_all("SELECT * FROM storage ORDER BY created_at")]


def remove_storage(name: str) -> None:
    """Forget a bucket."""
    with connect() as conn:
        conn.execute("DELETE FROM storage WHERE name = ?", (name,))
