"""Check a storage entry against its store and skycore's records without changing anything:
what ``Storage.prepare`` would do (``StoragePlan``, shown by --dryrun)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skycore.config import SkycoreConfig
from skycore.state.storages import get_storage
from skycore.storage.api import AccessInfo
from skycore.storage.common import StorageAccessError, StorageSpecError
from skycore.storage.upload import list_upload_files

if TYPE_CHECKING:
    from skycore.storage.storage import Storage


@dataclass(frozen=True)
class StoragePlan:
    """What ``prepare`` would do, found without changing anything (for --dryrun)."""

    access: AccessInfo
    create: bool
    upload_files: int = 0
    upload_bytes: int = 0
    read_only: bool = False
    note: str = ""


def check(entry: Storage, config: SkycoreConfig) -> StoragePlan:
    """Validate against config, state and the store without changing anything; returns
    what prepare() would do. Raises StorageError naming the field and the fix."""
    st = entry.store_obj(config)
    url = entry.url(config)
    if entry.kind == "sky_managed":
        rec = get_storage(entry.name)
        if rec is not None and rec.store != entry.store:
            raise StorageAccessError(
                f"{entry.yaml_field}: the bucket '{entry.name}' was created earlier for the "
                f"{rec.store} store, not {entry.store}. Use store: {rec.store}, choose "
                f"another name, or delete it first with 'skycore storage delete {entry.name}'."
            )
    info = entry.access(config)
    create = False
    note = ""
    if entry.kind == "external":
        if not info.exists:
            raise StorageAccessError(
                f"{entry.yaml_field}: the source {url} does not exist. Check the URL, or create "
                "the bucket first (or give a name and a local source to let skycore "
                "create one)."
            )
        if not info.can_read:
            what = (
                info.detail
                if info.detail.startswith("is ")
                else "exists but is a private bucket of another account that your "
                "credentials cannot access"
            )
            raise StorageAccessError(
                f"{entry.yaml_field}: {url} {what}. Check the URL, ask its owner for access, "
                "or use a bucket you own."
            )
        if entry.prefix and entry.mode.is_mount and st.is_object(entry.prefix):
            raise StorageSpecError(
                f"{entry.yaml_field}: {url} is a single object and cannot be mounted; use mode: "
                "COPY, or mount the folder that holds it."
            )
        if not info.can_write:
            note = "read-only (not your bucket)"
    else:
        if info.exists and not info.can_write:
            raise StorageAccessError(
                f"{entry.yaml_field}.name: the {entry.store} bucket name '{entry.name}' is "
                "already taken by another account. Choose another name."
            )
        create = not info.exists
        if info.exists and get_storage(entry.name) is None:
            note = "existing bucket of yours (not created by skycore; never deleted)"
    files = nbytes = 0
    if entry.is_local_source:
        assert entry.source is not None
        listed = upload_files(entry)
        files = len(listed)
        nbytes = sum(os.path.getsize(Path(entry.source) / f) for f in listed)
    return StoragePlan(
        access=info,
        create=create,
        upload_files=files,
        upload_bytes=nbytes,
        read_only=not (info.can_write or create),
        note=note,
    )


def upload_files(entry: Storage) -> list[str]:
    """The files of the local source to upload (StorageSpecError naming this entry's
    field for a link loop or an unreadable file)."""
    assert entry.source is not None
    try:
        return list_upload_files(entry.source)
    except StorageSpecError as e:
        raise StorageSpecError(f"{entry.yaml_field}.{e.message}") from None
