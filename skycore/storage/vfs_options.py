"""The rclone ``mount/mount`` options a mount's tuning (``mounting.MountOptions``) renders:
``vfsOpt`` (rclone's vfs/vfscommon Options, by their Go names), ``mountOpt`` and the global
options sent as ``_config`` (``rc_config``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skycore.node.mountd.order import ORDER_HOLD_S
from skycore.storage.common import StorageMode
from skycore.storage.units import show_bytes, show_duration

if TYPE_CHECKING:
    from skycore.storage.mounting import MountOptions

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
