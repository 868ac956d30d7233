"""Mounts are recorded as specs (data) and rendered by the current code; a database written
by an older skycore (mounts stored as bash) is migrated. Real SQLite, no cloud."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore import node, state
from skycore.config import SkycoreConfig
from skycore.storage import Storage
from skycore.storage.azure import AzureConfig
from skycore.storage.s3 import AwsConfig

CONFIG = SkycoreConfig(
    aws=AwsConfig(endpoint_url="http://127.0.0.1:1", access_key_id="K", secret_access_key="S"),
    azure=AzureConfig(
        account_name="skyuser", account_key="a2V5", endpoint_template="http://127.0.0.1:3/{account}"
    ),
)

# The mounts table and two rows exactly as skycore wrote them before mount specs.
OLD_SCHEMA = """
CREATE TABLE mounts (cluster TEXT NOT NULL, dst TEXT NOT NULL, storage_name TEXT,
  mode TEXT NOT NULL, persistent INTEGER NOT NULL DEFAULT 1, mount_command TEXT,
  PRIMARY KEY (cluster, dst));
"""
OLD_S3 = (
    "set -euo pipefail\nDST=/ckpt\n/usr/local/bin/rclone --config /root/.config/rclone/rclone.conf"
    ' mount skycore-s3:ckpt-bucket/run/1 "$DST" --daemon --daemon-wait 60s --allow-other '
    "--vfs-cache-mode full --vfs-write-back 5s --transfers 4 --cache-dir /x </dev/null\n"
)
OLD_AZURE_ANON = (
    "DST=/pub\n/usr/local/bin/rclone --config /c mount ':azureblob,account=skyother,"
    'endpoint="http://127.0.0.1:3/skyother":opendatasets\' "$DST" --daemon --read-only\n'
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_an_old_database_is_migrated_to_specs(home: Path) -> None:
    home.mkdir()
    with sqlite3.connect(home / "state.db") as conn:
        conn.executescript(OLD_SCHEMA)
        conn.executemany(
            "INSERT INTO mounts VALUES (?, ?, ?, ?, ?, ?)",
            [
                ("c1", "/ckpt", "ckpt-bucket", "MOUNT_CACHED", 1, OLD_S3),
                ("c1", "/pub", None, "MOUNT", 1, OLD_AZURE_ANON),
                ("c1", "/copy", "b", "COPY", 1, None),
                ("c1", "/odd", "b", "MOUNT", 1, "echo something else entirely"),
            ],
        )
    mounts = {m.dst: m for m in state.get_cluster_mounts("c1")}
    assert mounts["/ckpt"].spec == {
        "store": "s3", "bucket": "ckpt-bucket", "prefix": "run/1", "account": None,
        "mode": "MOUNT_CACHED", "anonymous": False, "read_only": False, "transfers": 4,
    }  # fmt: skip
    pub = mounts["/pub"].spec
    assert pub is not None
    assert (pub["bucket"], pub["account"], pub["anonymous"], pub["read_only"]) == (
        "opendatasets", "skyother", True, True,
    )  # fmt: skip
    assert not mounts["/copy"].is_mount
    assert mounts["/odd"].spec is None  # not recognised: never replayed as bash
    assert any("could not be migrated" in e.reason for e in state.cluster_events("c1"))
    # Rendered by today's code: the old bash is gone from the database.
    cmd = Storage.from_mount_spec(mounts["/ckpt"].spec).mount_command("/ckpt", CONFIG)  # type: ignore[arg-type]
    assert "skycore-s3" in cmd and "ckpt-bucket/run/1" in cmd
    assert "--daemon-wait" not in cmd  # the old per-mount daemon flags are not replayed
    with sqlite3.connect(home / "state.db") as conn:
        left = conn.execute("SELECT COUNT(*) FROM mounts WHERE mount_command IS NOT NULL")
        assert left.fetchone()[0] == 0


@given(
    mode=st.sampled_from(["MOUNT", "MOUNT_CACHED"]),
    transfers=st.integers(1, 8),
    prefix=st.sampled_from(["", "a", "a/b c"]),
    read_only=st.booleans(),
    anonymous=st.booleans(),
)
def test_spec_round_trip_renders_the_same_mount(
    mode: str, transfers: int, prefix: str, read_only: bool, anonymous: bool
) -> None:
    from skycore.storage.api import AccessInfo

    source = "s3://bucket-a" + (f"/{prefix}" if prefix else "")
    original = Storage.from_spec(
        name=None,
        source=source,
        store=None,
        mode=mode,
        transfers=transfers if mode == "MOUNT_CACHED" else None,
    )
    original._access = AccessInfo(
        exists=True, can_read=True, can_write=not read_only, anonymous=anonymous
    )
    spec = original.mount_spec()
    again = Storage.from_mount_spec(spec)
    assert again.mount_spec() == spec
    assert again.mount_command("/m", CONFIG) == original.mount_command("/m", CONFIG)


def test_a_store_sets_rclone_options_for_its_cached_uploads_only() -> None:
    """A store's ``cached_upload_config`` reaches rclone as ``mount/mount``'s ``_config`` of its
    MOUNT_CACHED mounts only (Azure: multi-thread uploads, see AzureBlobStore), survives a
    merge of mount steps (``MountStep.merged``), and leaves the daemon shared."""
    import json

    from skycore.storage import mounting
    from skycore.storage.api import AccessInfo

    def script(source: str, mode: str, transfers: int | None = None) -> mounting.MountStep:
        st = Storage.from_spec(name=None, source=source, store=None, mode=mode, transfers=transfers)
        st._access = AccessInfo(exists=True, can_read=True, can_write=True, anonymous=False)
        return st.mount_step("/m", CONFIG)

    def node_specs(step: mounting.MountStep) -> list[dict]:
        merged = mounting.MountStep(env=step.env).merged(step)
        assert merged is not None
        lines = merged.script().splitlines()
        assert node.assignment("SKYCORE_MOUNTD_COMMAND", "up-many") in lines
        assert node.request_env(merged.request()) in lines
        return json.loads(json.dumps(merged.request()["mounts"]))

    azure_cached = node_specs(script("azure://skyuser/box", "MOUNT_CACHED"))
    assert azure_cached[0]["rc_config"] == {"MultiThreadCutoff": "1"}
    parallel = node_specs(script("azure://skyuser/box", "MOUNT_CACHED", transfers=4))
    assert parallel[0]["rc_config"] == {"MultiThreadCutoff": "1"}  # whatever the transfers
    assert azure_cached[0]["dir"].endswith("/rcd-t1")  # the node's one daemon, as before
    assert node_specs(script("azure://skyuser/box", "MOUNT"))[0]["rc_config"] == {}
    # An ordered S3 mount sends a file bigger than one part in parts (storage/upload_tuning);
    # a parallel one keeps rclone's defaults.
    ordered_s3 = node_specs(script("s3://bucket-a", "MOUNT_CACHED"))
    assert ordered_s3[0]["rc_config"] == {"MultiThreadCutoff": "5242881B"}
    assert node_specs(script("s3://bucket-a", "MOUNT_CACHED", transfers=4))[0]["rc_config"] == {}


def test_a_cached_writer_keeps_its_listing_and_the_node_refreshes_it() -> None:
    """A writable MOUNT_CACHED mount never lists on demand (DirCacheTime: the mount's life):
    the node program lists it at mount time and refreshes it every ``refresh_s`` (also
    after a merge of mount steps). Every other mount lists on demand (10 s) and has no
    refresher."""
    import json

    from skycore.storage import mounting
    from skycore.storage.api import AccessInfo

    def spec(mode: str, read_only: bool = False, refresh_s: float | None = None) -> dict:
        st = Storage.from_spec(name=None, source="s3://bucket-a", store=None, mode=mode)
        if refresh_s is not None:
            st.mount_options = mounting.MountOptions(refresh_s=refresh_s)
        st._access = AccessInfo(
            exists=True, can_read=True, can_write=not read_only, anonymous=False
        )
        step = st.mount_step("/m", CONFIG)
        merged = mounting.MountStep(env=step.env).merged(step)
        assert merged is not None
        lines = merged.script().splitlines()
        assert node.assignment("SKYCORE_MOUNTD_COMMAND", "up-many") in lines
        assert node.request_env(merged.request()) in lines
        return dict(json.loads(json.dumps(merged.request()["mounts"]))[0])

    cached = spec("MOUNT_CACHED")
    assert cached["vfs"]["DirCacheTime"] == mounting.KEEP_LISTING == "876000h"
    assert cached["refresh"] == 12.0  # the default period (MountOptions.refresh_s)
    assert spec("MOUNT_CACHED", refresh_s=2.5)["refresh"] == 2.5  # kept through the merge
    for other in (spec("MOUNT_CACHED", read_only=True), spec("MOUNT")):
        assert other["vfs"]["DirCacheTime"] == "10s"
        assert other["refresh"] is None
