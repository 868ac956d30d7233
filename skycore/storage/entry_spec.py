"""A file_mounts storage entry as a task YAML writes it (SkyPilot's schema), and what its
MOUNT_CACHED tuning resolves to.

Besides name, source, store, mode, persistent and the upload tuning (``transfers``,
``upload_concurrency``, ``chunk_size``), an entry takes SkyPilot's ``type:`` presets
(MODEL_CHECKPOINT_RO/RW, DATASET_RO/RW) and ``config.mount_cached`` (rclone's cache and read
tuning) for MOUNT_CACHED, and ``config.mount.read_only`` for MOUNT. An explicit
``config.mount_cached`` field wins over the preset; a top-level field that disagrees with
either is refused (``resolve``). ``written`` turns a mount's options back into these fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)

from skycore.storage.common import StorageMode, StorageSpecError
from skycore.storage.units import MiB, read_duration, read_size, show_bytes, show_duration
from skycore.storage.vfs_options import MountOptions
from skycore.stores import load_problem, store_names

MountType = Literal["MODEL_CHECKPOINT_RO", "MODEL_CHECKPOINT_RW", "DATASET_RO", "DATASET_RW"]

PRESETS: dict[str, dict[str, Any]] = {
    "MODEL_CHECKPOINT_RO": {
        "vfs_read_chunk_streams": 16,
        "vfs_read_chunk_size": 32 * MiB,
        "read_only": True,
    },
    "MODEL_CHECKPOINT_RW": {
        "vfs_read_chunk_streams": 16,
        "vfs_read_chunk_size": 32 * MiB,
        "transfers": 8,
    },
    "DATASET_RO": {"vfs_read_chunk_streams": 0, "vfs_read_chunk_size": 8 * MiB, "read_only": True},
    "DATASET_RW": {"vfs_read_chunk_streams": 0, "vfs_read_chunk_size": 8 * MiB, "transfers": 16},
}
"""SkyPilot's ``type:`` presets (sky/data/storage.py), sizes in bytes."""

OPTION_OF = {
    "transfers": "transfers",
    "buffer_size": "buffer_size",
    "vfs_cache_max_size": "cache_max_size",
    "vfs_cache_max_age": "cache_max_age_s",
    "vfs_read_ahead": "read_ahead",
    "vfs_read_chunk_size": "read_chunk_size",
    "vfs_read_chunk_streams": "read_chunk_streams",
    "vfs_write_back": "write_back_s",
    "read_only": "read_only",
}
"""The MountOptions field each ``config.mount_cached`` field sets."""

_SIZES = {"buffer_size", "vfs_cache_max_size", "vfs_read_ahead", "vfs_read_chunk_size"}
_DURATIONS = {"vfs_cache_max_age", "vfs_write_back"}
_CACHED_TRANSFERS = "config.mount_cached.transfers"


def upper(v: Any) -> Any:
    return v.upper() if isinstance(v, str) else v


def lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


def _known_store(v: str | None) -> str | None:
    if v is not None and v not in store_names():
        problem = load_problem(v)
        if problem is not None:
            raise ValueError(problem)
        raise ValueError(
            f"'{v}' is not a registered store; registered stores: {', '.join(store_names())} "
            "(a store comes from an installed store package)"
        )
    return v


def _size(example: str, positive: bool = False) -> BeforeValidator:
    """A size field (rclone's forms: ``10G``, ``512M``, ``64k``), read to bytes."""

    def check(v: Any) -> int | None:
        if v is None:
            return None
        n = read_size(v, example, rclone_forms=True)
        if positive and n == 0:
            raise ValueError(
                f"0 leaves rclone's cache unbounded; give a size above 0, e.g. {example}, "
                "or leave the field out for the default"
            )
        return n

    return BeforeValidator(check)


def _duration(example: str) -> BeforeValidator:
    """A duration field (rclone's forms: ``1h``, ``30s``, ``1h30m``, ``500ms``), in seconds."""
    return BeforeValidator(lambda v: None if v is None else read_duration(v, example))


def refused(why: str) -> AfterValidator:
    """A field SkyPilot has and skycore cannot honour: given a value, refused with ``why``."""

    def check(v: Any) -> Any:
        if v is not None:
            raise ValueError(why)
        return v

    return AfterValidator(check)


_VOLUME = (
    "SkyPilot reads this for a volume (a disk of its own), and a bucket mount here has no "
    "disk of its own (its cache is on the node's disk, resources.disk_size, bounded by "
    "config.mount_cached.vfs_cache_max_size): remove it"
)


