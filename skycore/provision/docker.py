"""The docker provider: each node is a container that behaves like a small VM.

A node is a container from the node image (``config.docker.image``) or from
``resources.image_id: docker:<local image>``, named ``skycore-<cluster>-<rank>`` and labelled
with its cluster and rank. It has its own hostname and its own disk (the container's
filesystem, kept across stop/start), FUSE (``/dev/fuse`` + SYS_ADMIN) and host networking.
Its IP is a loopback address 127.X.Y.(rank+1) derived from the cluster name: every 127/8
address reaches ``lo``, so nodes reach each other and the local cloud's emulators.
Images are never pulled: they must exist on the engine.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import shutil
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import docker.errors
import requests
from docker.models.containers import Container

from skycore.concurrency import parallel
from skycore.config import SkycoreConfig, load_config
from skycore.provision import ClusterInfo, NodeInfo, NodeStatus, ProvisionError, node_runtime
from skycore.runner import CommandRunner, DockerCommandRunner

PROVIDER = "docker"
LABEL_CLUSTER = "skycore.cluster"
LABEL_RANK = "skycore.rank"
LABEL_IP = "skycore.ip"
LABEL_HOSTNAME = "skycore.hostname"
STOP_TIMEOUT_S = 2

_clients: dict[str, docker.DockerClient] = {}
_clients_lock = threading.Lock()


F = TypeVar("F", bound=Callable[..., Any])


def engine_errors(fn: F) -> F:
    """Turn a failing or unreachable engine into a ProvisionError (one clear paragraph)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ProvisionError:
            raise
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise ProvisionError(
                f"The docker engine failed during {fn.__name__}: {e}. Check it with "
                "'harness status' (or 'docker info'), then retry the command."
            ) from e

    return wrapper  # type: ignore[return-value]


def _config(config: SkycoreConfig | None) -> SkycoreConfig:
    return config if config is not None else load_config()


def client(config: SkycoreConfig | None = None) -> docker.DockerClient:
    """A docker SDK client for the configured engine (cached per host)."""
    host = _config(config).docker.host
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


def container_name(cluster_name: str, rank: int) -> str:
    """Name of the container of node ``rank``."""
    return f"skycore-{cluster_name}-{rank}"


def node_ip(cluster_name: str, rank: int) -> str:
    """The loopback address of node ``rank``: 127.X.Y.(rank+1), X and Y from the name."""
    digest = hashlib.sha256(cluster_name.encode()).digest()
    return f"127.{1 + digest[0] % 254}.{digest[1]}.{rank + 1}"


def resolve_image(image_id: str | None, config: SkycoreConfig) -> str:
    """The local image for nodes: ``docker:<image>`` from the task, else the configured one."""
    if image_id:
        if not image_id.startswith("docker:"):
            raise ProvisionError(
                f"resources.image_id: {image_id!r} is not a container image. Use "
                "'docker:<local image>' (e.g. docker:skycore-node:latest) or leave it out."
            )
        return image_id[len("docker:") :]
    return config.docker.image


def _containers(cluster_name: str, config: SkycoreConfig | None) -> dict[int, Container]:
    """The cluster's containers by rank, from ONE engine call (the listing carries their
    state and labels: no inspection per node, so a node removed meanwhile is simply absent,
    never a 404)."""
    listed = client(config).containers.list(
        all=True, sparse=True, filters={"label": f"{LABEL_CLUSTER}={cluster_name}"}
    )
    return {int(_labels(c)[LABEL_RANK]): c for c in listed}


def _labels(c: Container) -> dict[str, str]:
    """A container's labels, from a listing (sparse) or an inspection."""
    labels = c.attrs.get("Labels")
    if labels is None:
        labels = c.attrs.get("Config", {}).get("Labels")
    return dict(labels or {})


def _status(c: Container) -> NodeStatus | None:
    state = c.attrs.get("State", c.status)
    if isinstance(state, dict):  # an inspection; a listing has the bare word
        state = state.get("Status", c.status)
    if state == "running":
        return NodeStatus.UP
    if state in ("created", "exited", "paused"):
        return NodeStatus.STOPPED
    return None  # dead / removing: as good as gone


