"""Plain helpers of the host-side FUSE mount tests (their ``host_env`` fixture is in
conftest.py here): a shell, the mount table, and a bucket mounted as a node mounts it."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from harness.emulators.fleet import RunningEmulator
from skycore.config import SkycoreConfig
from skycore.storage import Storage, mounting
from skycore.storage.mounting import MountOptions, RcloneEnv
from tests.integration.helpers import REPO

RCLONE = REPO / ".venv" / "bin" / "rclone"


def bash(cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``cmd`` run by bash, its output captured."""
    env = {k: v for k, v in os.environ.items()}
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point now."""
    return any(
        line.split()[1] == str(path) for line in Path("/proc/self/mounts").read_text().splitlines()
    )


def unmount_and_delete(
    em: RunningEmulator, host_env: RcloneEnv, dsts: Iterable[Path], buckets: Iterable[str]
) -> None:
    """A test's cleanup: each of ``dsts`` still mounted is unmounted, then each of
    ``buckets`` deleted (a bucket already gone or not made is no error)."""
    for dst in dsts:
        if mounted(dst):
            bash(mounting.unmount_command(str(dst), 60, host_env))
    for name in buckets:
        with contextlib.suppress(Exception):
            em.delete_bucket(name)


class Mount(NamedTuple):
    """A mounted bucket: its storage, mount point and mount command."""

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