class EntryProblems(StorageSpecError):
    """Several problems of one entry: one paragraph, and each in ``problems``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems) + ".")
        self.problems = [p + "." for p in problems]


def _one_source(v: Any) -> Any:
    if isinstance(v, list):
        raise ValueError(
            "a list of sources is SkyPilot's way to upload several local paths into one "
            "bucket; skycore takes one local folder or bucket URL: give one source (one "
            "entry per folder)"
        )
    return v


class StrictModel(BaseModel):
    """A YAML mapping whose unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class MountCachedSpec(StrictModel):
    """``config.mount_cached``: rclone's tuning of a MOUNT_CACHED mount, values read to
    bytes and seconds (None: the preset's or skycore's default)."""

    transfers: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    buffer_size: Annotated[int | None, _size("64M")] = None
    vfs_cache_max_size: Annotated[int | None, _size("10G", positive=True)] = None
    vfs_cache_max_age: Annotated[float | None, _duration("1h")] = None
    vfs_read_ahead: Annotated[int | None, _size("128M")] = None
    vfs_read_chunk_size: Annotated[int | None, _size("32M")] = None
    vfs_read_chunk_streams: Annotated[StrictInt, Field(ge=0)] | None = None
    vfs_write_back: Annotated[float | None, _duration("5s")] = None
    read_only: StrictBool | None = None


class MountSpec(StrictModel):
    """``config.mount``: settings of a MOUNT (no cache)."""

    read_only: StrictBool | None = None
    hf_mount_args: Annotated[
        Any,
        refused(
            "passes flags to hf-mount, which mounts SkyPilot's Hugging Face store; skycore "
            "has no such store: remove hf_mount_args"
        ),
    ] = Field(default=None, exclude=True)


class EntryConfig(StrictModel):
    """``config``: the per-mode settings of an entry."""

    mount_cached: MountCachedSpec | None = None
    mount: MountSpec | None = None
    disk_size: Annotated[Any, refused(_VOLUME)] = Field(default=None, exclude=True)
    disk_tier: Annotated[Any, refused(_VOLUME)] = Field(default=None, exclude=True)
    storage_type: Annotated[Any, refused(_VOLUME)] = Field(default=None, exclude=True)
    attach_mode: Annotated[Any, refused(_VOLUME)] = Field(default=None, exclude=True)


class StorageSpec(StrictModel):
    """A file_mounts storage entry as written in the YAML."""

    name: str | None = None
    source: Annotated[str | None, BeforeValidator(_one_source)] = None
    store: Annotated[str | None, BeforeValidator(lower), AfterValidator(_known_store)] = None
    mode: Annotated[Literal["COPY", "MOUNT", "MOUNT_CACHED"], BeforeValidator(upper)] = "MOUNT"
    persistent: StrictBool = True
    transfers: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    upload_concurrency: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    chunk_size: StrictStr | StrictInt | None = None  # a size with a unit, checked per store
    type: Annotated[MountType | None, BeforeValidator(upper)] = None
    config: EntryConfig | None = None
    mount_options: Annotated[
        Any,
        refused(
            "passes extra flags to SkyPilot's mount tool; skycore's mounts take their "
            "settings from config.mount_cached (MOUNT_CACHED) and config.mount (MOUNT): "
            "remove mount_options"
        ),
    ] = Field(default=None, exclude=True)


MODELS: dict[tuple[str, ...], type[BaseModel]] = {
    (): StorageSpec,
    ("config",): EntryConfig,
    ("config", "mount_cached"): MountCachedSpec,
    ("config", "mount"): MountSpec,
}
"""The model of each mapping of an entry, by its path (for "did you mean")."""


@dataclass(frozen=True)
class Tuning:
    """What an entry's type, config and top-level ``transfers`` give its mount: its
    ``transfers`` (None: the default), the field they came from (``transfers``,
    ``config.mount_cached.transfers``, ``type``; None for the default) and the other
    MountOptions fields they set."""

    transfers: int | None = None
    transfers_from: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _mode_problems(
    mode: StorageMode, mount_type: str | None, config: EntryConfig | None, field: str
) -> list[str]:
    out = []
    if mount_type is not None and mount_type not in PRESETS:
        out.append(f"{field}.type: {mount_type!r} is not one of {', '.join(PRESETS)}")
    where = f"this entry's mode is {mode.value}, where it would do nothing"
    if mode is not StorageMode.MOUNT_CACHED and mount_type is not None:
        out.append(
            f"{field}.type: {mount_type} is a preset of MOUNT_CACHED tuning and {where}; "
            "set mode: MOUNT_CACHED or remove type"
        )
    if mode is not StorageMode.MOUNT_CACHED and config and config.mount_cached is not None:
        fix = " (for a read-only MOUNT: config.mount.read_only: true)"
        out.append(
            f"{field}.config.mount_cached tunes a MOUNT_CACHED mount and {where}; set mode: "
            f"MOUNT_CACHED or remove config.mount_cached"
            + (fix if mode is StorageMode.MOUNT else "")
        )
    if mode is not StorageMode.MOUNT and config and config.mount is not None:
        fix = " (for a read-only cached mount: config.mount_cached.read_only: true)"
        out.append(
            f"{field}.config.mount applies to a MOUNT and {where}; set mode: MOUNT or remove "
            "config.mount" + (fix if mode is StorageMode.MOUNT_CACHED else "")
        )
    return out


