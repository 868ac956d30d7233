"""The node image: built by mmdebstrap + docker import, carries what a VM would."""

from __future__ import annotations

import re
import subprocess
import uuid

import docker

from harness.cloud import nodes


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


def test_image_tag_follows_the_recipe(node_engine, tmp_path, monkeypatch):
    """The tag names the recipe: the engine runs the image of today's recipe, and changing
    any part of the recipe (or the rclone copied in) gives another tag, so a stale image is
    never reused."""
    host, image = node_engine
    rclone = nodes.rclone_binary()
    tag = nodes.image_tag(rclone)
    assert re.fullmatch(r"skycore-node:[0-9a-f]{12}", tag), tag
    assert image == tag
    client = docker.DockerClient(base_url=host, version="auto")
    try:
        assert tag in client.images.get(image).tags
    finally:
        client.close()

    changes = {
        "RECIPE_VERSION": nodes.RECIPE_VERSION + 1,
        "SUITE": "trixie",
        "PACKAGES": (*nodes.PACKAGES, "curl"),
        "POST_BUILD": nodes.POST_BUILD + "touch etc/changed\n",
    }
    tags = set()
    for name, value in changes.items():
        with monkeypatch.context() as m:
            m.setattr(nodes, name, value)
            tags.add(nodes.image_tag(rclone))
    other_rclone = tmp_path / "rclone"
    other_rclone.write_bytes(rclone.read_bytes() + b"\0")
    tags.add(nodes.image_tag(other_rclone))
    assert tag not in tags and len(tags) == len(changes) + 1, tags
    # What does not change the image does not change the tag: the order packages are listed.
    with monkeypatch.context() as m:
        m.setattr(nodes, "PACKAGES", tuple(reversed(nodes.PACKAGES)))
        assert nodes.image_tag(rclone) == tag


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
