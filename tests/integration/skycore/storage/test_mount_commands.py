"""The rclone command builders, pure: credentials, options, scripts and their paths."""

from __future__ import annotations

import configparser
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skycore import node
from skycore.config import SkycoreConfig
from skycore.storage import Storage, StorageMode, mounting
from skycore.storage.azure import AzureConfig
from skycore.storage.gcs import GcpConfig
from skycore.storage.mounting import MountOptions, RcloneEnv
from skycore.storage.r2 import R2Config
from skycore.storage.s3 import AwsConfig

CONFIG = SkycoreConfig(
    aws=AwsConfig(
        endpoint_url="http://127.0.0.1:1", access_key_id="AKIA1", secret_access_key="s3cret"
    ),
    gcp=GcpConfig(api_endpoint="http://127.0.0.1:2", access_token="ya29.tok"),
    azure=AzureConfig(
        account_name="skyuser",
        account_key="azkey==",
        endpoint_template="http://127.0.0.1:3/{account}",
    ),
    r2=R2Config(endpoint_url="http://127.0.0.1:4", access_key_id="R2KEY", secret_access_key="r2s"),
)
SECRETS = ("s3cret", "ya29.tok", "azkey==", "r2s")


def test_credential_file_has_every_remote() -> None:
    files = mounting.node_credential_files(CONFIG)
    assert list(files) == ["/root/.config/rclone/rclone.conf"]
    conf = configparser.ConfigParser()
    conf.read_string(files["/root/.config/rclone/rclone.conf"])
    assert set(conf.sections()) == {
        "skycore-s3",
        "skycore-s3-anon",
        "skycore-gcs",
        "skycore-gcs-anon",
        "skycore-azure",
        "skycore-r2",
        "skycore-r2-anon",
    }
    assert conf["skycore-s3"]["secret_access_key"] == "s3cret"
    assert "access_key_id" not in conf["skycore-s3-anon"]
    assert conf["skycore-gcs"]["endpoint"] == "http://127.0.0.1:2/storage/v1/"
    assert conf["skycore-gcs-anon"]["anonymous"] == "true"
    assert conf["skycore-azure"]["endpoint"] == "http://127.0.0.1:3/skyuser"
    assert conf["skycore-r2"]["provider"] == "Cloudflare"
    assert conf["skycore-r2"]["endpoint"] == "http://127.0.0.1:4"
    assert conf["skycore-r2"]["secret_access_key"] == "r2s"
    assert "access_key_id" not in conf["skycore-r2-anon"]
    only_s3 = mounting.rclone_config_text(SkycoreConfig(aws=CONFIG.section("aws")))
    assert "skycore-gcs" not in only_s3 and "skycore-azure" not in only_s3


