"""AbstractStore: one bucket (or Azure container) in one storage service.

A store creates, deletes, checks and uploads through the cloud's own SDK, and builds the bash a
node runs to copy or mount the bucket with rclone (see mounting.py).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from skycore.config import SkycoreConfig
from skycore.storage import mounting
from skycore.storage.common import BucketUrl, StorageError, StorageMode, StoreType

# Uploads bigger than this (or with more files) show a progress bar.
PROGRESS_MIN_BYTES = 32 * 1024 * 1024
PROGRESS_MIN_FILES = 200
UPLOAD_WORKERS = 8


@dataclass(frozen=True)
class AccessInfo:
    """What the user's credentials (or anonymous access) may do with a bucket."""

    exists: bool
    can_read: bool = False
    can_write: bool = False
    anonymous: bool = False  # readable only anonymously (public bucket of another account)
    detail: str = ""

    @property
    def private_to_other(self) -> bool:
        """The bucket exists but nobody lets us read it."""
        return self.exists and not self.can_read


@dataclass(frozen=True)
class UploadResult:
    """How much an upload moved."""

    files: int
    bytes: int


class AbstractStore(ABC):
    """One bucket in one store. Subclasses implement the SDK calls."""

    store_type: ClassVar[StoreType]

    def __init__(self, name: str, config: SkycoreConfig, account: str | None = None) -> None:
        self.name = name
        self.config = config
        self.account = account

    # --- identity ---------------------------------------------------------------------------
    @property
    def url(self) -> BucketUrl:
        """URL of the whole bucket."""
        return BucketUrl(self.store_type, self.name, "", self.account)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url})"

    # --- SDK operations ---------------------------------------------------------------------
    @abstractmethod
    def exists(self) -> bool:
        """True when the bucket exists (whoever owns it)."""

    @abstractmethod
    def create(self) -> None:
        """Create the bucket; StorageAccessError when the name belongs to someone else."""

    @abstractmethod
    def delete(self) -> int:
        """Delete every object and the bucket; returns the number of objects deleted."""

    @abstractmethod
    def access(self) -> AccessInfo:
        """Tell 'does not exist' from 'private to someone else' from readable/writable."""

    @abstractmethod
    def list_keys(self, prefix: str = "") -> list[str]:
        """Keys of the objects under ``prefix`` (with the user's credentials, else anonymous)."""

    @abstractmethod
    def is_object(self, key: str) -> bool:
        """True when ``key`` names a single object (not a prefix)."""

    @abstractmethod
    def upload_file(self, path: Path, key: str) -> None:
        """Upload one local file to ``key``."""

    # --- shared behaviour -------------------------------------------------------------------
    def upload(
        self,
        root: Path,
        files: Sequence[str],
        prefix: str = "",
        progress: bool = True,
        workers: int = UPLOAD_WORKERS,
    ) -> UploadResult:
        """Upload ``files`` (relative to ``root``) in parallel; a rich progress bar for large
        uploads when ``progress`` is true."""
        sizes = {rel: os.path.getsize(root / rel) for rel in files}
        total = sum(sizes.values())
        show = progress and (total >= PROGRESS_MIN_BYTES or len(files) >= PROGRESS_MIN_FILES)
        bar: Progress | None = None
        task_id = None
        lock = threading.Lock()
        if show:
            bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                transient=True,
            )
            task_id = bar.add_task(f"Uploading {len(files)} files to {self.url}", total=total)
            bar.start()

        def one(rel: str) -> None:
            key = f"{prefix.rstrip('/')}/{rel}" if prefix else rel
            self.upload_file(root / rel, key)
            if bar is not None and task_id is not None:
                with lock:
                    bar.advance(task_id, sizes[rel])

        try:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                futures = [pool.submit(one, rel) for rel in files]
                for fut in as_completed(futures):
                    fut.result()
        finally:
            if bar is not None:
                bar.stop()
        return UploadResult(files=len(files), bytes=total)

    @staticmethod
    def run_parallel(fn: Callable[[list[str]], None], keys: list[str], batch: int) -> None:
        """Run ``fn`` over ``keys`` in batches on a thread pool (used for mass deletes)."""
        batches = [keys[i : i + batch] for i in range(0, len(keys), batch)]
        with ThreadPoolExecutor(max_workers=UPLOAD_WORKERS) as pool:
            for fut in [pool.submit(fn, b) for b in batches]:
                fut.result()

    # --- rclone ------------------------------------------------------------------------------
    @abstractmethod
    def rclone_remote(self, anonymous: bool = False) -> str:
        """The rclone remote prefix (``name:``) for this store."""

    def rclone_path(self, prefix: str = "", anonymous: bool = False) -> str:
        """``remote:bucket[/prefix]`` as rclone addresses it."""
        path = self.name + (f"/{prefix.strip('/')}" if prefix.strip("/") else "")
        return self.rclone_remote(anonymous) + path

    def copy_command(
        self,
        dst: str,
        prefix: str = "",
        anonymous: bool = False,
        env: mounting.RcloneEnv = mounting.NODE_ENV,
    ) -> str:
        """Bash a node runs to copy the bucket (or an object/prefix of it) to ``dst``."""
        return mounting.copy_command(self.rclone_path(prefix, anonymous), dst, env)

    def mount_command(
        self,
        dst: str,
        mode: StorageMode,
        prefix: str = "",
        anonymous: bool = False,
        options: mounting.MountOptions | None = None,
        env: mounting.RcloneEnv = mounting.NODE_ENV,
    ) -> str:
        """Bash a node runs to mount the bucket at ``dst`` in ``mode`` (idempotent)."""
        return mounting.mount_command(self.rclone_path(prefix, anonymous), dst, mode, options, env)


def require_section(store: StoreType, config: SkycoreConfig, field: str = "store") -> None:
    """StorageError when config.yaml lacks the section ``store`` needs."""
    if getattr(config, store.config_section) is None:
        raise StorageError(
            f"{field}: the {store.value} store is not configured: the skycore config has no "
            f"'{store.config_section}' section. Run 'harness up' for the local cloud or add "
            f"the section to ~/.skycore/config.yaml."
        )


def make_store(
    store: StoreType, name: str, config: SkycoreConfig, account: str | None = None
) -> AbstractStore:
    """The store object for bucket ``name`` (``account``: Azure storage account)."""
    require_section(store, config)
    if store is StoreType.S3:
        from skycore.storage.s3 import S3Store

        return S3Store(name, config)
    if store is StoreType.GCS:
        from skycore.storage.gcs import GcsStore

        return GcsStore(name, config)
    from skycore.storage.azure import AzureBlobStore

    assert config.azure is not None
    return AzureBlobStore(name, config, account or config.azure.account_name)
