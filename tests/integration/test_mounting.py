"""rclone command builders (pure) and real host-side FUSE mounts against the emulators."""

from __future__ import annotations

import configparser
import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.emulators.fleet import RunningEmulator
from harness.testing.order_check import assert_visible_prefix
from skycore import node
from skycore.config import SkycoreConfig
from skycore.node.mountd import rc as node_rc
from skycore.node.mountd.refresher import ordered_mounts
from skycore.storage import Storage, StorageMode, make_store, mounting
from skycore.storage.azure import AzureConfig
from skycore.storage.gcs import GcpConfig
from skycore.storage.mounting import MountOptions, RcloneEnv
from skycore.storage.r2 import R2Config
from skycore.storage.s3 import AwsConfig
from tests.integration.helpers import emulator_bucket
from tests.smoke import fault_events

# --- pure builders ------------------------------------------------------------------------------

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


# --- real FUSE mounts on the host ----------------------------------------------------------------

RCLONE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "rclone"


@pytest.fixture
def host_env(store_config: SkycoreConfig) -> Iterator[RcloneEnv]:
    """rclone store_config written like a node's (0600) and a short per-test mounts folder."""
    if not Path("/dev/fuse").exists() or not shutil.which("fusermount3"):
        pytest.fail("FUSE is missing: /dev/fuse and fusermount3 are needed (apt install fuse3).")
    base = Path(tempfile.mkdtemp(prefix="skm-", dir="/tmp"))
    conf = base / "rclone.conf"
    env = RcloneEnv(
        rclone=str(RCLONE),
        config_file=str(conf),
        mounts_base=str(base / "m"),
        helper=str(base / "skycore-mounts.py"),
    )
    for path, content in mounting.node_files(store_config, env).items():
        Path(path).write_text(content)
        os.chmod(path, 0o600)
    yield env
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mnt = line.split()[1]
        if mnt.startswith(str(base)):
            subprocess.run(["fusermount3", "-uz", mnt], check=False)
    # The test's rclone daemons (one per --transfers setting) end with it.
    for sock in base.glob("m/rcd-*/rc.sock"):
        with contextlib.suppress(Exception):
            node_rc.rc(str(sock), "core/quit", timeout=5)
    shutil.rmtree(base, ignore_errors=True)


def bash(cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()}
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def mounted(path: Path) -> bool:
    return any(
        line.split()[1] == str(path) for line in Path("/proc/self/mounts").read_text().splitlines()
    )


class Mount(NamedTuple):
    storage: Storage
    dst: Path
    cmd: str


def mount_bucket(
    url: str,
    dst_name: str,
    store_config: SkycoreConfig,
    host_env: RcloneEnv,
    mode: str = "MOUNT_CACHED",
    options: MountOptions | None = None,
) -> Mount:
    """``url`` checked, then mounted in ``mode`` (with ``options``) at ``dst_name`` beside the
    test's mounts folder; asserts the mount command succeeded."""
    storage = Storage.from_spec(name=None, source=url, store=None, mode=mode)
    if options is not None:
        storage.mount_options = options
    storage.check(store_config)
    dst = Path(host_env.mounts_base).parent / dst_name
    cmd = storage.mount_command(str(dst), store_config, env=host_env)
    r = bash(cmd)
    assert r.returncode == 0, r.stderr
    return Mount(storage, dst, cmd)


