"""Fixtures of the storage tests: ``host_env``, rclone set up on the host as on a node."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from skycore.config import SkycoreConfig
from skycore.node.mountd import rc as node_rc
from skycore.storage import mounting
from skycore.storage.mounting import RcloneEnv
from tests.integration.skycore.storage.mount_helpers import RCLONE


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