def test_mount_options_per_mode() -> None:
    """Mount settings go to rclone's mount/mount per mount; what is global to a daemon
    (--transfers, extra flags) picks the daemon."""
    vfs, mnt = mounting.mount_options(StorageMode.MOUNT_CACHED, MountOptions())
    # an ordered mount's uploads never start by themselves: the node's order keeper releases them
    assert vfs["CacheMode"] == "full" and vfs["WriteBack"] == "1000000s" and "ReadOnly" not in vfs
    # The cache is bounded: an hour of age (24 h filled disks), checked every 10 s; its size
    # only when the entry sets one (the node program bounds it by its disk otherwise).
    assert vfs["CacheMaxAge"] == "1h" and vfs["CachePollInterval"] == "10s"
    assert "CacheMaxSize" not in vfs
    parallel, _ = mounting.mount_options(StorageMode.MOUNT_CACHED, MountOptions(transfers=4))
    assert parallel["WriteBack"] == "5s"
    assert vfs["DirCacheTime"] == mounting.KEEP_LISTING  # a writer never waits for a listing
    assert mnt == {"AllowOther": True}
    plain, _ = mounting.mount_options(StorageMode.MOUNT, MountOptions(read_only=True))
    assert plain["CacheMode"] == "off" and plain["ReadOnly"] is True
    assert plain["DirCacheTime"] == "10s"
    ro, _ = mounting.mount_options(StorageMode.MOUNT_CACHED, MountOptions(read_only=True))
    assert ro["DirCacheTime"] == "10s"  # no writer: listed on demand
    with pytest.raises(ValueError):
        mounting.mount_options(StorageMode.COPY, MountOptions())
    one = mounting.mount_dirs("/data", mode=StorageMode.MOUNT_CACHED)
    four = mounting.mount_dirs("/data", mode=StorageMode.MOUNT_CACHED, options=MountOptions(4))
    assert one == mounting.mount_dirs("/other") == mounting.daemon_dirs(1)  # one daemon
    assert four != one and "--transfers 4" in " ".join(mounting.daemon_flags(four, 4))
    ro_four = MountOptions(transfers=4, read_only=True)  # nothing to upload: default daemon
    assert mounting.mount_dirs("/d", mode=StorageMode.MOUNT_CACHED, options=ro_four) == one
    flags = " ".join(mounting.daemon_flags(one, 1))
    assert f"--rc-addr unix://{one.rc_socket}" in flags and f"--cache-dir {one.cache_dir}" in flags
    assert "--transfers 1" in flags and f"--log-file {one.log_file}" in flags
    script = mounting.mount_command("skycore-s3:b", "/data", StorageMode.MOUNT_CACHED)
    assert "rcd-t1" in script and "rclone mount" not in script and "--daemon" not in script


@given(
    st.lists(
        st.text(min_size=1, max_size=30).filter(lambda s: "/" not in s), min_size=1, max_size=4
    ),
    st.integers(min_value=1, max_value=64),
    st.lists(st.text(min_size=1, max_size=40), max_size=3),
)
def test_daemon_dirs_short_and_distinct_per_setting(
    parts: list[str], transfers: int, extra: list[str]
) -> None:
    """Every mount point shares its daemon's folder; distinct global settings get distinct
    daemons; the socket path fits a unix socket."""
    dst = "/" + "/".join(parts)
    opts = MountOptions(transfers=transfers, extra_flags=tuple(extra))
    dirs = mounting.mount_dirs(dst, mode=StorageMode.MOUNT_CACHED, options=opts)
    assert len(dirs.rc_socket) < 100  # unix socket paths are limited to 107 bytes
    assert dirs.cache_dir.startswith(dirs.base) and dirs.base.startswith(mounting.NODE_MOUNTS_BASE)
    assert mounting.mount_dirs(dst + "x", mode=StorageMode.MOUNT_CACHED, options=opts) == dirs
    other = MountOptions(transfers=transfers + 1, extra_flags=tuple(extra))
    assert mounting.mount_dirs(dst, mode=StorageMode.MOUNT_CACHED, options=other) != dirs
    if extra:
        plain = MountOptions(transfers=transfers)
        assert mounting.mount_dirs(dst, mode=StorageMode.MOUNT_CACHED, options=plain) != dirs


def test_commands_carry_no_secrets_and_unset_ca_bundle() -> None:
    storages = [
        Storage.from_spec(name="abc", source=None, store=s, mode=m)
        for s in ("s3", "gcs", "azure", "r2")
        for m in ("MOUNT", "MOUNT_CACHED")
    ]
    storages.insert(
        6,
        Storage.from_spec(name=None, source="azure://skyother/pub", store=None, mode="MOUNT"),
    )
    scripts = [s.mount_command("/mnt/x", CONFIG) for s in storages]
    scripts += [mounting.drain_command("/mnt/x", 30), mounting.unmount_command("/mnt/x", 30)]
    scripts.append(
        Storage.from_spec(name=None, source="gs://b/p", store=None, mode="COPY").copy_command(
            "~/d", CONFIG
        )
    )
    for script in scripts:
        assert "unset AWS_CA_BUNDLE" in script
        assert not any(secret in script for secret in SECRETS)
        assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
    assert "/usr/local/bin/rclone" in scripts[0]
    pub = ':azureblob,account=skyother,endpoint="http://127.0.0.1:3/skyother":pub'
    assert json.dumps(pub) in scripts[6]  # in the step's JSON request
    # A COPY destination under ~ reaches the node program as written; it expands ~ ($HOME).
    assert '"dst": "~/d"' in scripts[-1] and "copy-many" in scripts[-1]
    assert "skycore-r2:abc" in scripts[7] and "skycore-gcs:b/p" in scripts[-1]


