"""A file_mounts entry's SkyPilot MOUNT_CACHED tuning (``type:`` presets and
``config.mount_cached``, skycore.storage.entry_spec): what each field gives the mount, the
rclone ``mount/mount`` options it renders, how it is recorded and written back, and each
refusal (one paragraph naming the field and the fix)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skycore.config import SkycoreConfig
from skycore.plan import order_notes
from skycore.storage import Storage, StorageMode, StorageSpecError, mounting
from skycore.storage.api import AccessInfo
from skycore.storage.entry_spec import PRESETS
from skycore.storage.mounting import MountOptions
from skycore.storage.s3 import AwsConfig
from skycore.storage.units import GiB, MiB
from skycore.task import Task, TaskError
from tests.unit.hypothesis_budget import examples
from tests.unit.skycore.task_messages import problems_of

CONFIG = SkycoreConfig(aws=AwsConfig(endpoint_url="http://127.0.0.1:1"))
CACHED = {"source": "s3://bucket-a", "mode": "MOUNT_CACHED"}


def entry(value: dict[str, Any], dst: str = "/ckpt") -> Storage:
    return Task.from_dict({"file_mounts": {dst: value}}).storage_mounts[dst]


def refusal(value: dict[str, Any]) -> str:
    with pytest.raises(TaskError) as e:
        Task.from_dict({"file_mounts": {"/ckpt": value}})
    msg = e.value.message
    problems_of(msg)
    assert e.value.exit_code == 2
    return msg


def node_mount(storage: Storage) -> dict[str, Any]:
    """What the node program gets for mounting ``storage`` at /ckpt (writable bucket)."""
    storage._access = AccessInfo(exists=True, can_read=True, can_write=True, anonymous=False)
    mounts = storage.mount_step("/ckpt", CONFIG).request()["mounts"]
    return json.loads(json.dumps(mounts[0]))


# --- what a cached mount renders ------------------------------------------------------------


def test_a_cached_mount_without_tuning_renders_bounded_age_and_a_fast_cleaner() -> None:
    vfs, mnt = mounting.mount_options(StorageMode.MOUNT_CACHED, MountOptions())
    assert vfs == {
        "DirCacheTime": mounting.KEEP_LISTING,
        "CacheMode": "full",
        "WriteBack": "1000000s",  # ordered: the node's order keeper releases each upload
        "CacheMaxAge": "1h",
        "CachePollInterval": "10s",
    }
    assert mnt == {"AllowOther": True}
    # No CacheMaxSize: the node program bounds the cache by its disk.
    assert "CacheMaxSize" not in node_mount(entry(CACHED))["vfs"]


def test_every_mount_cached_field_reaches_rclone() -> None:
    st = entry(
        CACHED
        | {
            "config": {
                "mount_cached": {
                    "transfers": 4,
                    "buffer_size": "64M",
                    "vfs_cache_max_size": "10G",
                    "vfs_cache_max_age": "30m",
                    "vfs_read_ahead": "128M",
                    "vfs_read_chunk_size": "32M",
                    "vfs_read_chunk_streams": 4,
                    "vfs_write_back": "2s",
                }
            }
        }
    )
    assert st.mount_options == MountOptions(
        transfers=4,
        write_back_s=2.0,
        buffer_size=64 * MiB,
        cache_max_size=10 * GiB,
        cache_max_age_s=1800.0,
        read_ahead=128 * MiB,
        read_chunk_size=32 * MiB,
        read_chunk_streams=4,
    )
    spec = node_mount(st)
    assert spec["vfs"] | {"DirCacheTime": "-"} == {
        "DirCacheTime": "-",
        "CacheMode": "full",
        "WriteBack": "2s",  # several transfers: rclone's own write-back
        "CacheMaxAge": "30m",
        "CachePollInterval": "10s",
        "CacheMaxSize": "10Gi",
        "ReadAhead": "128Mi",
        "ChunkSize": "32Mi",
        "ChunkStreams": 4,
    }
    assert spec["transfers"] == 4 and spec["dir"].endswith("/rcd-t4")  # the daemon's setting
    # A global rclone option, per mount: mount/mount's _config; with its unit (a bare
    # number would be KiB to rclone).
    assert spec["rc_config"]["BufferSize"] == "64Mi"


def test_an_ordered_mount_keeps_its_hold_whatever_write_back_it_sets() -> None:
    st = entry(CACHED | {"config": {"mount_cached": {"vfs_write_back": "45s"}}})
    spec = node_mount(st)
    assert spec["vfs"]["WriteBack"] == "1000000s" and spec["order"] == 45.0


@pytest.mark.parametrize(
    ("preset", "read_only", "transfers", "streams", "chunk"),
    [
        ("MODEL_CHECKPOINT_RO", True, 1, 16, "32Mi"),
        ("MODEL_CHECKPOINT_RW", False, 8, 16, "32Mi"),
        ("DATASET_RO", True, 1, 0, "8Mi"),
        ("DATASET_RW", False, 16, 0, "8Mi"),
    ],
)
def test_each_preset_gives_skypilots_values(
    preset: str, read_only: bool, transfers: int, streams: int, chunk: str
) -> None:
    st = entry(CACHED | {"type": preset.lower()})  # case-insensitive, as in SkyPilot
    assert st.mount_type == preset
    opts = st.mount_options
    assert (opts.read_only, opts.transfers) == (read_only, transfers)
    spec = node_mount(st)
    assert spec["vfs"]["ChunkStreams"] == streams and spec["vfs"]["ChunkSize"] == chunk
    assert spec["vfs"].get("ReadOnly", False) is read_only
    if read_only:  # nothing to upload: the node's default daemon, listed on demand
        assert spec["dir"].endswith("/rcd-t1") and spec["vfs"]["DirCacheTime"] == "10s"


def test_an_explicit_field_wins_over_the_preset() -> None:
    st = entry(
        CACHED
        | {
            "type": "DATASET_RO",
            "config": {"mount_cached": {"read_only": False, "vfs_read_chunk_size": "16M"}},
        }
    )
    assert st.mount_options.read_only is False and st.mount_options.read_chunk_size == 16 * MiB
    assert st.mount_options.read_chunk_streams == 0  # the preset's, not overridden
    rw = entry(
        CACHED | {"type": "MODEL_CHECKPOINT_RW", "config": {"mount_cached": {"transfers": 1}}}
    )
    assert rw.mount_options.transfers == 1 and mounting.ordered(rw.mode, rw.mount_options)


def test_equal_values_given_both_ways_are_fine() -> None:
    st = entry(CACHED | {"type": "DATASET_RW", "transfers": 16})
    assert st.mount_options.transfers == 16
    st = entry(CACHED | {"transfers": 4, "config": {"mount_cached": {"transfers": 4}}})
    assert st.mount_options.transfers == 4


def test_a_read_only_mount_through_config() -> None:
    cached = entry(CACHED | {"config": {"mount_cached": {"read_only": True}}})
    assert cached.mount_options.read_only and node_mount(cached)["vfs"]["ReadOnly"] is True
    plain = entry(
        {"source": "s3://bucket-a", "mode": "MOUNT", "config": {"mount": {"read_only": True}}}
    )
    assert plain.mount_options.read_only and node_mount(plain)["vfs"]["ReadOnly"] is True
    assert plain.mount_spec()["read_only"] is True


def test_the_old_knobs_keep_working_beside_the_new_ones() -> None:
    st = entry(
        CACHED
        | {
            "transfers": 2,
            "upload_concurrency": 4,
            "chunk_size": "16MiB",
            "config": {"mount_cached": {"vfs_cache_max_size": "2G"}},
        }
    )
    opts = st.mount_options
    assert (opts.transfers, opts.upload_concurrency, opts.chunk_size) == (2, 4, 16 * MiB)
    assert opts.cache_max_size == 2 * GiB


# --- refusals: one paragraph naming the field and the fix -----------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"config": {"mount_cached": {"vfs_cache_max_size": "10X"}}},
            ["file_mounts./ckpt.config.mount_cached.vfs_cache_max_size: '10X' is not a size",
             "e.g. 10G"],
        ),
        (
            {"config": {"mount_cached": {"vfs_cache_max_size": 10}}},
            ["vfs_cache_max_size: 10 is not a size with a unit"],
        ),
        (
            {"config": {"mount_cached": {"vfs_cache_max_size": "0"}}},
            ["vfs_cache_max_size: 0 leaves rclone's cache unbounded", "e.g. 10G"],
        ),
        (
            {"config": {"mount_cached": {"vfs_cache_max_age": "a day"}}},
            ["file_mounts./ckpt.config.mount_cached.vfs_cache_max_age: 'a day' is not a duration",
             "e.g. 1h"],
        ),
        (
            {"config": {"mount_cached": {"vfs_write_back": "-1s"}}},
            ["mount_cached.vfs_write_back: '-1s' is not a duration", "e.g. 5s"],
        ),
        (
            {"config": {"mount_cached": {"transfers": 0}}},
            ["config.mount_cached.transfers: should be greater than or equal to 1"],
        ),
        (
            {"config": {"mount_cached": {"vfs_read_chunk_streams": -1}}},
            ["vfs_read_chunk_streams: should be greater than or equal to 0"],
        ),
        (
            {"config": {"mount_cached": {"read_only": "yes"}}},
            ["config.mount_cached.read_only: should be a valid boolean"],
        ),
        (
            {"config": {"mount_cached": {"vfs_cache_max_sze": "1G"}}},
            ["unknown field 'file_mounts./ckpt.config.mount_cached.vfs_cache_max_sze' (did you "
             "mean 'vfs_cache_max_size'?)"],
        ),
        (
            {"config": {"mount_cachd": {}}},
            ["unknown field 'file_mounts./ckpt.config.mount_cachd' (did you mean 'mount_cached'?)"],
        ),
        (
            {"type": "MODEL"},
            ["file_mounts./ckpt.type: 'MODEL' is not one of 'MODEL_CHECKPOINT_RO'"],
        ),
        (
            {"config": {"disk_size": 100}},
            ["file_mounts./ckpt.config.disk_size: SkyPilot reads this for a volume",
             "remove it"],
        ),
        (
            {"config": {"disk_tier": "best"}},
            ["file_mounts./ckpt.config.disk_tier: SkyPilot reads this for a volume"],
        ),
        (
            {"mode": "MOUNT", "config": {"mount": {"hf_mount_args": ["--x"]}}},
            ["file_mounts./ckpt.config.mount.hf_mount_args: passes flags to hf-mount",
             "remove hf_mount_args"],
        ),
    ],
)  # fmt: skip
def test_bad_tuning_names_the_field_and_the_fix(value: dict[str, Any], expected: list[str]) -> None:
    msg = refusal(CACHED | value)
    for part in expected:
        assert part in msg


def test_every_problem_of_an_entry_in_one_message() -> None:
    msg = refusal(
        CACHED
        | {
            "config": {
                "mount_cached": {
                    "buffer_size": "lots",
                    "vfs_cache_max_age": "forever",
                    "vfs_read_ahead": "1Q",
                }
            }
        }
    )
    problems = problems_of(msg)
    assert len(problems) == 3, msg  # one line each
    assert all(p.startswith("file_mounts./ckpt.config.mount_cached.") for p in problems)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"transfers": 1, "config": {"mount_cached": {"transfers": 8}}},
            "file_mounts./ckpt: transfers: 1 and config.mount_cached.transfers: 8 disagree; "
            "give it once: remove transfers or config.mount_cached.transfers.",
        ),
        (
            {"transfers": 1, "type": "MODEL_CHECKPOINT_RW"},
            "file_mounts./ckpt: transfers: 1 and type MODEL_CHECKPOINT_RW (which sets "
            "transfers: 8) disagree; to override the preset write config.mount_cached."
            "transfers: 1 (it wins over the preset) and remove transfers.",
        ),
    ],
)
def test_a_value_given_two_ways_that_disagree_names_both(
    value: dict[str, Any], expected: str
) -> None:
    assert refusal(CACHED | value) == expected


@pytest.mark.parametrize("mode", ["MOUNT", "COPY"])
def test_cached_tuning_on_another_mode_is_refused_not_ignored(mode: str) -> None:
    msg = refusal(
        {"source": "s3://bucket-a", "mode": mode, "type": "DATASET_RO"}
        | {"config": {"mount_cached": {"vfs_cache_max_size": "1G"}}}
    )
    typed, tuned = problems_of(msg)  # both, one line each
    assert typed == (
        f"file_mounts./ckpt.type: DATASET_RO is a preset of MOUNT_CACHED tuning and this "
        f"entry's mode is {mode}, where it would do nothing; set mode: MOUNT_CACHED or remove type"
    )
    tunes = "file_mounts./ckpt.config.mount_cached tunes a MOUNT_CACHED mount and this entry's"
    assert tuned.startswith(f"{tunes} mode is {mode}")


def test_a_direct_caller_gets_the_same_checks() -> None:
    with pytest.raises(
        StorageSpecError, match=r"^f\.type: 'dataset' is not one of MODEL_CHECKPOINT_RO, "
    ):
        Storage.from_spec(
            name=None, source="s3://b", store=None, mode="MOUNT_CACHED", mount_type="dataset",
            field="f",
        )  # fmt: skip


def test_config_mount_on_a_cached_mount_points_to_mount_cached() -> None:
    msg = refusal(CACHED | {"config": {"mount": {"read_only": True}}})
    assert "file_mounts./ckpt.config.mount applies to a MOUNT" in msg
    assert "config.mount_cached.read_only: true" in msg


# --- order given up, said once --------------------------------------------------------------


def test_launch_says_once_per_mount_when_order_is_given_up() -> None:
    task = Task.from_dict(
        {
            "file_mounts": {
                "/ckpt": CACHED | {"type": "MODEL_CHECKPOINT_RW"},
                "/data": CACHED | {"type": "DATASET_RO"},  # read-only: uploads nothing
                "/logs": CACHED | {"config": {"mount_cached": {"transfers": 4}}},
                "/out": CACHED | {"transfers": 2},
                "/ordered": CACHED
                | {"type": "DATASET_RW", "config": {"mount_cached": {"transfers": 1}}},
                "/plain": {"source": "s3://bucket-a", "mode": "MOUNT"},
            }
        }
    )
    assert order_notes(task) == [
        "/ckpt: type MODEL_CHECKPOINT_RW uploads 8 files at once: files may reach the bucket "
        "in another order than they were written (set config.mount_cached.transfers: 1 to "
        "keep creation order)",
        "/logs: config.mount_cached.transfers: 4 uploads 4 files at once: files may reach the "
        "bucket in another order than they were written (set config.mount_cached.transfers: 1 "
        "to keep creation order)",
        "/out: transfers: 2 uploads 2 files at once: files may reach the bucket in another "
        "order than they were written (set transfers: 1 to keep creation order)",
    ]
    # A command-line override rewrites the task through YAML: the lines stay the same.
    assert order_notes(task.with_overrides(num_nodes=2)) == order_notes(task)


# --- recorded and written back --------------------------------------------------------------


def test_an_old_recorded_spec_gets_the_defaults() -> None:
    old = {
        "store": "s3", "bucket": "bucket-a", "prefix": "", "account": None,
        "mode": "MOUNT_CACHED", "anonymous": False, "read_only": False, "transfers": 1,
    }  # fmt: skip
    st = Storage.from_mount_spec(old)
    assert st.mount_options == MountOptions()
    vfs = node_mount(st)["vfs"]
    assert vfs["CacheMaxAge"] == "1h" and "CacheMaxSize" not in vfs


sizes = st.sampled_from(["64k", "8M", "512M", "10G", "1T", "100B", "3", "1.5G"])
durations = st.sampled_from(["500ms", "1s", "30s", "10m", "1h", "1h30m", "2d", "1w", "90"])
mount_cached = st.fixed_dictionaries(
    {},
    optional={
        "transfers": st.integers(1, 16),
        "buffer_size": sizes,
        "vfs_cache_max_size": sizes,
        "vfs_cache_max_age": durations,
        "vfs_read_ahead": sizes,
        "vfs_read_chunk_size": sizes,
        "vfs_read_chunk_streams": st.integers(0, 32),
        "vfs_write_back": durations,
        "read_only": st.booleans(),
    },
)


@st.composite
def cached_entries(draw: st.DrawFn) -> dict[str, Any]:
    value: dict[str, Any] = dict(CACHED)
    preset = draw(st.sampled_from([None, *PRESETS]))
    if preset:
        value["type"] = preset
    config = draw(mount_cached)
    if config:
        value["config"] = {"mount_cached": config}
    if draw(st.booleans()):  # a top-level transfers that agrees with the rest
        given = config.get("transfers", PRESETS.get(preset or "", {}).get("transfers"))
        value["transfers"] = given or draw(st.integers(1, 8))
    return value


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(cached_entries())
def test_the_tuning_survives_yaml_and_the_record(value: dict[str, Any]) -> None:
    """Written back (to_yaml_dict, through YAML) the entry loads to the same mount and the
    same origin of its transfers; recorded (mount_spec) a relaunch renders the same mount."""
    task = Task.from_dict({"file_mounts": {"/ckpt": value}})
    again = Task.from_dict(yaml.safe_load(yaml.safe_dump(task.to_yaml_dict())))
    assert again == task
    before, after = task.storage_mounts["/ckpt"], again.storage_mounts["/ckpt"]
    assert after.transfers_from == before.transfers_from
    assert order_notes(again) == order_notes(task)
    recorded = json.loads(json.dumps(before.mount_spec()))
    relaunch = Storage.from_mount_spec(recorded)
    assert relaunch.mount_options == before.mount_options
    assert node_mount(relaunch) == node_mount(before)