def test_cached_mount_uploads_in_creation_order_and_drains(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    storage, dst, cmd = mount_bucket(bucket, "data", store_config, host_env)
    assert mounted(dst)
    again = bash(cmd)  # idempotent
    assert again.returncode == 0 and "already mounted" in again.stdout
    conn = Path("/sys/fs/fuse/connections") / str(os.minor(os.stat(dst).st_dev))
    assert (conn / "max_background").read_text().strip() == "1"  # RELEASEs one at a time
    names = [f"ckpt-{i:02d}.bin" for i in range(20)]
    sizes = [1024, 8 << 20] + [(4 << 10) if i % 3 else (1 << 20) for i in range(18)]
    for n, size in zip(names, sizes, strict=True):  # back to back, a big file early
        (dst / n).write_bytes(os.urandom(size))
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    assert "drained" in drain.stdout
    dirs = mounting.mount_dirs(str(dst), host_env.mounts_base)
    stats = bash(f"{RCLONE} rc --unix-socket {dirs.rc_socket} vfs/stats").stdout
    assert '"uploadsQueued": 0' in stats and '"uploadsInProgress": 0' in stats
    bucket_name = storage.name
    writes = [
        e.key for e in store_emulator.events(bucket_name) if e.op != "delete" and e.key in names
    ]
    assert writes == names, f"upload order {writes}"
    st = make_store(store_emulator.store, bucket_name, store_config, storage.account)
    assert sorted(st.list_keys()) == names
    un = bash(mounting.unmount_command(str(dst), 60, host_env))
    assert un.returncode == 0, un.stderr
    assert not mounted(dst)


def test_reopened_file_ends_as_one_complete_object(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """The short write-back never uploads a torn file: a writer that closes, reopens within
    the write-back delay and keeps writing for longer than it ends with one complete object.
    rclone may upload the version of the last close while the file is open again (it does not
    cancel a queued upload on open); such an upload is that closed version, whole (rclone's
    reader fails an upload whose source changes under it), and the file goes up again after
    its final close."""
    storage, dst, _ = mount_bucket(bucket, "reopen", store_config, host_env)
    parts = [os.urandom(256 << 10) for _ in range(6)]
    with open(dst / "ckpt.bin", "wb") as f:
        f.write(parts[0])
    write_back = MountOptions().write_back_s
    bucket_name = storage.name
    with open(dst / "ckpt.bin", "ab") as f:  # reopened at once, written for 1.5 write-backs
        for part in parts[1:]:
            time.sleep(write_back * 1.5 / len(parts[1:]))
            f.write(part)
            f.flush()
        # what the store got before the final close (looked at while the file is open)
        while_open = [e for e in store_emulator.events(bucket_name) if e.key == "ckpt.bin"]
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    st = make_store(store_emulator.store, bucket_name, store_config, storage.account)
    assert st.list_keys() == ["ckpt.bin"]
    assert store_emulator.read_object(bucket_name, "ckpt.bin") == b"".join(parts)
    writes = [e for e in store_emulator.events(bucket_name) if e.key == "ckpt.bin"]
    assert writes, "no upload recorded"
    closed_sizes = {len(parts[0]), sum(map(len, parts))}
    assert all(e.size in closed_sizes for e in writes if e.size >= 0), writes
    # Before the final close, only the first closed version went up; after it, the whole.
    assert all(e.size == len(parts[0]) for e in while_open if e.size >= 0), while_open
    assert len(writes) > len(while_open), (while_open, writes)
    assert writes[-1].size in (-1, sum(map(len, parts))), writes
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


def test_one_daemon_serves_every_mount_and_quits_when_idle(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A MOUNT and a MOUNT_CACHED mount of the same node share one rclone process; the
    live-mount probe sees both; unmounting the last one stops the daemon."""
    dsts = []
    for mode in ("MOUNT", "MOUNT_CACHED"):
        dst = mount_bucket(bucket, mode.lower(), store_config, host_env, mode=mode).dst
        dsts.append(str(dst))
    sock = mounting.daemon_dirs(base=host_env.mounts_base).rc_socket
    assert sorted(Path(host_env.mounts_base).glob("rcd-*/rc.sock")) == [Path(sock)]
    pids = subprocess.run(
        ["pgrep", "-f", f"rclone rcd --config {host_env.config_file}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    assert len(pids) == 1, pids
    live = bash(mounting.live_command([*dsts, "/not/mounted"], host_env)).stdout.split("\n")
    assert sorted(ln for ln in live if ln) == sorted(f"SKYCORE_LIVE {d}" for d in dsts)
    drain = bash(mounting.drain_command(dsts, 60, host_env))
    assert drain.returncode == 0 and drain.stdout.count("drained") == 2, drain.stdout
    un = bash(mounting.unmount_command(dsts, 60, host_env))
    assert un.returncode == 0, un.stderr
    assert not any(mounted(Path(d)) for d in dsts)
    for _ in range(50):
        if subprocess.run(["kill", "-0", pids[0]], capture_output=True).returncode != 0:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the idle daemon did not quit")


def test_ordered_mount_fails_when_releases_cannot_be_serialized(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """Upload order is a promise: when the FUSE connection's max_background cannot be set
    (fusectl read-only here, in a private mount namespace) the ordered MOUNT_CACHED mount
    fails with a clear error and is undone, instead of mounting with a warning."""
    storage = Storage.from_spec(name=None, source=bucket, store=None, mode="MOUNT_CACHED")
    storage.check(store_config)
    dst = Path(host_env.mounts_base).parent / "ordered"
    script = storage.mount_command(str(dst), store_config, env=host_env)
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c",
         "mountpoint -q /sys/fs/fuse/connections || mount -t fusectl fusectl "
         "/sys/fs/fuse/connections; mount -o remount,bind,ro /sys/fs/fuse/connections && "
         'bash -c "$0"; rc=$?; '
         'grep -c " $1 " /proc/self/mounts || true; exit $rc', script, str(dst)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cannot serialize FUSE releases" in r.stderr and "transfers > 1" in r.stderr
    assert r.stdout.strip().splitlines()[-1] == "0", "the failed mount was left mounted"


def test_plain_mount_writes_through_and_remounts_after_stale(
    store: str, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    storage, dst, cmd = mount_bucket(bucket, "plain", store_config, host_env, mode="MOUNT")
    (dst / "hello.txt").write_text("hi")  # MOUNT: the upload is done when close returns
    st = make_store(store, storage.name, store_config, storage.account)
    assert st.list_keys() == ["hello.txt"]
    # kill rclone: the mount goes stale; the mount script recovers it
    sock = mounting.mount_dirs(str(dst), host_env.mounts_base).rc_socket
    pid = bash(f"{RCLONE} rc --unix-socket {sock} core/pid")
    assert pid.returncode == 0
    os.kill(int(pid.stdout.split(":")[1].strip(" }\n")), 9)
    time.sleep(0.5)
    r = bash(cmd)
    assert r.returncode == 0, r.stderr
    assert "stale mount" in r.stderr
    assert (dst / "hello.txt").read_text() == "hi"
    assert bash(mounting.unmount_command(str(dst), 30, host_env)).returncode == 0


class Remounted(NamedTuple):
    storage: Storage
    dst: Path
    payloads: dict[str, bytes]  # in creation order


def remount_after_rclone_died(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> Remounted:
    """An ordered mount whose rclone daemon is killed with three closed files pending (in
    creation order b-first, a-second, c-third: not name order), mounted again and drained."""
    pending = MountOptions(write_back_s=120)  # still pending when rclone dies
    storage, dst, _ = mount_bucket(bucket, "crash", store_config, host_env, options=pending)
    names = ["b-first.bin", "a-second.bin", "c-third.bin"]  # creation order is not name order
    payloads = {n: os.urandom((1 << 20) + i) for i, n in enumerate(names)}
    for n in names:
        (dst / n).write_bytes(payloads[n])
    sock = mounting.mount_dirs(
        str(dst), host_env.mounts_base, StorageMode.MOUNT_CACHED, storage.mount_options
    ).rc_socket
    fs = node_rc.served(host_env.mounts_base)[0][str(dst)][1]
    deadline = time.monotonic() + 10
    while node_rc.rc(sock, "vfs/stats", {"fs": fs})["diskCache"]["uploadsQueued"] < len(names):
        assert time.monotonic() < deadline, "the closed files were never queued for upload"
        time.sleep(0.05)
    assert not [e for e in store_emulator.events(storage.name) if e.key in names]
    os.kill(int(node_rc.rc(sock, "core/pid")["pid"]), 9)
    deadline = time.monotonic() + 10
    while node_rc.answers(sock):
        assert time.monotonic() < deadline, "rclone did not die"
        time.sleep(0.05)
    with pytest.raises(OSError) as dead:
        os.stat(dst / names[0])
    assert dead.value.errno == errno.ENOTCONN
    storage.mount_options = MountOptions()  # the next mount: today's write-back
    r = bash(storage.mount_command(str(dst), store_config, env=host_env))
    assert r.returncode == 0, r.stderr
    assert "stale mount" in r.stderr
    drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
    assert drain.returncode == 0, drain.stderr
    return Remounted(storage, dst, payloads)


def test_files_pending_when_rclone_dies_are_uploaded_by_the_next_mount(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """Nothing written is lost when a node's rclone daemon dies with uploads pending: the
    closed files stay in the daemon's cache folder, the dead mount fails at once (ENOTCONN,
    never a hang), and the next mount of the same destination (what a relaunch does with a
    stale mount) uploads every one of them whole."""
    storage, dst, payloads = remount_after_rclone_died(
        store_emulator, store_config, host_env, bucket
    )
    for n, payload in payloads.items():
        assert store_emulator.read_object(storage.name, n) == payload, n
        assert (dst / n).read_bytes() == payload, n
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


class OrderNotKept(AssertionError):
    """The store showed a file before one created before it."""


def test_files_a_dead_daemon_left_go_up_in_creation_order(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """The order promise across a daemon's death: the files it left pending (killed with
    SIGKILL) reach the store in creation order, not in the name order in which the next
    daemon finds them in its cache folder (the keepers' close-order journal on the node's
    disk)."""
    storage, dst, payloads = remount_after_rclone_died(
        store_emulator, store_config, host_env, bucket
    )
    try:
        events = [e for e in store_emulator.events(storage.name) if e.key in payloads]
        assert_visible_prefix(events, list(payloads), error=OrderNotKept)
    finally:
        bash(mounting.unmount_command(str(dst), 60, host_env))


FAULT_KINDS = ("deny", "outage", "errors")
FAULT_GUARD_S = 120.0  # the faults end by themselves only if the test hangs (it clears them)
WRITE_S = 1.0  # hang guard: 5 small files created, written, closed: ~0.01 s measured


def test_cached_writer_never_waits_for_the_store(
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    host_env: RcloneEnv,
    unique_name: Callable[[str], str],
    record_property: Callable[[str, object], None],
) -> None:
    """In a MOUNT_CACHED mount, creating, writing and closing 5 files returns while the
    store refuses (403), holds (outage) or fails (503) every request, and the files reach
    the store whole and in creation order once it is back. The faults end once the writes
    have returned. (Before, with rclone's 10 s directory cache expired: no file could be
    created under a 403, and the writer waited out an outage, 8 s, or a 503 storm, 8.6-22.7
    s.)

    The directory cache is as cold as it gets: rclone lists a directory on demand only when
    its listing is older than the mount's DirCacheTime (vfs/dir.go ``_age``), which here is
    the mount's life (asserted on the live VFS). So a listing made a second ago and one made
    more than 10 s ago (cold for the old 10 s DirCacheTime) are the same state for rclone,
    and the test need not wait. The node's refresher lists each mount every second here:
    during the faults its listings fail (deny, errors) or are held (outage), and the
    writer never waits for them."""
    em = store_emulator
    buckets = {kind: unique_name(f"cw{kind[:3]}") for kind in FAULT_KINDS}
    mounts: dict[str, Path] = {}
    try:
        for kind, name in buckets.items():
            url = em.make_bucket(name, owner="user", public=False)
            refresh = MountOptions(refresh_s=1)
            mounts[kind] = mount_bucket(url, kind, store_config, host_env, options=refresh).dst
        served = node_rc.served(host_env.mounts_base)[0]
        for dst in mounts.values():
            sock, fs = served[str(dst)]
            kept_ns = node_rc.rc(sock, "vfs/stats", {"fs": fs})["opt"]["DirCacheTime"]
            assert kept_ns >= 365 * 24 * 3600 * 10**9, kept_ns  # never stale on its own
        faults = {k: em.add_fault(k, bucket=buckets[k], seconds=FAULT_GUARD_S) for k in FAULT_KINDS}
        # The refresher's listings now meet the faults: wait until one has failed (403).
        sock, denied_fs = served[str(mounts["deny"])]
        log = Path(sock).parent / "refresher.log"
        deadline = time.monotonic() + 4
        while f"refreshing {denied_fs}: failed" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the refresher did not try to list"
            time.sleep(0.05)
        names = ["e-first.bin", "c-second.bin", "a-third.bin", "d-fourth.bin", "b-fifth.bin"]
        payloads: dict[str, dict[str, bytes]] = {}
        took: dict[str, float] = {}
        for kind, dst in mounts.items():
            payloads[kind] = {n: os.urandom((64 << 10) + i) for i, n in enumerate(names)}
            started = time.monotonic()
            for n in names:  # creation order is not name order
                with open(dst / n, "wb") as f:
                    f.write(payloads[kind][n])
            took[kind] = time.monotonic() - started
        record_property("create_5_files_s", json.dumps({k: round(t, 3) for k, t in took.items()}))
        lasted = [fault_events.lasts(em.store, f) for f in faults.values()]
        assert all(lasted), "a fault ended before the writer returned"
        # A held writer would take the faults' guard time; a local write, hundredths.
        assert max(took.values()) <= WRITE_S, took
        # None of them got through while the faults lasted.
        for kind in FAULT_KINDS:
            assert not [e for e in em.events(buckets[kind]) if e.key in names], kind
        for fault in faults.values():
            em.clear_faults(fault_id=fault["id"])
        for kind, dst in mounts.items():
            drain = bash(mounting.drain_command(str(dst), 120, host_env), timeout=180)
            assert drain.returncode == 0, drain.stderr
            writes = [e for e in em.events(buckets[kind]) if e.op != "delete" and e.key in names]
            assert [e.key for e in writes] == names, (kind, writes)
            for n in names:
                assert em.read_object(buckets[kind], n) == payloads[kind][n], (kind, n)
                assert (dst / n).read_bytes() == payloads[kind][n], (kind, n)
            assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0
    finally:
        for name in buckets.values():
            em.clear_faults(bucket=name)
        for dst in mounts.values():
            if mounted(dst):
                bash(mounting.unmount_command(str(dst), 60, host_env))
        for name in buckets.values():
            with contextlib.suppress(Exception):
                em.delete_bucket(name)


def test_a_mount_registered_while_another_lists_keeps_its_order_keeper(
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    host_env: RcloneEnv,
    unique_name: Callable[[str], str],
) -> None:
    """Two ordered mounts of one daemon, A and B: B is mounted and registered with the
    refresher while A's mount-time listing is held in the store (an outage on A's GETs).
    When A's listing ends and A registers, B stays registered: a mount that drops from the
    registry has no order keeper, and its uploads would never go."""
    em = store_emulator
    names = {k: unique_name(f"rg{k}") for k in ("a", "b")}
    urls = {k: em.make_bucket(n, owner="user", public=False) for k, n in names.items()}
    dsts: list[Path] = []
    storage_a = Storage.from_spec(name=None, source=urls["a"], store=None, mode="MOUNT_CACHED")
    storage_a.check(store_config)  # its probe lists A: before the outage
    dst_a = Path(host_env.mounts_base).parent / "reg-a"
    dsts.append(dst_a)
    outage = em.add_fault("outage", bucket=names["a"], method="GET", seconds=FAULT_GUARD_S)
    pool = ThreadPoolExecutor(1)
    try:
        mount_a = pool.submit(bash, storage_a.mount_command(str(dst_a), store_config, env=host_env))
        fault_events.wait_hits(em.store, outage, 1, timeout=60)
        served = node_rc.served(host_env.mounts_base)[0]
        assert str(dst_a) in served, "A's listing was held before A was mounted"
        sock, fs_a = served[str(dst_a)]
        d = os.path.dirname(sock)
        dst_b = mount_bucket(urls["b"], "reg-b", store_config, host_env).dst
        dsts.append(dst_b)
        fs_b = node_rc.served(host_env.mounts_base)[0][str(dst_b)][1]
        assert fs_b in ordered_mounts(d), "B was not registered"
        assert not mount_a.done(), "A's mount did not wait for its listing"
        em.clear_faults(fault_id=outage["id"])
        assert mount_a.result(timeout=120).returncode == 0, mount_a.result().stderr
        assert set(ordered_mounts(d)) >= {fs_a, fs_b}, ordered_mounts(d)
        (dst_b / "kept.bin").write_bytes(b"b" * 1000)
        drain = bash(mounting.drain_command(str(dst_b), 60, host_env), timeout=120)
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert "no order keeper" not in drain.stdout + drain.stderr, drain.stderr
        assert em.read_object(names["b"], "kept.bin") == b"b" * 1000
    finally:
        em.clear_faults(bucket=names["a"])
        pool.shutdown(wait=True)
        for dst in dsts:
            if mounted(dst):
                bash(mounting.unmount_command(str(dst), 60, host_env))
        for name in names.values():
            with contextlib.suppress(Exception):
                em.delete_bucket(name)


def test_objects_others_add_show_up_after_a_refresh(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A MOUNT_CACHED mount keeps its listing, so an object another writer adds shows up
    only when the node's refresher lists the mount again: within the refresh period and one
    listing (here refresh_s=1; 12 s by default), never on its own."""
    refresh = MountOptions(refresh_s=1)
    storage, dst, _ = mount_bucket(bucket, "others", store_config, host_env, options=refresh)
    (dst / "mine.bin").write_bytes(b"m" * 1000)
    assert bash(mounting.drain_command(str(dst), 60, host_env)).returncode == 0
    store_emulator.write_object(storage.name, "theirs/added.txt", b"theirs")
    added = time.monotonic()
    while "theirs" not in os.listdir(dst):  # in about 2 s; 30 s is a hang guard
        assert time.monotonic() - added < 30, "another writer's object never showed up"
        time.sleep(0.05)
    assert (dst / "theirs" / "added.txt").read_bytes() == b"theirs"
    assert (dst / "mine.bin").read_bytes() == b"m" * 1000  # still there, whole
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


