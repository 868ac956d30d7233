"""A storage entry's upload tuning (``upload_concurrency``, ``chunk_size``): its defaults, what
each store accepts, and the rclone options a node gets for it (skycore.storage.upload_tuning)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore.config import SkycoreConfig
from skycore.storage import Storage, StorageSpecError
from skycore.storage.api import AccessInfo
from skycore.storage.azure import AzureConfig
from skycore.storage.gcs import GcpConfig
from skycore.storage.s3 import AwsConfig
from skycore.storage.upload_tuning import ORDERED_STREAMS, parse_size, show_size
from skycore.task import Task, TaskError

MIB = 1 << 20
CONFIG = SkycoreConfig(
    aws=AwsConfig(endpoint_url="http://127.0.0.1:1"),
    azure=AzureConfig(account_name="skyuser", account_key="a2V5"),
    gcp=GcpConfig(api_endpoint="http://127.0.0.1:2", access_token="t"),
)


def node_spec(entry: dict[str, Any], writable: bool = True) -> dict[str, Any]:
    """What the node gets for mounting ``entry`` (a task YAML file_mounts value) at /m."""
    storage = Task.from_dict({"file_mounts": {"/m": entry}}).storage_mounts["/m"]
    storage._access = AccessInfo(exists=True, can_read=True, can_write=writable, anonymous=False)
    mounts = storage.mount_step("/m", CONFIG).request()["mounts"]
    return json.loads(json.dumps(mounts[0]))


def yaml_error(entry: dict[str, Any]) -> str:
    with pytest.raises(TaskError) as e:
        Task.from_dict({"file_mounts": {"/m": entry}})
    return e.value.message


def test_an_ordered_mount_sends_a_file_bigger_than_a_part_in_parallel_parts() -> None:
    spec = node_spec({"source": "s3://bucket-a", "mode": "MOUNT_CACHED"})
    # The backend options ride in the mount's connection string, after the mount's tag.
    assert spec["fs"].startswith("skycore-s3,description=skycore-")
    assert spec["fs"].endswith(f",upload_concurrency={ORDERED_STREAMS},chunk_size=5Mi:bucket-a")
    # rclone's multi-thread upload takes files over one part; one part or less is one PUT.
    assert spec["rc_config"] == {"MultiThreadCutoff": f"{5 * MIB + 1}B"}  # S3's part size
    assert spec["dir"].endswith("/rcd-t1")  # still the node's one daemon


def test_the_entry_sets_streams_and_part_size() -> None:
    entry = {"source": "s3://bucket-a", "mode": "MOUNT_CACHED"}
    spec = node_spec(entry | {"upload_concurrency": 4, "chunk_size": "16MiB"})
    assert spec["fs"].endswith(",upload_concurrency=4,chunk_size=16Mi:bucket-a")
    assert spec["rc_config"] == {"MultiThreadCutoff": f"{16 * MIB + 1}B"}
    one = node_spec(entry | {"upload_concurrency": 1})  # parts one after another: no gain
    assert one["fs"].endswith(",upload_concurrency=1,chunk_size=5Mi:bucket-a")
    assert one["rc_config"] == {}


def test_a_parallel_mount_keeps_the_store_defaults_unless_its_entry_says() -> None:
    entry = {"source": "s3://bucket-a", "mode": "MOUNT_CACHED", "transfers": 4}
    plain = node_spec(entry)
    assert plain["fs"].endswith(":bucket-a") and "upload_concurrency" not in plain["fs"]
    assert plain["rc_config"] == {}
    tuned = node_spec(entry | {"upload_concurrency": 2})
    assert tuned["fs"].endswith(",upload_concurrency=2:bucket-a")
    assert tuned["rc_config"] == {"MultiThreadCutoff": f"{5 * MIB + 1}B"}  # S3's own part


def test_azure_keeps_its_own_cutoff_and_gets_the_streams() -> None:
    spec = node_spec({"source": "azure://skyuser/box", "mode": "MOUNT_CACHED"})
    assert ",upload_concurrency=16,chunk_size=4Mi:" in spec["fs"]  # rclone's Azure defaults
    assert spec["rc_config"] == {"MultiThreadCutoff": "1"}  # AzureBlobStore says why


def test_a_mount_gets_only_what_its_entry_sets() -> None:
    plain = node_spec({"source": "s3://bucket-a", "mode": "MOUNT"})
    assert "upload_concurrency" not in plain["fs"] and plain["rc_config"] == {}
    tuned = node_spec({"source": "s3://bucket-a", "mode": "MOUNT", "chunk_size": "8MiB"})
    assert tuned["fs"].endswith(",chunk_size=8Mi:bucket-a")
    assert tuned["rc_config"] == {}  # a MOUNT's writes stream: no multi-thread copy


def test_read_only_and_gcs_mounts_get_no_tuning() -> None:
    ro = node_spec({"source": "s3://bucket-a", "mode": "MOUNT_CACHED"}, writable=False)
    assert "upload_concurrency" not in ro["fs"] and ro["rc_config"] == {}
    gcs = node_spec({"source": "gs://bucket-a", "mode": "MOUNT_CACHED"})
    assert "upload_concurrency" not in gcs["fs"] and gcs["rc_config"] == {}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"mode": "COPY", "upload_concurrency": 4}, "applies to a writable MOUNT or MOUNT_CACHED"),
        ({"upload_concurrency": 0}, "m.upload_concurrency: should be greater than or equal to 1"),
        ({"upload_concurrency": 65}, "m.upload_concurrency: should be less than or equal to 64"),
        ({"upload_concurrency": "4"}, "m.upload_concurrency: should be a valid integer"),
        ({"chunk_size": 8388608}, "m.chunk_size: 8388608 is not a size with a unit"),
        ({"chunk_size": "8"}, "is not a size with a unit"),
        ({"chunk_size": "8 parsecs"}, "is not a size with a unit"),
        ({"chunk_size": "4MiB"}, "m.chunk_size: 4MiB is out of range for s3"),
        ({"chunk_size": "6GiB"}, "use a size from 5MiB to 5GiB"),
        ({"mode": "MOUNT", "upload_concurrency": 16}, "80MiB on s3"),
        ({"source": "gs://bucket-a", "upload_concurrency": 4}, "gcs uploads each file as one"),
        ({"source": "azure://skyuser/box", "chunk_size": "4001MiB"}, "at most 4000 MiB"),
    ],
)
def test_bad_tuning_names_the_field_and_the_fix(entry: dict[str, Any], expected: str) -> None:
    msg = yaml_error({"source": "s3://bucket-a", "mode": "MOUNT_CACHED"} | entry)
    assert expected in msg
    assert "\n" not in msg and "Traceback" not in msg


@pytest.mark.parametrize(
    ("text", "size"),
    [("8MiB", 8 * MIB), ("8Mi", 8 * MIB), ("8M", 8 * MIB), ("8 mb", 8 * MIB),
     ("1.5MiB", 3 * MIB // 2), ("512K", MIB // 2), ("1G", 1024 * MIB)],
)  # fmt: skip
def test_sizes_read_as_rclone_reads_them(text: str, size: int) -> None:
    assert parse_size(text, "f") == size


@given(st.integers(1, 1 << 34))
def test_a_shown_size_reads_back_exactly(n: int) -> None:
    text = show_size(n)
    if text.endswith("B") and not text.endswith("iB"):
        with pytest.raises(StorageSpecError):  # bytes are no unit a user writes
            parse_size(text, "f")
    else:
        assert parse_size(text, "f") == n


@given(
    mode=st.sampled_from(["MOUNT", "MOUNT_CACHED"]),
    streams=st.one_of(st.none(), st.integers(1, 8)),
    chunk=st.one_of(st.none(), st.sampled_from(["5MiB", "8MiB", "5120KiB"])),
    transfers=st.sampled_from([None, 1, 4]),
)
def test_a_relaunch_renders_the_same_mount(
    mode: str, streams: int | None, chunk: str | None, transfers: int | None
) -> None:
    """The entry's values are recorded (mount_spec) and a relaunch renders the same mount; a
    task written back (to_yaml_dict) loads to the same entry."""
    entry: dict[str, Any] = {"source": "s3://bucket-a", "mode": mode}
    entry |= {"upload_concurrency": streams} if streams else {}
    entry |= {"chunk_size": chunk} if chunk else {}
    entry |= {"transfers": transfers} if transfers and mode == "MOUNT_CACHED" else {}
    task = Task.from_dict({"file_mounts": {"/m": entry}})
    original = task.storage_mounts["/m"]
    original._access = AccessInfo(exists=True, can_read=True, can_write=True, anonymous=False)
    again = Storage.from_mount_spec(original.mount_spec())
    assert again.mount_command("/m", CONFIG) == original.mount_command("/m", CONFIG)
    assert Task.from_dict(task.to_yaml_dict()) == task


def test_a_spec_recorded_before_the_tuning_gets_the_defaults() -> None:
    old = {
        "store": "s3", "bucket": "bucket-a", "prefix": "", "account": None,
        "mode": "MOUNT_CACHED", "anonymous": False, "read_only": False, "transfers": 1,
    }  # fmt: skip
    cmd = Storage.from_mount_spec(old).mount_command("/m", CONFIG)
    assert f"upload_concurrency={ORDERED_STREAMS},chunk_size=5Mi:bucket-a" in cmd
