"""The images nodes run from: the docker engine's client (one per host) and ``usable_image``,
the one check of ``resources.image_id`` that PROVISION and ``launch --dryrun`` share.

The local provider runs Docker images only, and never pulls one: an image must already be
on the engine (``config.docker.host``). The check only reads (``docker image inspect``).
"""

from __future__ import annotations

import threading

import docker
import docker.errors
import requests

from skycore.config import SkycoreConfig
from skycore.errors import ProvisionError, UserError

PREFIX = "docker:"
FIELD = "resources.image_id (--image-id)"
SHOWN_IMAGES = 5
"""At most this many of the engine's images are named in a refusal."""

_clients: dict[str, docker.DockerClient] = {}
_clients_lock = threading.Lock()


def client(config: SkycoreConfig) -> docker.DockerClient:
    """A docker SDK client for the configured engine (cached per host)."""
    host = config.docker.host
    with _clients_lock:
        if host not in _clients:
            try:
                _clients[host] = docker.DockerClient(base_url=host, version="auto", timeout=120)
            except docker.errors.DockerException as e:
                raise ProvisionError(
                    f"Cannot reach the docker engine at {host} (docker.host in config.yaml): "
                    f"{e}. Start it with 'harness up' or fix docker.host."
                ) from e
        return _clients[host]


def _engine_images(config: SkycoreConfig) -> list[str]:
    """The tags of the images on the engine, the configured node image first ([] when the
    engine does not answer)."""
    try:
        listed = client(config).images.list()
    except (ProvisionError, docker.errors.DockerException, requests.RequestException):
        return []
    tags = sorted(t for image in listed for t in image.tags)
    node = config.docker.image
    return [node, *(t for t in tags if t != node)] if node in tags else tags


def _listed(config: SkycoreConfig, tags: list[str]) -> str:
    """``tags`` as docker:IMAGE ids (the node image marked), and how to list them all."""
    shown = ", ".join(
        f"docker:{t}"
        + (" (the node image, docker.image in config.yaml)" if t == config.docker.image else "")
        for t in tags[:SHOWN_IMAGES]
    )
    more = f" and {len(tags) - SHOWN_IMAGES} more" if len(tags) > SHOWN_IMAGES else ""
    return f"{shown}{more} ('docker -H {config.docker.host} images' lists them)"


def usable_image(image_id: str | None, config: SkycoreConfig, *, on_engine: bool = True) -> str:
    """The local image nodes of ``image_id`` run from (the configured node image when None).

    UserError (one paragraph naming resources.image_id / --image-id, why and the images to
    use instead) when the local provider cannot run it: not ``docker:IMAGE``, or (with
    ``on_engine``) not on the engine. ProvisionError when the engine does not answer."""
    host, node = config.docker.host, config.docker.image
    if image_id and not image_id.startswith(PREFIX):
        raise UserError(
            f"{FIELD}: {image_id!r} is not a Docker image; the local provider runs Docker "
            f"images only. Give docker:IMAGE with an image on the docker engine ('docker -H "
            f"{host} images' lists them), e.g. docker:{node}, the node image (docker.image in "
            "config.yaml; 'harness status' shows it), or leave image_id out to use the node "
            "image."
        )
    image = image_id[len(PREFIX) :] if image_id else node
    if not on_engine:
        return image
    try:
        client(config).images.get(image)
    except docker.errors.ImageNotFound:
        tags = _engine_images(config)
        if image_id:
            fix = (
                f"Give one of the images on that engine: {_listed(config, tags)}; or leave "
                "image_id out to use the node image."
                if tags
                else f"Build the node image {node} with 'harness up', then leave image_id out."
            )
            what = f"{FIELD}: the image {image!r}"
        else:
            fix = "Build it with 'harness up' ('harness status' shows it)" + (
                f", or set {FIELD} to one of the images on that engine: {_listed(config, tags)}."
                if tags
                else "."
            )
            what = f"The node image {image!r} (docker.image in config.yaml)"
        raise UserError(
            f"{what} is not on the docker engine at {host} (images are never pulled). {fix}"
        ) from None
    except (docker.errors.DockerException, requests.RequestException) as e:
        raise ProvisionError(
            f"The docker engine at {host} failed to inspect the image {image!r}: {e}. Check it "
            "with 'harness status' (or 'docker info'), then retry the command."
        ) from e
    return image
