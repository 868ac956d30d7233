"""A mount's options (``MountOptions``) and the rclone ``mount/mount`` options they render.

``vfsOpt`` (rclone's vfs/vfscommon Options, by their Go names), ``mountOpt`` and the global
options sent as ``_config`` (``rc_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skycore.node.mountd.order import ORDER_HOLD_S
from skycore.storage.common import StorageMode
from skycore.storage.units import show_bytes, show_duration


@dataclass(frozen=True)
class MountOptions:
    """Per-mount tuning. ``transfers=1`` keeps cached uploads in creation order.

    ``write_back_s``: how long a closed file waits before its upload starts (rclone never
    uploads a file that is open for writing; reopening a queued file takes it off the queue).
    On an ordered mount (``ordered``) rclone never starts an upload by itself: the node's order
    keeper releases the oldest closed file as soon as the one before it is in the store, so
    neither a steady writer nor a flush waits for a delay; there a write-back of
    HELD_BACK_FROM_S (30 s) or more holds each file back that long, for the keeper and a
    drain alike (tests use 120 s to keep uploads pending).
    ``refresh_s``: how often the node re-reads a writable MOUNT_CACHED mount's listing from
    the store in the background (0: never after the one at mount time); objects that others
    add to the bucket show up in the mount after at most about that long. 12 s: the node's
    refresher used to tick every second, so its 10 s listings came every 11-12 s (30
    requests a minute for comp_test's six such mounts); woken by timers and events now, it
    lists at 12 s, the same rate, exactly.
    ``transfers`` and ``extra_flags`` (rclone global flags) belong to the node's daemon: a
    mount with other values gets a daemon of its own. ``upload_config`` is rclone global
    options (name, value) for this mount alone, sent as ``mount/mount``'s ``_config``: they
    apply to its VFS, so to its write-back uploads (the store's ``cached_upload_config``).
    ``upload_concurrency``, ``chunk_size``: the entry's upload tuning (None: default, see
    storage/upload_tuning), sent as ``remote_params`` (``,name=value`` backend options).
    The cache and read tuning of a MOUNT_CACHED entry (``config.mount_cached``, None: the
    default; rendered by ``mount_options``): ``cache_max_size`` (bytes; None: the node
    chooses), ``cache_max_age_s``, ``buffer_size``, ``read_ahead``, ``read_chunk_size`` (bytes)
    and ``read_chunk_streams``.
    """

    transfers: int = 1
    write_back_s: float = 5.0
    read_only: bool = False
    refresh_s: float = 12.0
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    upload_config: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    upload_concurrency: int | None = None
    chunk_size: int | None = None
    remote_params: str = ""
    cache_max_size: int | None = None
    cache_max_age_s: float | None = None
    buffer_size: int | None = None
    read_ahead: int | None = None
    read_chunk_size: int | None = None
    read_chunk_streams: int | None = None

    def recorded(self) -> dict[str, Any]:
        """The entry's tuning as JSON-ready data (for a recorded mount spec; the store's
        rclone options are left out: they are derived again at mount time)."""
        return {name: getattr(self, name) for name in _RECORDED}

    @classmethod
    def from_record(cls, spec: dict[str, Any]) -> MountOptions:
        """The options of a recorded mount ``spec`` (``recorded`` plus ``read_only``); a field
        recorded before it existed gets its default."""
        given = {name: spec[name] for name in _RECORDED if spec.get(name) is not None}
        return cls(read_only=bool(spec.get("read_only", False)), **given)


_RECORDED = ("transfers", "upload_concurrency", "chunk_size", "write_back_s", "cache_max_size",
             "cache_max_age_s", "buffer_size", "read_ahead", "read_chunk_size",
             "read_chunk_streams")  # fmt: skip


KEEP_LISTING = "876000h"
"""DirCacheTime of a writable MOUNT_CACHED mount: 100 years, i.e. the mount's life. Its
listing is never re-read on demand (a create would then wait for the store); the node's
refresher re-reads it in the background instead."""

DIR_CACHE_TIME = "10s"
"""DirCacheTime of every other mount (MOUNT, read-only MOUNT_CACHED): listings re-read on
demand once they are 10 s old."""

DEFAULT_CACHE_MAX_AGE = "1h"
"""CacheMaxAge of a MOUNT_CACHED mount whose entry sets none: how long rclone keeps a file
in the cache after its last use (never one not yet uploaded). 24 h filled nodes' disks."""

CACHE_POLL_INTERVAL = "10s"
"""CachePollInterval of a MOUNT_CACHED mount (SkyPilot's): how often rclone's cache cleaner
enforces the size and age bounds (rclone's default is every minute)."""


def keeps_listing(mode: StorageMode, options: MountOptions) -> bool:
    """True for a mount whose writer must never wait for the store (writable MOUNT_CACHED):
    it keeps its directory listing for its life, refreshed in the background."""
    return mode is StorageMode.MOUNT_CACHED and not options.read_only


def ordered(mode: StorageMode, options: MountOptions) -> bool:
    """True for a mount whose uploads go in creation order (writable MOUNT_CACHED, one
    transfer at a time): rclone never starts one of its uploads by itself (its write-back is
    ORDER_HOLD_S); the node's order keeper releases them one at a time (node/mountd/order)."""
    return mode is StorageMode.MOUNT_CACHED and options.transfers == 1 and not options.read_only


def mount_options(
    mode: StorageMode, options: MountOptions
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(vfsOpt, mountOpt) of rclone's ``mount/mount`` for a mount in ``mode``. A MOUNT_CACHED
    mount's cache is bounded in age (the entry's or DEFAULT_CACHE_MAX_AGE) and, when its
    entry says, in size (without ``CacheMaxSize`` the node program sets the bound)."""
    vfs: dict[str, Any] = {"DirCacheTime": DIR_CACHE_TIME}
    if mode is StorageMode.MOUNT_CACHED:
        write_back = (
            f"{ORDER_HOLD_S}s" if ordered(mode, options) else show_duration(options.write_back_s)
        )
        age = options.cache_max_age_s
        vfs |= {
            "CacheMode": "full",
            "WriteBack": write_back,
            "CacheMaxAge": DEFAULT_CACHE_MAX_AGE if age is None else show_duration(age),
            "CachePollInterval": CACHE_POLL_INTERVAL,
        }
        sizes = {
            "CacheMaxSize": options.cache_max_size,
            "ReadAhead": options.read_ahead,
            "ChunkSize": options.read_chunk_size,
        }
        vfs |= {key: show_bytes(n) for key, n in sizes.items() if n is not None}
        if options.read_chunk_streams is not None:
            vfs["ChunkStreams"] = options.read_chunk_streams
        if keeps_listing(mode, options):
            vfs["DirCacheTime"] = KEEP_LISTING
    elif mode is StorageMode.MOUNT:
        vfs["CacheMode"] = "off"
    else:
        raise ValueError("COPY is not a mount mode")
    if options.read_only:
        vfs["ReadOnly"] = True
    return vfs, {"AllowOther": True}


def rc_config(options: MountOptions) -> dict[str, str]:
    """The rclone global options of one mount, sent as ``mount/mount``'s ``_config``: its
    ``upload_config`` and the entry's buffer size (``BufferSize``, with its unit: rclone
    reads a plain number as KiB)."""
    config = dict(options.upload_config)
    if options.buffer_size is not None:
        config["BufferSize"] = show_bytes(options.buffer_size)
    return config
