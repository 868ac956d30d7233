"""The node image: built by debootstrap + docker import, carries what a VM would."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from harness import nodes

pytestmark = pytest.mark.cloud


def run_in_node(
    host: str, image: str, script: str, timeout: int = 60
) -> subprocess.CompletedProcess:
    name = f"skycore-test-{uuid.uuid4().hex[:8]}"
    return subprocess.run(
        [
            "docker",
            "-H",
            host,
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "host",
            "--device",
            "/dev/fuse",
            "--cap-add",
            "SYS_ADMIN",
            "--security-opt",
            "apparmor=unconfined",
            image,
            "bash",
            "-lc",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_image_tag_follows_the_recipe(node_engine):
    _host, image = node_engine
    assert image == nodes.image_tag()
    assert image.startswith("skycore-node:")


def test_node_has_the_runtime(node_engine):
    host, image = node_engine
    result = run_in_node(host, image, "rclone version; fusermount3 -V; python3 -V; rsync --version")
    assert result.returncode == 0, result.stderr
    assert "rclone v1.7" in result.stdout
    assert "fusermount3 version" in result.stdout
    assert "Python 3." in result.stdout
    assert "rsync  version" in result.stdout


def test_mirror_comes_from_apt_sources():
    assert nodes.debian_mirror().startswith(("http://", "https://"))


def test_second_ensure_is_a_cache_hit(node_engine):
    host, image = node_engine
    said: list[str] = []
    assert nodes.ensure_node_image(host, said.append) == image
    assert said == []  # nothing built, nothing imported