def resolve(
    mode: StorageMode,
    mount_type: str | None,
    config: EntryConfig | None,
    transfers: int | None,
    field: str,
) -> Tuning:
    """The mount tuning of an entry in ``mode`` with this ``type``, ``config`` and top-level
    ``transfers``: the preset, overridden by ``config.mount_cached``; StorageSpecError naming
    the fields and the fix (every problem of the entry in one paragraph) if they do not fit
    the mode or disagree."""
    problems = _mode_problems(mode, mount_type, config, field)
    if problems:
        raise EntryProblems(problems)
    if mode is not StorageMode.MOUNT_CACHED:  # a top-level transfers is refused later
        read_only = config.mount.read_only if config and config.mount else None
        origin = "transfers" if transfers is not None else None
        return Tuning(transfers, origin, {} if read_only is None else {"read_only": read_only})
    preset = PRESETS.get(mount_type or "", {})
    given = config.mount_cached if config and config.mount_cached else MountCachedSpec()
    explicit = given.model_dump(exclude_none=True)
    merged = preset | explicit
    transfers_from = None
    if transfers is not None:
        transfers_from = "transfers"
        if merged.get("transfers", transfers) != transfers:
            other = (
                f"{_CACHED_TRANSFERS}: {merged['transfers']}"
                if "transfers" in explicit
                else f"type {mount_type} (which sets transfers: {merged['transfers']})"
            )
            fix = (
                f"give it once: remove transfers or {_CACHED_TRANSFERS}"
                if "transfers" in explicit
                else f"to override the preset write {_CACHED_TRANSFERS}: {transfers} (it wins "
                "over the preset) and remove transfers"
            )
            raise StorageSpecError(f"{field}: transfers: {transfers} and {other} disagree; {fix}.")
        merged["transfers"] = transfers
    elif "transfers" in explicit:
        transfers_from = _CACHED_TRANSFERS
    elif "transfers" in preset:
        transfers_from = "type"
    count = merged.pop("transfers", None)
    return Tuning(count, transfers_from, {OPTION_OF[k]: v for k, v in merged.items()})


def written(
    mode: StorageMode,
    mount_type: str | None,
    transfers_from: str | None,
    options: MountOptions,
) -> dict[str, Any]:
    """The fields of an entry (``type``, ``transfers``, ``config``) that give a mount in
    ``mode`` these ``options``, as a YAML writes them: they load back (``resolve``) to the
    same options and the same origin of ``transfers``."""
    out: dict[str, Any] = {}
    if mount_type is not None:
        out["type"] = mount_type
    cached: dict[str, Any] = {}
    preset, default = PRESETS.get(mount_type or "", {}), MountOptions()
    if transfers_from == "transfers" or (transfers_from is None and options.transfers != 1):
        out["transfers"] = options.transfers
    over_preset = preset.get("transfers", options.transfers) != options.transfers
    if transfers_from == _CACHED_TRANSFERS or over_preset:  # the config's wins over a preset
        cached["transfers"] = options.transfers
    for name, attr in OPTION_OF.items():
        value = getattr(options, attr)
        if name == "transfers" or value == preset.get(name, getattr(default, attr)):
            continue
        shown: Callable[[Any], Any] = (
            show_bytes if name in _SIZES else show_duration if name in _DURATIONS else bool
        )
        cached[name] = value if name == "vfs_read_chunk_streams" else shown(value)
    if mode is StorageMode.MOUNT_CACHED and cached:
        out["config"] = {"mount_cached": cached}
    elif mode is StorageMode.MOUNT and options.read_only:
        out["config"] = {"mount": {"read_only": True}}
    return out


def order_given_up(
    dst: str,
    mode: StorageMode,
    mount_type: str | None,
    transfers_from: str | None,
    options: MountOptions,
) -> str | None:
    """The line that says a writable MOUNT_CACHED mount uploading several files at once may
    put them in the bucket out of creation order (None for any other mount)."""
    n = options.transfers
    if mode is not StorageMode.MOUNT_CACHED or options.read_only or n == 1:
        return None
    what, fix = f"transfers: {n}", "transfers: 1"
    if transfers_from == "type":
        what, fix = f"type {mount_type}", f"{_CACHED_TRANSFERS}: 1"
    elif transfers_from == _CACHED_TRANSFERS:
        what, fix = f"{_CACHED_TRANSFERS}: {n}", f"{_CACHED_TRANSFERS}: 1"
    return (
        f"{dst}: {what} uploads {n} files at once: files may reach the bucket in another "
        f"order than they were written (set {fix} to keep creation order)"
    )