def test_mount_script_moves_stray_files_aside(tmp_path: Path) -> None:
    """Files written into a mount point while it was not mounted (an interrupted launch, an
    exec on the node's disk) never block the mount and are never deleted: they are moved
    aside with a warning. (rclone is /bin/false here, so the mount itself then fails.)"""
    dst = tmp_path / "full"
    dst.mkdir()
    (dst / "file").write_text("x")
    helper = tmp_path / "skycore-mounts.py"
    helper.write_text(node.program("mounts.py"))
    env = RcloneEnv(
        rclone="/bin/false",
        config_file="/dev/null",
        mounts_base=str(tmp_path / "m"),
        helper=str(helper),
    )
    cmd = mounting.mount_command("skycore-s3:b", str(dst), StorageMode.MOUNT, env=env)
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, check=False)
    strays = list(tmp_path.glob("full.skycore-stray-*"))
    assert len(strays) == 1, r.stderr
    assert (strays[0] / "file").read_text() == "x"
    assert dst.is_dir() and not any(dst.iterdir())
    assert f"they were moved aside to {strays[0]}" in r.stderr
    assert "did not start" in r.stderr and r.returncode != 0  # /bin/false is no rclone


def test_drain_and_unmount_of_unmounted_path_are_noops(tmp_path: Path) -> None:
    env = RcloneEnv(rclone="/bin/false", config_file="/dev/null", mounts_base=str(tmp_path / "m"))
    for cmd in (
        mounting.drain_command(str(tmp_path / "x"), 5, env),
        mounting.unmount_command(str(tmp_path / "x"), 5, env),
    ):
        r = subprocess.run(
            ["bash", "-c", cmd], capture_output=True, text=True, timeout=30, check=False
        )
        assert r.returncode == 0, r.stderr


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20))
def test_any_destination_reaches_the_node_as_data(name: str) -> None:
    """A mount point or copy destination of any text stays data: the script parses, and
    its request holds the path exactly as written (the node program expands a leading ~)."""
    for path in (f"/mnt/{name}", f"~/{name}"):
        for step in (
            mounting.mount_step("skycore-s3:b", path, StorageMode.MOUNT_CACHED),
            mounting.copy_step(["skycore-s3:b"], path),
        ):
            script = step.script()
            assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
            assert [
                r["dst"] for r in [*step.request().get("mounts", []), *step.request()["copies"]]
            ] == [path]
            assert node.request_env(step.request()) in script.splitlines()


def test_remote_path_is_never_shell_code(tmp_path) -> None:
    """A bucket prefix with quotes or $(...) stays data in the mount script."""
    import subprocess

    from skycore.storage import mounting as m
    from skycore.storage.common import StorageMode

    marker = tmp_path / "pwned"
    remote = f's3:b/x$(touch {marker})"y'
    script = m.mount_command(remote, "/mnt/x", StorageMode.MOUNT_CACHED)
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    # The remote reaches the node program as data (its JSON request), and the whole script
    # runs without executing it (rclone is /bin/false here, so the mount itself fails).
    step = m.mount_step(remote, str(tmp_path / "x"), StorageMode.MOUNT_CACHED, env=m.RcloneEnv(
        rclone="/bin/false", config_file="/dev/null", mounts_base=str(tmp_path / "m"),
        helper=str(tmp_path / "skycore-mounts.py"),
    ))  # fmt: skip
    (tmp_path / "skycore-mounts.py").write_text(node.program("mounts.py"))
    assert [s["remote"] for s in step.request()["mounts"]] == [remote]
    out = subprocess.run(["bash", "-c", step.script()], capture_output=True, text=True)
    assert out.returncode != 0 and "did not start" in out.stderr, out.stderr
    assert not marker.exists()
