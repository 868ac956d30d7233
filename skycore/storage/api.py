"""The store contract: ``AbstractStore``, one bucket in one storage service.

A store is one subclass in one module. Its class variables say everything skycore needs to
know about the store (name, URL schemes, cloud, config section and model, bucket-name rules,
rclone.conf section); its methods create, delete, check, list and upload through the
service's own SDK. Register it under the entry-point group ``skycore.stores`` (see
registry.py and docs/backends.md).
"""

from __future__ import annotations

import os
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from skycore.storage import mounting, upload_tuning
from skycore.storage.common import (
    BucketUrl,
    StorageAccessError,
    StorageError,
    StorageMode,
    StorageSpecError,
)
from skycore.storage.rclone_env import NODE_ENV, RcloneEnv, rclone_section
from skycore.storage.vfs_options import MountOptions
from skycore.stores import register_contract

if TYPE_CHECKING:
    from skycore.config import SkycoreConfig

# Uploads bigger than this (or with more files) show a progress bar.
PROGRESS_MIN_BYTES = 32 * 1024 * 1024
PROGRESS_MIN_FILES = 200
UPLOAD_WORKERS = 8


UNIMPLEMENTED_STATUSES = (405, 501)
"""HTTP statuses that say the server does not implement a request (Method Not Allowed,
Not Implemented), which no change of configuration can fix."""


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

    @classmethod
    def missing(cls) -> AccessInfo:
        """The bucket does not exist."""
        return cls(exists=False, detail="does not exist")

    @classmethod
    def private(cls) -> AccessInfo:
        """The bucket exists, but neither the user's credentials nor anonymous access read it."""
        return cls(exists=True, detail="private to another account")

    @classmethod
    def public(cls) -> AccessInfo:
        """Readable only anonymously: another account's public bucket."""
        return cls(exists=True, can_read=True, anonymous=True, detail="public")

    @classmethod
    def readable(cls, writable: bool) -> AccessInfo:
        """Readable with the user's credentials: the user's own bucket when also ``writable``,
        else someone else's public one."""
        return cls(
            exists=True,
            can_read=True,
            can_write=writable,
            detail="yours" if writable else "public, read-only for you",
        )


@dataclass(frozen=True)
class UploadResult:
    """How much an upload moved."""

    files: int
    bytes: int


