"""``launch --dryrun`` checks ``resources.image_id`` as PROVISION would, without changing
anything: the real CLI on the harness's docker engine (images are never pulled)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import docker.errors
import pytest

from skycore import provision
from skycore.config import SkycoreConfig
from skycore.provision import ProvisionError
from skycore.provision import docker as dprov

SKYCORE = [sys.executable, "-m", "skycore.cli"]

Launch = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def dryrun(docker_config: SkycoreConfig, tmp_path: Path, cluster: str) -> Launch:
    """``dryrun(*flags)``: ``skycore launch task.yaml -c CLUSTER --dryrun FLAGS``."""
    task = tmp_path / "task.yaml"
    task.write_text("run: echo hi\n")

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SKYCORE, "launch", str(task), "-c", cluster, "--dryrun", *flags],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
            stdin=subprocess.DEVNULL,
        )

    return run


def error_of(result: subprocess.CompletedProcess[str]) -> str:
    """The one-paragraph error the CLI printed (after 'Error: ')."""
    out = result.stdout + result.stderr
    assert "Error: " in out, out
    message = out.split("Error: ", 1)[1].strip()
    assert "\n" not in message, f"not one paragraph: {message!r}"
    return message


def absent_image(config: SkycoreConfig, unique_name: Callable[[str], str]) -> str:
    """The tag of an image that is not on the engine."""
    tag = f"{unique_name('skycore-absent')}:22.04"
    with pytest.raises(docker.errors.ImageNotFound):
        dprov.client(config).images.get(tag)
    return tag


def test_dryrun_refuses_an_image_not_on_the_engine(
    dryrun: Launch,
    docker_config: SkycoreConfig,
    cluster: str,
    unique_name: Callable[[str], str],
) -> None:
    """An image the engine does not have is refused by the dry run (exit 2) with the
    images it could use instead; nothing is pulled or created, and PROVISION refuses it
    with the same paragraph (one check)."""
    image = absent_image(docker_config, unique_name)
    result = dryrun("--image-id", f"docker:{image}")
    assert result.returncode == 2, result.stdout + result.stderr
    message = error_of(result)
    assert message.startswith(
        f"resources.image_id (--image-id): the image '{image}' is not on the docker engine at "
        f"{docker_config.docker.host} (images are never pulled)."
    ), message
    node = docker_config.docker.image
    assert f"docker:{node} (the node image, docker.image in config.yaml)" in message
    assert f"'docker -H {docker_config.docker.host} images' lists them" in message
    assert "Plan" not in result.stdout
    with pytest.raises(docker.errors.ImageNotFound):
        dprov.client(docker_config).images.get(image)
    assert provision.query_instances("docker", cluster, docker_config) == {}
    with pytest.raises(ProvisionError) as info:
        provision.run_instances("docker", cluster, 1, f"docker:{image}", docker_config)
    assert str(info.value) == message
    assert provision.query_instances("docker", cluster, docker_config) == {}


def test_dryrun_refuses_an_image_id_that_is_not_docker(
    dryrun: Launch, docker_config: SkycoreConfig, cluster: str
) -> None:
    """A cloud image id (``ami-...``) is refused with the reason (the local provider runs
    Docker images only) and the configured node image as the example; PROVISION says the
    same."""
    result = dryrun("--image-id", "ami-0123456")
    assert result.returncode == 2, result.stdout + result.stderr
    message = error_of(result)
    node = docker_config.docker.image
    assert message.startswith(
        "resources.image_id (--image-id): 'ami-0123456' is not a Docker image; the local "
        "provider runs Docker images only. Give docker:IMAGE"
    ), message
    assert f"e.g. docker:{node}, the node image (docker.image in config.yaml" in message
    assert "skycore-node:latest" not in message
    with pytest.raises(ProvisionError) as info:
        provision.run_instances("docker", cluster, 1, "ami-0123456", docker_config)
    assert str(info.value) == message


@pytest.mark.parametrize("given", [False, True], ids=["default", "node-image"])
def test_dryrun_plans_with_an_image_on_the_engine(
    dryrun: Launch, docker_config: SkycoreConfig, cluster: str, given: bool
) -> None:
    """The default image, or the node image given as docker:IMAGE, plans (exit 0) and
    creates nothing."""
    flags = ["--image-id", f"docker:{docker_config.docker.image}"] if given else []
    result = dryrun(*flags)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Stages: PROVISION -> EXEC" in result.stdout
    assert provision.query_instances("docker", cluster, docker_config) == {}
