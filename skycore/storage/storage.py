"""Storage: one file_mounts storage entry, resolved to a store, a bucket and a bucket kind.

Kinds (SkyPilot's rules):
- ``sky_managed``: a name (with a local folder as source, or none for an empty scratch bucket).
  skycore creates the bucket, uploads the source, records it, and deletes it only on
  ``storage delete`` (or when the task ends, if ``persistent: false``).
- ``external``: a bucket URL as source (no name), or a named bucket that already existed and
  is yours. Never created or deleted by skycore.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from skycore.config import SkycoreConfig
from skycore.state.storages import add_storage, get_storage, remove_storage, set_storage_status
from skycore.storage import entry_check, entry_spec, mounting, upload_tuning
from skycore.storage.api import AbstractStore, AccessInfo, UploadResult
from skycore.storage.common import (
    BucketUrl,
    StorageError,
    StorageMode,
    StorageSpecError,
    is_cloud_url,
    parse_url,
    validate_bucket_name,
)
from skycore.storage.entry_check import StoragePlan
from skycore.storage.mounting import MountStep
from skycore.storage.rclone_env import NODE_ENV
from skycore.storage.rclone_env import RcloneEnv as Env
from skycore.storage.vfs_options import MountOptions
from skycore.stores import get_store_class, make_store, store_names
from skycore.user_paths import UserPathError, resolve_local_path, show

Kind = Literal["sky_managed", "external"]

STATUS_INIT = "INIT"
STATUS_UPLOADING = "UPLOADING"
STATUS_UPLOAD_FAILED = "UPLOAD_FAILED"
STATUS_READY = "READY"


@dataclass
class Storage:
    """A storage entry of a task. ``source`` is an absolute local path or a bucket URL."""

    name: str
    store: str
    mode: StorageMode = StorageMode.MOUNT
    source: str | None = None
    persistent: bool = True
    kind: Kind = "sky_managed"
    prefix: str = ""
    account: str | None = None
    yaml_field: str = field(default="file_mounts", compare=False)
    mount_options: MountOptions = field(default_factory=MountOptions)
    mount_type: str | None = None
    transfers_from: str | None = field(default=None, compare=False)
    _access: AccessInfo | None = field(default=None, compare=False, repr=False)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_spec(
        cls,
        *,
        name: str | None,
        source: str | None,
        store: str | None,
        mode: str = "MOUNT",
        persistent: bool = True,
        transfers: int | None = None,
        upload_concurrency: int | None = None,
        chunk_size: str | int | None = None,
        default_store: str | None = None,
        field: str = "file_mounts",
        mount_type: str | None = None,
        config: entry_spec.EntryConfig | None = None,
    ) -> Storage:
        """Resolve a storage dict (name, source, store, mode, persistent, the upload tuning,
        ``type`` and ``config``) or raise StorageSpecError / BucketNameError naming ``field``
        and the fix. ``transfers`` (MOUNT_CACHED only): cached files uploading at once (1 keeps
        creation order); the others: storage/upload_tuning and storage/entry_spec."""
        smode = StorageMode(mode)
        store_t = get_store_class(store, f"{field}.store").store_name if store else None
        cache = entry_spec.resolve(smode, mount_type, config, transfers, field)
        transfers = cache.transfers  # the top-level's, the config's or the preset's

        def options(st: str) -> MountOptions:
            tuning = (get_store_class(st).upload_parts, upload_concurrency, chunk_size)
            streams, chunk = upload_tuning.entry_tuning(st, smode, transfers, tuning, field)
            opts = MountOptions(transfers=transfers or 1)
            return replace(opts, upload_concurrency=streams, chunk_size=chunk, **cache.options)

        given: dict[str, Any] = {"mount_type": mount_type, "transfers_from": cache.transfers_from}
        if source is not None and is_cloud_url(source):
            url = parse_url(source, f"{field}.source")
            if name is not None:
                raise StorageSpecError(
                    f"{field}: name '{name}' is given with the bucket URL source '{source}'. "
                    "A URL source names an existing bucket: remove name (or, to create a new "
                    "bucket, give a name and a local source)."
                )
            if store_t is not None and store_t != url.store:
                raise StorageSpecError(
                    f"{field}: store '{store_t}' does not match the source '{source}' "
                    f"(a {url.store} URL); remove store or set it to {url.store}."
                )
            return cls(
                name=url.bucket,
                store=url.store,
                mode=smode,
                source=str(url),
                persistent=persistent,
                kind="external",
                prefix=url.prefix,
                account=url.account,
                yaml_field=field,
                mount_options=options(url.store),
                **given,
            )
        if name is None:
            if source is None:
                raise StorageSpecError(
                    f"{field}: a storage entry needs a name (to create a bucket) or a source "
                    "(a local folder or a bucket URL); add one of them."
                )
            raise StorageSpecError(
                f"{field}: the local source '{source}' needs a name for the bucket to create; "
                "add name: <bucket-name>, or write the path directly as a plain file mount "
                f"({field}: {source})."
            )
        if smode is StorageMode.COPY and source is None:
            raise StorageSpecError(
                f"{field}: mode COPY needs a source to copy; add source: <local folder or bucket "
                "URL>, or use mode MOUNT or MOUNT_CACHED for an empty scratch bucket."
            )
        if store_t is None:
            store_t = default_store
        if store_t is None:
            raise StorageSpecError(
                f"{field}: store is missing and resources.cloud does not imply one; add "
                f"store: <one of {', '.join(store_names())}>."
            )
        validate_bucket_name(store_t, name, f"{field}.name")
        if source is not None:
            try:
                path = resolve_local_path(source, f"{field}.source")
            except UserPathError as e:
                raise StorageSpecError(e.message) from None
            if not path.is_dir():
                raise StorageSpecError(
                    f"{field}.source: '{show(source)}' is a file; a bucket mirrors a folder. Use "
                    f"a folder, or copy the file with a plain file mount ({field}: "
                    f"{show(source)})."
                )
            source = str(path)
        return cls(
            name=name,
            store=store_t,
            mode=smode,
            source=source,
            persistent=persistent,
            kind="sky_managed",
            yaml_field=field,
            mount_options=options(store_t),
            **given,
        )

    def to_spec_dict(self) -> dict[str, Any]:
        """The storage dict as written in a task YAML (loads back to an equal Storage)."""
        out: dict[str, Any] = {"store": self.store, "mode": self.mode.value}
        if self.kind == "external" and self.source and is_cloud_url(self.source):
            out["source"] = self.source
        else:
            out["name"] = self.name
            if self.source is not None:
                out["source"] = self.source
        out["persistent"] = self.persistent
        opts = self.mount_options
        cache = entry_spec.written(self.mode, self.mount_type, self.transfers_from, opts)
        return out | upload_tuning.entry_fields(opts) | cache

    # --- identity -----------------------------------------------------------------------------
    @property
    def is_local_source(self) -> bool:
        """True when the source is a local folder to upload."""
        return self.source is not None and not is_cloud_url(self.source)

    def url(self, config: SkycoreConfig | None = None) -> BucketUrl:
        """Bucket URL (with the sub-path of an external source)."""
        account = self.account
        if account is None and config is not None:
            cls = get_store_class(self.store)
            section = config.section(cls.config_section)
            account = cls.default_account(section) if section is not None else None
        return BucketUrl(self.store, self.name, self.prefix, account)

    @property
    def bucket_url(self) -> str:
        """``scheme://name`` (``scheme://account/name`` once the account is known)."""
        return str(self.url())

    def store_obj(self, config: SkycoreConfig) -> AbstractStore:
        """The AbstractStore of this bucket."""
        try:
            st = make_store(self.store, self.name, config, self.account)
        except StorageError as e:
            raise StorageError(f"{self.yaml_field}: {e.message}") from None
        if self.account is None:
            self.account = st.account
        return st

    # --- checks -------------------------------------------------------------------------------
    def access(self, config: SkycoreConfig) -> AccessInfo:
        """What the user may do with the bucket (cached on this object)."""
        self._access = self.store_obj(config).access()
        return self._access

    def check(self, config: SkycoreConfig) -> StoragePlan:
        """Validate against config, state and the store without changing anything; returns
        what prepare() would do. Raises StorageError naming the field and the fix
        (``entry_check.check``)."""
        return entry_check.check(self, config)

    # --- client-side work ---------------------------------------------------------------------
    def prepare(self, config: SkycoreConfig, progress: bool = True) -> UploadResult | None:
        """Client side of a launch: check access, create the bucket if sky-managed and new,
        upload the local source (honouring .skyignore / .gitignore) and record the bucket."""
        plan = self.check(config)
        st = self.store_obj(config)
        source = self.source if self.is_local_source else str(self.url(config))
        if self.kind == "external":
            if get_storage(self.name) is None:
                add_storage(self.name, self.store, source, False, True, STATUS_READY)
            return None
        rec = get_storage(self.name)
        ours = plan.create or (rec is not None and rec.sky_managed)
        if plan.create:
            add_storage(self.name, self.store, source, True, self.persistent, STATUS_INIT)
            st.create()
            self._access = AccessInfo(exists=True, can_read=True, can_write=True, detail="yours")
        elif rec is None:
            add_storage(self.name, self.store, source, False, True, STATUS_INIT)
        if not ours:
            self.kind = "external"
        result = None
        if self.is_local_source:
            assert self.source is not None
            set_storage_status(self.name, STATUS_UPLOADING)
            try:
                root = Path(self.source)
                result = st.upload(root, self._upload_files(), progress=progress)
            except BaseException:
                set_storage_status(self.name, STATUS_UPLOAD_FAILED)
                raise
        set_storage_status(self.name, STATUS_READY)
        return result

    def _upload_files(self) -> list[str]:
        """The files of the local source to upload (``entry_check.upload_files``)."""
        return entry_check.upload_files(self)

    def delete(self, config: SkycoreConfig) -> int:
        """Delete a sky-managed bucket and its record (the pipeline calls this at task end for
        ``persistent: false``). Refuses external buckets. Returns objects deleted."""
        rec = get_storage(self.name)
        if self.kind != "sky_managed" or (rec is not None and not rec.sky_managed):
            raise StorageError(
                f"{self.yaml_field}: {self.bucket_url} was not created by skycore; skycore never "
                "deletes buckets it did not create."
            )
        n = self.store_obj(config).delete() if self.store_obj(config).exists() else 0
        remove_storage(self.name)
        return n

    # --- node-side bash -----------------------------------------------------------------------
    def _remote(self) -> tuple[bool, bool]:
        """(anonymous, read_only) from the last access check (writable if never checked)."""
        info = self._access
        return (False, False) if info is None else (info.anonymous, not info.can_write)

    def mounts_read_only(self) -> bool:
        """True when the last access check found the user cannot write (or the entry asks
        for read-only): the mount refuses writes."""
        return self.mount_options.read_only or self._remote()[1]

    def mount_spec(self) -> dict[str, Any]:
        """What a mount is, as data (JSON-ready): recorded per cluster so that start and a
        relaunch render the mount with the current code (``from_mount_spec``)."""
        anonymous, read_only = self._remote()
        opts = self.mount_options
        return {
            "store": self.store,
            "bucket": self.name,
            "prefix": self.prefix,
            "account": self.account,
            "mode": self.mode.value,
            "anonymous": anonymous,
            "read_only": read_only or opts.read_only,
        } | opts.recorded()

    @classmethod
    def from_mount_spec(cls, spec: dict[str, Any]) -> Storage:
        """The Storage a recorded ``mount_spec`` describes (access as recorded, no cloud
        call); its ``mount_command`` renders the mount with today's code."""
        storage = cls(
            name=spec["bucket"],
            store=spec["store"],
            mode=StorageMode(spec["mode"]),
            kind="external",
            prefix=spec.get("prefix", ""),
            account=spec.get("account"),
            mount_options=MountOptions.from_record(spec),
        )
        storage._access = AccessInfo(
            exists=True,
            can_read=True,
            can_write=not spec.get("read_only", False),
            anonymous=bool(spec.get("anonymous", False)),
        )
        return storage

    def rclone_path(self, config: SkycoreConfig) -> str:
        """``remote:bucket[/prefix]`` as rclone on the node addresses this bucket."""
        anonymous, _ = self._remote()
        return self.store_obj(config).rclone_path(self.prefix, anonymous)

    def copy_step(self, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> MountStep:
        """The node step that fetches the COPY snapshot into ``dst``."""
        return mounting.copy_step([self.rclone_path(config)], dst, env)

    def copy_command(self, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> str:
        """Bash a node runs to fetch the COPY snapshot into ``dst`` (``copy_step``)."""
        return self.copy_step(dst, config, env).script()

    def mount_step(self, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> MountStep:
        """The idempotent node step that mounts the bucket at ``dst`` in this entry's mode.

        Read-only (writes fail at once with EROFS) when the last access check found the user
        cannot write; call ``access`` or ``prepare`` first. The mount gets its upload tuning
        and its store's upload options (``upload_mount_options``)."""
        if not self.mode.is_mount:
            raise StorageSpecError(
                f"{self.yaml_field}: mode COPY is not mounted; use copy_command."
            )
        anonymous, read_only = self._remote()
        opts = self.mount_options
        if read_only and not opts.read_only:
            opts = replace(opts, read_only=True)
        st = self.store_obj(config)
        opts = st.upload_mount_options(self.mode, opts)
        remote = st.rclone_path(self.prefix, anonymous)
        return mounting.mount_step(remote, dst, self.mode, opts, env)

    def mount_command(self, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> str:
        """Idempotent bash a node runs to mount the bucket at ``dst`` (``mount_step``)."""
        return self.mount_step(dst, config, env).script()
