"""How a mount's big files go up: how many streams each file uses (``upload_concurrency``)
and how big each part is (``chunk_size``), as a task's storage entry sets them, their
defaults, what each store accepts, and the rclone options that carry them.

A file goes up in parts, several at once, through rclone's multi-thread upload (a store
whose rclone backend has a chunk writer: S3 and its kin send a multipart upload, Azure
stages blocks and commits the block list). On a WAN one TCP stream carries about window /
RTT, so the streams of one file are what make an ordered mount (one file at a time) as fast
as a mount that uploads several files at once. A file of one part or less stays one request.

The numbers reach rclone as backend options in the mount's connection string
(``remote,upload_concurrency=8,chunk_size=5Mi:bucket``, per mount) and, for a MOUNT_CACHED
mount, as ``MultiThreadCutoff`` in its ``mount/mount`` ``_config`` (``upload_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from skycore.storage.common import StorageMode, StorageSpecError
from skycore.storage.units import GiB, KiB, MiB
from skycore.storage.units import parse_size as parse_size
from skycore.storage.vfs_options import MountOptions, ordered

ORDERED_STREAMS = 8
"""Streams per file of an ordered MOUNT_CACHED mount, by default, at least (a store whose
rclone backend sends more by default keeps its own: Azure's 16). An ordered mount uploads one
file at a time; the mount it replaces uploads 4 at once (``transfers: 4``), one stream each
on S3 (a file under rclone's 200 MiB upload cutoff is one PUT). With a per-stream cap of
window / RTT, one file needs more streams than that to match it, since each file also pays
its own round trips (start, commit, the read-back of the new object) that a parallel mount
overlaps: 8 is twice the parallel mount's streams. The streams of a cached upload read their
parts straight from the cache file, so they cost connections, not memory (rclone buffers a
part only when the source is not a local file)."""

MOUNT_BUFFER_BUDGET = 64 * MiB
"""The most memory a writable MOUNT's uploads may buffer per file being written (streams x
part size): a file written through a MOUNT has no local copy, so rclone holds every part in
flight in memory, and a node's whole rclone must stay within 100 MiB."""


@dataclass(frozen=True)
class PartLimits:
    """What a store accepts for one part of a multipart upload, and its rclone backend's
    defaults. ``default_chunk`` is also an ordered mount's part size: the smaller the part,
    the more streams a mid-sized file uses (a 32 MiB file is 7 parts of S3's 5 MiB, all sent
    at once; of 8 MiB it would be 4), at one request per part."""

    min_bytes: int
    max_bytes: int
    default_streams: int
    default_chunk: int
    rule: str  # the store's rule, for messages


def show_size(n: int) -> str:
    """``n`` bytes exactly, in the largest unit that divides it (``5MiB``, ``1536KiB``)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def rclone_size(n: int) -> str:
    """``n`` bytes as rclone reads a size (a plain number there means KiB)."""
    return f"{n // MiB}Mi" if n % MiB == 0 else f"{n}B"


def checked(
    limits: PartLimits | None,
    store: str,
    mode: StorageMode,
    streams: int | None,
    chunk_size: object,
    field: str,
) -> tuple[int | None, int | None]:
    """(streams, part size in bytes) of a storage entry whose ``chunk_size`` is a size with
    a unit; StorageSpecError (naming ``field`` and the fix) if ``store`` cannot take them in
    ``mode``."""
    chunk = None if chunk_size is None else parse_size(chunk_size, f"{field}.chunk_size")
    if streams is None and chunk is None:
        return None, None
    given = "upload_concurrency" if streams is not None else "chunk_size"
    if not mode.is_mount:
        raise StorageSpecError(
            f"{field}.{given} applies to a writable MOUNT or MOUNT_CACHED only (this entry is "
            f"{mode.value}, which uploads nothing); remove {given} or change the mode."
        )
    if limits is None:
        raise StorageSpecError(
            f"{field}.{given}: {store} uploads each file as one stream (rclone has no "
            f"multipart or multi-thread upload for it), so {given} has no effect there; "
            f"remove {given}."
        )
    if chunk is not None and not limits.min_bytes <= chunk <= limits.max_bytes:
        raise StorageSpecError(
            f"{field}.chunk_size: {show_size(chunk)} is out of range for {store} "
            f"({limits.rule}); use a size from {show_size(limits.min_bytes)} to "
            f"{show_size(limits.max_bytes)}, e.g. chunk_size: 8MiB."
        )
    if mode is StorageMode.MOUNT:
        held = (streams or limits.default_streams) * (chunk or limits.default_chunk)
        if held > MOUNT_BUFFER_BUDGET:
            raise StorageSpecError(
                f"{field}: upload_concurrency x chunk_size is {show_size(held)} on {store}, "
                "which rclone holds in memory for each file written through a MOUNT; keep it "
                f"at or under {show_size(MOUNT_BUFFER_BUDGET)} (e.g. upload_concurrency: 4 "
                "with chunk_size: 8MiB), or use mode: MOUNT_CACHED, whose uploads read the "
                "cache file."
            )
    return streams, chunk


def streams_and_chunk(
    limits: PartLimits | None, mode: StorageMode, options: MountOptions
) -> tuple[int | None, int | None]:
    """(streams per file, part size) a mount's uploads get; None where the store's rclone
    default stands. An ordered mount gets ORDERED_STREAMS streams (or the store's default, if
    more) of the store's default part size unless its entry says otherwise; any other mount
    keeps the store's defaults unless its entry says."""
    if limits is None or options.read_only or not mode.is_mount:
        return None, None
    streams, chunk = options.upload_concurrency, options.chunk_size
    if ordered(mode, options):
        streams = streams or max(ORDERED_STREAMS, limits.default_streams)
        chunk = chunk or limits.default_chunk
    return streams, chunk


def tuned(limits: PartLimits | None, mode: StorageMode, options: MountOptions) -> MountOptions:
    """``options`` with the rclone options that carry its upload tuning: backend options for
    the connection string (``remote_params``) and, for MOUNT_CACHED, the multi-thread
    cutoff (``upload_config``): a file bigger than one part goes up in parts."""
    streams, chunk = streams_and_chunk(limits, mode, options)
    if limits is None or (streams is None and chunk is None):
        return options
    params = f",upload_concurrency={streams}" if streams is not None else ""
    params += f",chunk_size={rclone_size(chunk)}" if chunk is not None else ""
    config = dict(options.upload_config)
    if mode is StorageMode.MOUNT_CACHED and streams != 1:  # one stream: one PUT is better
        config["MultiThreadCutoff"] = f"{(chunk or limits.default_chunk) + 1}B"
    return replace(
        options,
        remote_params=params,
        upload_config=tuple(config.items()),
    )


def entry_tuning(
    store: str,
    mode: StorageMode,
    transfers: int | None,
    tuning: tuple[PartLimits | None, int | None, object],
    field: str,
) -> tuple[int | None, int | None]:
    """(streams, part size in bytes) of a storage entry of ``store`` in ``mode`` with these
    ``transfers`` and ``tuning`` (the store's part limits, upload_concurrency and chunk_size
    as written); StorageSpecError naming ``field`` and the fix if they do not apply."""
    if transfers is not None and mode is not StorageMode.MOUNT_CACHED:
        raise StorageSpecError(
            f"{field}.transfers applies to mode MOUNT_CACHED only (this entry is "
            f"{mode.value}); remove transfers or use mode: MOUNT_CACHED."
        )
    return checked(tuning[0], store, mode, tuning[1], tuning[2], field)


def entry_fields(options: MountOptions) -> dict[str, object]:
    """The upload fields of a storage entry as its YAML writes them (those not default;
    ``transfers`` and the cache tuning: storage/entry_spec ``written``)."""
    out: dict[str, object] = {}
    if options.upload_concurrency is not None:
        out["upload_concurrency"] = options.upload_concurrency
    if options.chunk_size is not None:
        out["chunk_size"] = show_size(options.chunk_size)
    return out
