"""skycore's runtime on a node whose image lacks it: the real probe and the real archive, on a
stand-in node (a folder whose bin/ is the node's PATH, and a root the archive unpacks into)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from skycore.provision import ProvisionError, node_runtime


class StandInNode:
    """A node with only the tools linked into ``bin`` on its PATH."""

    def __init__(self, root: Path, tools: list[str]) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for tool in tools:
            found = shutil.which(tool)
            assert found, tool
            os.symlink(found, self.bin / tool)
        self.local = root / node_runtime.RUNTIME_DIR.lstrip("/")

    def run(self, argv: list[str]) -> tuple[int, str]:
        path = f"{self.local}:{self.bin}"
        r = subprocess.run(
            [shutil.which(argv[0]) or argv[0], *argv[1:]],
            env={"PATH": path},
            capture_output=True,
            text=True,
            check=False,
        )
        return r.returncode, r.stdout + r.stderr

    def put_archive(self, path: str, data: bytes) -> bool:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(self.root / path.lstrip("/"), filter="fully_trusted")
        return True


EVERYTHING_BUT_RUNTIME = list(node_runtime.REQUIRED)


def test_rclone_and_fusermount3_come_from_the_host(tmp_path: Path) -> None:
    node = StandInNode(tmp_path / "node", EVERYTHING_BUT_RUNTIME)
    assert set(node_runtime.missing(node.run)) == {"rclone", "fusermount3"}
    installed = node_runtime.install("img:1", "n0", node.run, node.put_archive)
    assert set(installed) == {"rclone", "fusermount3"}
    assert node_runtime.missing(node.run) == []
    assert os.access(node.local / "rclone", os.X_OK)
    version = subprocess.run([str(node.local / "rclone"), "version"], capture_output=True)
    assert version.returncode == 0 and b"rclone v" in version.stdout
    assert node_runtime.install("img:1", "n0", node.run, node.put_archive) == []  # idempotent


def test_what_cannot_be_installed_is_named_at_provision(tmp_path: Path) -> None:
    lacking = {"python3", "rsync"}
    node = StandInNode(tmp_path / "node", [t for t in EVERYTHING_BUT_RUNTIME if t not in lacking])
    with pytest.raises(ProvisionError) as e:
        node_runtime.install("docker:someimage", "n0", node.run, node.put_archive)
    msg = str(e.value)
    assert "'docker:someimage'" in msg and "python3" in msg and "rsync" in msg
    assert "apt-get install python3 rsync" in msg
    assert not (node.local / "rclone").exists()  # nothing half-installed