def _hostname(cluster_name: str, rank: int) -> str:
    """The hostname node ``rank`` is created with."""
    return f"{cluster_name}-{rank}"[:63]


def _name(c: Container, fallback: str = "") -> str:
    """A container's name, from an inspection or a listing (sparse: ``Names``)."""
    names = c.attrs.get("Names") or []
    return c.name or (names[0].lstrip("/") if names else fallback or str(c.id)[:12])


def _node(cluster_name: str, rank: int, c: Container) -> NodeInfo:
    labels = _labels(c)
    name = _name(c, container_name(cluster_name, rank))
    hostname = c.attrs.get("Config", {}).get("Hostname") or labels.get(
        LABEL_HOSTNAME, _hostname(cluster_name, rank)
    )
    return NodeInfo(
        rank=rank,
        instance_id=c.id or "",
        name=name,
        hostname=hostname,
        ip=labels.get(LABEL_IP, node_ip(cluster_name, rank)),
        status=_status(c),
    )


def _info(cluster_name: str, containers: dict[int, Container]) -> ClusterInfo:
    nodes = [_node(cluster_name, r, containers[r]) for r in sorted(containers)]
    return ClusterInfo(cluster_name, PROVIDER, nodes)


def _create(cluster_name: str, rank: int, image: str, config: SkycoreConfig) -> Container:
    name = container_name(cluster_name, rank)
    ip = node_ip(cluster_name, rank)
    hostname = _hostname(cluster_name, rank)
    # create + start, never run(): the SDK's run() pulls a missing image.
    c = client(config).containers.create(
        image,
        command=["sleep", "infinity"],
        name=name,
        hostname=hostname,
        labels={
            LABEL_CLUSTER: cluster_name,
            LABEL_RANK: str(rank),
            LABEL_IP: ip,
            LABEL_HOSTNAME: hostname,
        },
        environment={"SKYCORE_NODE_IP": ip, "SKYCORE_NODE_RANK": str(rank)},
        network_mode="host",
        devices=["/dev/fuse:/dev/fuse:rwm"],
        cap_add=["SYS_ADMIN"],
        security_opt=["apparmor=unconfined"],
        init=True,
        stop_signal="SIGTERM",
        detach=True,
    )
    c.start()
    return c


def _exec(c: Container) -> Callable[[list[str]], tuple[int, str]]:
    """``argv`` -> (exit code, output) on container ``c``."""

    def run(argv: list[str]) -> tuple[int, str]:
        result = c.exec_run(argv, demux=False)
        return int(result.exit_code or 0), (result.output or b"").decode(errors="replace")

    return run


def _install_runtime(c: Container, image: str, name: str) -> None:
    """Bring skycore's runtime (rclone, fusermount3) into a node whose image lacks it;
    ProvisionError naming what cannot be installed (the node is removed then)."""
    try:
        node_runtime.install(image, name, _exec(c), c.put_archive)
    except ProvisionError:
        c.remove(force=True)
        raise


def _install_runtimes(created: dict[int, Container], image: str, cluster_name: str) -> None:
    """``_install_runtime`` on every node just created from ``image``: one probe for them
    all (fresh containers of one image lack the same binaries), then, only if the image
    lacks something, the install on every node."""
    if not created:
        return
    first = min(created)
    if not node_runtime.missing(_exec(created[first])):
        return

    def install(rank: int) -> None:
        _install_runtime(created[rank], image, container_name(cluster_name, rank))

    parallel(install, sorted(created))


def _check_image(image: str, config: SkycoreConfig) -> None:
    try:
        client(config).images.get(image)
    except docker.errors.ImageNotFound as e:
        raise ProvisionError(
            f"The node image {image!r} is not on the docker engine at {config.docker.host} "
            "(images are never pulled). Build it with 'harness up', or set "
            "resources.image_id to 'docker:<an image listed by docker images>'."
        ) from e


