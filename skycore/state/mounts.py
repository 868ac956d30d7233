"""The storage mounted on each cluster: replayed by ``start``, drained by stop and down."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from skycore.state.db import connect, from_row, query_all


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
    rows = query_all("SELECT * FROM mounts WHERE cluster = ? ORDER BY rowid", (cluster,))
    spec = {"spec": lambda v: json.loads(v) if v else None, "persistent": bool}
    return [from_row(MountRecord, r, **spec) for r in rows]