class AbstractStore(ABC):
    """One bucket in one store. A subclass is a whole store: its class variables describe
    the store, its methods implement the SDK calls (raising StorageError /
    StorageAccessError with one clear paragraph, never a raw SDK exception; ``fail``,
    ``not_yours`` and ``name_taken`` build the common ones)."""

    store_name: ClassVar[str]
    """What users write after ``store:`` (also the entry-point name)."""
    schemes: ClassVar[tuple[str, ...]]
    """URL schemes of the store's buckets; the first is the one skycore writes (default: the
    store's own name)."""
    cloud: ClassVar[str]
    """The ``resources.cloud`` this store belongs to (default: the store's own name)."""
    default_for_cloud: ClassVar[bool] = True
    """Used when a storage entry gives no ``store`` and ``resources.cloud`` is ``cloud``."""
    config_section: ClassVar[str]
    """The config.yaml section holding the endpoint and the user's credentials (default: the
    store's own name)."""
    config_model: ClassVar[type[BaseModel]]
    """The pydantic model of that section."""
    bucket_label: ClassVar[str] = "bucket"
    """How the store calls a bucket, for messages (e.g. ``container``)."""
    url_has_account: ClassVar[bool] = False
    """URLs carry an account before the bucket: ``scheme://ACCOUNT/BUCKET/path``."""
    endpoint_label: ClassVar[str] = ""
    """How messages call the service's endpoint (default: ``<store_name> endpoint``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class that names its own store and not its schemes, config section or cloud gets
        its name for them (a subclass of another store never takes that store's)."""
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("store_name")
        if isinstance(name, str):
            if "schemes" not in cls.__dict__:
                cls.schemes = (name,)
            if "config_section" not in cls.__dict__:
                cls.config_section = name
            if "cloud" not in cls.__dict__:
                cls.cloud = name

    def __init__(self, name: str, config: SkycoreConfig, account: str | None = None) -> None:
        section = config.section(self.config_section)
        if section is None:
            raise StorageError(
                f"The {self.store_name} store is not configured: the skycore config has no "
                f"'{self.config_section}' section. Run 'harness up' for the local cloud or add "
                "the section to ~/.skycore/config.yaml."
            )
        self.name = name
        self.config = config
        self.section: Any = section
        """The store's config section (an instance of ``config_model``). A subclass may
        narrow its type with a class-level annotation (``section: AwsConfig``)."""
        # A store whose URLs carry no account has none, whatever the caller passes.
        if not self.url_has_account:
            account = None
        self.account = account if account is not None else self.default_account(section)

    # --- what the store is (class level: no config, no network) ----------------------------
    @classmethod
    @abstractmethod
    def name_problem(cls, name: str) -> str | None:
        """The naming rule ``name`` breaks ('must be 3 to 63 characters long'), or None."""

    @classmethod
    def default_account(cls, section: Any) -> str | None:
        """The account a bucket URL without one lives in (stores with accounts only)."""
        return None

    @classmethod
    def parse_location(cls, url: str, rest: str, field: str) -> tuple[str | None, str, str]:
        """(account, bucket, prefix) of ``scheme://rest``; StorageSpecError naming ``field``."""
        parts = rest.split("/")
        account = None
        if cls.url_has_account:
            if len(parts) < 2 or not parts[0] or not parts[1]:
                raise StorageSpecError(
                    f"{field}: '{url}' lacks a {cls.bucket_label.split()[-1]} after the "
                    f"account; write {cls.schemes[0]}://ACCOUNT/NAME[/PATH]."
                )
            account, parts = parts[0], parts[1:]
        if not parts[0]:
            raise StorageSpecError(
                f"{field}: '{url}' has no bucket name; write {cls.schemes[0]}://BUCKET."
            )
        return account, parts[0], "/".join(p for p in parts[1:] if p)

    @classmethod
    @abstractmethod
    def rclone_config(cls, section: Any) -> str:
        """The rclone.conf sections (remotes) of this store for config ``section``."""

    @classmethod
    def remote_name(cls, anonymous: bool = False) -> str:
        """Name of this store's rclone remote in rclone.conf (``skycore-<store>[-anon]``)."""
        return f"skycore-{cls.store_name}" + ("-anon" if anonymous else "")

    @classmethod
    def rclone_remotes(
        cls,
        options: dict[str, str | None],
        credentials: dict[str, str | None],
        anonymous: dict[str, str | None] | None = None,
    ) -> str:
        """rclone.conf text for ``rclone_config``: the user's remote (``options`` with
        ``credentials``) and, when ``anonymous`` is given, the anonymous remote (``options``
        with ``anonymous``). Options whose value is None are left out."""
        text = rclone_section(cls.remote_name(), options | credentials)
        if anonymous is None:
            return text
        return text + "\n" + rclone_section(cls.remote_name(True), options | anonymous)

    # --- the account ('skycore check') ------------------------------------------------------
    @classmethod
    def check_account(cls, config: SkycoreConfig) -> str:
        """Try the endpoint and the credentials of the store's config section without
        changing anything: ask whether a bucket no one created exists (it must not). Returns
        ``describe_account``; StorageError (one paragraph with the fix) when the endpoint
        does not answer or refuses the credentials."""
        probe = cls(f"skycore-check-{uuid.uuid4().hex[:12]}", config)
        if probe.exists():
            endpoint = cls.endpoint_label or f"{cls.store_name} endpoint"
            raise StorageAccessError(
                f"the {endpoint} refused the credentials of the '{cls.config_section}' section "
                f"of the skycore config (it would not say that {probe.url}, which no one "
                "created, does not exist). Fix the credentials in that section, or run "
                "'harness up' to write the local cloud's."
            )
        return cls.describe_account(probe.section)

    @classmethod
    def describe_account(cls, section: Any) -> str:
        """Where and as whom config ``section`` reaches the store, for 'skycore check' (never
        a secret); default: the section's name."""
        return f"credentials of the '{cls.config_section}' config section"

    # --- identity ---------------------------------------------------------------------------
    @property
    def url(self) -> BucketUrl:
        """URL of the whole bucket."""
        return BucketUrl(self.store_name, self.name, "", self.account)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url})"

    # --- errors a user sees ---------------------------------------------------------------
    @classmethod
    def error_text(cls, e: Exception) -> str:
        """What a failure message quotes of the SDK's exception ``e`` (default: ``str(e)``)."""
        return str(e)

    @classmethod
    def error_status(cls, e: Exception) -> int | None:
        """The HTTP status of the answer behind the SDK's exception ``e``, if it has one
        (default: None, which gives the config hint)."""
        return None

    def fail(self, action: str, e: Exception) -> StorageError:
        """The StorageError for an SDK call that failed: ``Could not <action> <url>: ...``,
        with what the answer means: a request the server does not implement (HTTP 405 or
        501), or else the config section and the endpoint to check."""
        endpoint = self.endpoint_label or f"{self.store_name} endpoint"
        detail = self.error_text(e).rstrip(". ")
        status = self.error_status(e)
        if status in UNIMPLEMENTED_STATUSES:
            hint = (
                f"HTTP {status} means the server at the {endpoint} does not implement this "
                "request: the server, not your configuration, is the cause. Use a server (or a "
                f"service) that implements it, or report it to the server's maintainers."
            )
        else:
            hint = (
                f"Check the {self.config_section} section of the skycore config and that the "
                f"{endpoint} is reachable."
            )
        return StorageError(f"Could not {action} {self.url}: {detail}. {hint}")

    def not_yours(self, action: str) -> StorageAccessError:
        """``You may not <action> <url>: it belongs to another account.``"""
        return StorageAccessError(
            f"You may not {action} {self.url}: it belongs to another account."
        )

    def name_taken(self) -> StorageAccessError:
        """The bucket name is another account's (``create``)."""
        return StorageAccessError(
            f"The {self.bucket_label} name '{self.name}' is already taken by another account. "
            "Choose another name."
        )

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
    def rclone_remote(self, anonymous: bool = False) -> str:
        """The rclone remote prefix (``name:``) addressing this bucket, with the user's
        credentials or anonymously (default: the remotes of ``rclone_config``)."""
        return self.remote_name(anonymous) + ":"

    def rclone_path(self, prefix: str = "", anonymous: bool = False) -> str:
        """``remote:bucket[/prefix]`` as rclone addresses it."""
        path = self.name + (f"/{prefix.strip('/')}" if prefix.strip("/") else "")
        return self.rclone_remote(anonymous) + path

    def copy_command(
        self,
        dst: str,
        prefix: str = "",
        anonymous: bool = False,
        env: RcloneEnv = NODE_ENV,
    ) -> str:
        """Bash a node runs to copy the bucket (or an object/prefix of it) to ``dst``."""
        return mounting.copy_command(self.rclone_path(prefix, anonymous), dst, env)

    cached_upload_config: ClassVar[tuple[tuple[str, str], ...]] = ()
    """rclone global options (name, value) for the write-back uploads of this store's
    MOUNT_CACHED mounts, set per mount (``MountOptions.upload_config``)."""

    upload_parts: ClassVar[upload_tuning.PartLimits | None] = None
    """What the store accepts for one part of a multipart upload (None: rclone uploads each
    file in one stream), for a mount's ``upload_concurrency`` and ``chunk_size``."""

    def cached_mount_options(self, options: MountOptions) -> MountOptions:
        """``options`` of a MOUNT_CACHED mount of this store with its upload options set (the
        store's own win over the mount's)."""
        if not self.cached_upload_config:
            return options
        config = dict(options.upload_config) | dict(self.cached_upload_config)
        return replace(options, upload_config=tuple(config.items()))

    def upload_mount_options(self, mode: StorageMode, options: MountOptions) -> MountOptions:
        """``options`` of a mount of this store in ``mode`` with its upload tuning
        (storage/upload_tuning) and, for MOUNT_CACHED, the store's upload options."""
        options = upload_tuning.tuned(self.upload_parts, mode, options)
        return self.cached_mount_options(options) if mode is StorageMode.MOUNT_CACHED else options

    def mount_command(
        self,
        dst: str,
        mode: StorageMode,
        prefix: str = "",
        anonymous: bool = False,
        options: MountOptions | None = None,
        env: RcloneEnv = NODE_ENV,
    ) -> str:
        """Bash a node runs to mount the bucket at ``dst`` in ``mode`` (idempotent)."""
        options = self.upload_mount_options(mode, options or MountOptions())
        return mounting.mount_command(self.rclone_path(prefix, anonymous), dst, mode, options, env)


register_contract(AbstractStore)