@engine_errors
def run_instances(
    cluster_name: str,
    num_nodes: int,
    image_id: str | None = None,
    config: SkycoreConfig | None = None,
) -> ClusterInfo:
    """Create or resume the nodes 0..num_nodes-1 that are not running; leave the rest alone."""
    cfg = _config(config)
    image = resolve_image(image_id, cfg)
    existing = _containers(cluster_name, cfg)
    todo: list[tuple[int, Container | None]] = []
    for rank in range(num_nodes):
        c = existing.get(rank)
        if c is None or _status(c) is None or _status(c) is NodeStatus.STOPPED:
            todo.append((rank, c))
    if any(c is None or _status(c) is None for _, c in todo):
        _check_image(image, cfg)

    created: dict[int, Container] = {}

    def bring_up(item: tuple[int, Container | None]) -> None:
        rank, c = item
        try:
            if c is not None and _status(c) is None:
                c.remove(force=True)
                c = None
            if c is None:
                created[rank] = _create(cluster_name, rank, image, cfg)
            else:
                c.start()
        except docker.errors.APIError as e:
            raise ProvisionError(
                f"node {rank} ({container_name(cluster_name, rank)}) failed to start: "
                f"{e.explanation or e}"
            ) from e

    try:
        parallel(bring_up, todo)
    except BaseException:
        # The nodes that did come up still get their runtime (or are removed), also after
        # Ctrl-C or an engine that stopped answering: a node left UP without rclone would
        # pass every later health check. The first failure is the error.
        with contextlib.suppress(Exception):
            _install_runtimes(created, image, cluster_name)
        raise
    _install_runtimes(created, image, cluster_name)
    return get_cluster_info(cluster_name, cfg)


@engine_errors
def stop_instances(cluster_name: str, config: SkycoreConfig | None = None) -> None:
    """Stop every running node of the cluster (disks are kept)."""
    running = [c for c in _containers(cluster_name, config).values() if c.status == "running"]
    parallel(lambda c: c.stop(timeout=STOP_TIMEOUT_S), running)


@engine_errors
def start_instances(cluster_name: str, config: SkycoreConfig | None = None) -> ClusterInfo:
    """Resume every stopped node of the cluster."""
    stopped = [
        c for c in _containers(cluster_name, config).values() if _status(c) is NodeStatus.STOPPED
    ]

    def start(c: Container) -> None:
        try:
            c.start()
        except docker.errors.APIError as e:
            raise ProvisionError(f"node {_name(c)} failed to start: {e.explanation or e}") from e

    parallel(start, stopped)
    return get_cluster_info(cluster_name, config)


@engine_errors
def terminate_instances(cluster_name: str, config: SkycoreConfig | None = None) -> None:
    """Remove every node of the cluster with its disk."""

    def remove(c: Container) -> None:
        try:
            c.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            # A node being removed already (e.g. preempted this moment) is as good as gone.
            if e.status_code != 409 or "already in progress" not in str(e):
                raise

    parallel(remove, list(_containers(cluster_name, config).values()))


@engine_errors
def query_instances(
    cluster_name: str, config: SkycoreConfig | None = None
) -> dict[int, NodeStatus]:
    """UP or STOPPED for each node that exists, by rank; gone nodes are absent."""
    result: dict[int, NodeStatus] = {}
    for rank, c in _containers(cluster_name, config).items():
        status = _status(c)
        if status is not None:
            result[rank] = status
    return result


@engine_errors
def get_cluster_info(cluster_name: str, config: SkycoreConfig | None = None) -> ClusterInfo:
    """The existing nodes of the cluster, by rank."""
    return _info(cluster_name, _containers(cluster_name, config))


def get_command_runners(
    info: ClusterInfo, config: SkycoreConfig | None = None
) -> list[CommandRunner]:
    """A DockerCommandRunner per node, in rank order."""
    cfg = _config(config)
    docker_bin = shutil.which("docker") or "/usr/local/bin/docker"
    return [DockerCommandRunner(n.name, cfg.docker.host, docker_bin) for n in info.nodes]