def test_public_bucket_of_other_account_mounts_read_only(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv
) -> None:
    objects = {"data/a.txt": b"public"}
    with emulator_bucket(store_emulator, "pub", owner="other", public=True, objects=objects) as (
        _name,
        url,
    ):
        storage = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT_CACHED")
        assert storage.check(store_config).read_only
        dst = Path(host_env.mounts_base).parent / "pub"
        r = bash(storage.mount_command(str(dst), store_config, env=host_env))
        assert r.returncode == 0, r.stderr
        assert (dst / "data" / "a.txt").read_text() == "public"
        t0 = time.monotonic()
        with pytest.raises(OSError) as info:
            (dst / "new.txt").write_text("x")
        assert info.value.errno == errno.EROFS and time.monotonic() - t0 < 5
        assert bash(mounting.unmount_command(str(dst), 30, host_env)).returncode == 0
        # COPY of the same public bucket
        copy_dst = Path(host_env.mounts_base).parent / "copy"
        c = Storage.from_spec(name=None, source=url + "/data", store=None, mode="COPY")
        c.check(store_config)
        r = bash(c.copy_command(str(copy_dst), store_config, env=host_env))
        assert r.returncode == 0, r.stderr
        assert (copy_dst / "a.txt").read_text() == "public"


def test_drain_lets_uploads_waiting_for_the_write_back_go_at_once(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    """A drain does not wait out the write-back delay: files closed just before it are
    uploaded at once, in creation order (with a 20 s write-back, a drain given 10 s would
    time out otherwise)."""
    slow = MountOptions(write_back_s=20)
    storage, dst, _ = mount_bucket(bucket, "hurried", store_config, host_env, options=slow)
    names = ["b-first.bin", "a-second.bin", "c-third.bin"]  # creation order is not name order
    for n in names:
        (dst / n).write_bytes(n.encode() * 1000)
    started = time.monotonic()
    drain = bash(mounting.drain_command(str(dst), 10, host_env), timeout=60)
    assert drain.returncode == 0, drain.stderr
    assert time.monotonic() - started < 10
    writes = [e.key for e in store_emulator.events(storage.name) if e.key in names]
    assert list(dict.fromkeys(writes)) == names, writes
    assert bash(mounting.unmount_command(str(dst), 60, host_env)).returncode == 0


def test_unmount_refuses_with_uploads_pending(
    store_config: SkycoreConfig, host_env: RcloneEnv, bucket: str
) -> None:
    held = MountOptions(write_back_s=120)  # hold uploads back
    dst = mount_bucket(bucket, "pending", store_config, host_env, options=held).dst
    (dst / "late.bin").write_bytes(b"x" * 1000)
    r = bash(mounting.unmount_command(str(dst), 2, host_env))
    assert r.returncode == 1
    assert "uploads are still pending" in r.stderr and "1 queued" in r.stderr
    assert mounted(dst)
    drain = bash(mounting.drain_command(str(dst), 1, host_env))
    assert drain.returncode == 1 and "timed out draining" in drain.stderr


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
