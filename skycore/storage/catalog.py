"""``skycore storage ls`` and ``skycore storage delete NAME``: the logic behind the CLI."""

from __future__ import annotations

import time
from dataclasses import dataclass

from skycore.config import SkycoreConfig, load_config
from skycore.errors import StorageInUse as StorageInUse
from skycore.state.mounts import clusters_using_storage
from skycore.state.storages import get_storage, list_storage, remove_storage, set_storage_status
from skycore.storage.common import StorageError, is_cloud_url, parse_url
from skycore.stores import make_store


@dataclass(frozen=True)
class StorageRow:
    """One line of ``storage ls``."""

    name: str
    store: str
    source: str
    kind: str  # 'sky-managed' or 'external'
    persistent: bool
    status: str
    created_at: float

    @property
    def age(self) -> str:
        """How long ago the bucket was recorded, e.g. '5m ago'."""
        secs = max(0, int(time.time() - self.created_at))
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if secs >= size:
                return f"{secs // size}{unit} ago"
        return f"{secs}s ago"


def list_storage_rows() -> list[StorageRow]:
    """Every bucket skycore knows, oldest first (no cloud calls)."""
    return [
        StorageRow(
            name=r.name,
            store=r.store,
            source=r.source or "-",
            kind="sky-managed" if r.sky_managed else "external",
            persistent=r.persistent,
            status=r.status,
            created_at=r.created_at,
        )
        for r in list_storage()
    ]


def delete_storage(
    name: str,
    config: SkycoreConfig | None = None,
    *,
    missing_ok: bool = False,
    for_cluster: str | None = None,
) -> str:
    """Delete the sky-managed bucket ``name`` (all objects) and forget it; returns a one-line
    summary. StorageError (exit 2) when unknown or external: skycore never deletes a bucket it
    did not create. With ``missing_ok`` an unknown name counts as already deleted. A bucket
    that the recorded mounts of a cluster (other than ``for_cluster``, the one being torn
    down) still use is never deleted: StorageInUse."""
    rec = get_storage(name)
    if rec is None:
        if missing_ok:
            return f"Storage {name} was already deleted."
        raise StorageError(
            f"No storage named '{name}'. Run 'skycore storage ls' to see the known buckets."
        )
    users = clusters_using_storage(name, exclude=for_cluster)
    if users:
        raise StorageInUse(
            f"Storage '{name}' is mounted by cluster(s) {', '.join(users)}; it is not deleted "
            f"while a cluster uses it. Tear them down first ('skycore down {' '.join(users)}'), "
            "then delete it.",
            users,
        )
    if not rec.sky_managed:
        raise StorageError(
            f"'{name}' is an external bucket ({rec.source or rec.store}); skycore never deletes "
            "buckets it did not create. Delete it with your cloud's own tools if you mean to."
        )
    config = config or load_config()
    account = None
    if rec.source and is_cloud_url(rec.source):
        account = parse_url(rec.source).account
    st = make_store(rec.store, name, config, account)
    set_storage_status(name, "DELETING")
    deleted = st.delete() if st.exists() else 0
    remove_storage(name)
    return f"Deleted {st.url} ({deleted} objects)."
