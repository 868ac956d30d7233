"""The docker provider: each node is a container that behaves like a small VM.

A node is a container from the node image (``config.docker.image``) or from
``resources.image_id: docker:<local image>``, named ``skycore-<cluster>-<rank>`` and labelled
with its cluster and rank. It has its own hostname and its own disk (the container's
filesystem, kept across stop/start), FUSE (``/dev/fuse`` + SYS_ADMIN) and host networking.
Its IP is a loopback address 127.X.Y.(rank+1) derived from the cluster name: every 127/8
address reaches ``lo``, so nodes reach each other and the local cloud's emulators.
Images are never pulled: they must exist on the engine.

``resources.disk_size`` gives a node a disk of its own for its mount caches (``disks``: a
loop-mounted ext4 image bound at ``/var/lib/skycore/mounts``, made with the node, kept
across stop/start, deleted with it); ``cpus`` and ``memory`` become the container's limits
(``limits``). A node that is gone (preempted) loses its disk: the provider deletes it the
next time it looks at the cluster.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable

import docker.errors
from docker.models.containers import Container
from docker.types import Mount

from skycore import node_images
from skycore.concurrency import parallel
from skycore.config import SkycoreConfig
from skycore.errors import UserError
from skycore.provision import (
    ClusterInfo,
    NodeResources,
    NodeStatus,
    ProvisionError,
    disks,
    docker_disks,
    limits,
    node_runtime,
)
from skycore.provision.docker_engine import (
    LABEL_CLUSTER,
    LABEL_DISK,
    LABEL_HOSTNAME,
    LABEL_IP,
    LABEL_RANK,
    PROVIDER,
    STOP_TIMEOUT_S,
    client,
    cluster_info,
    config_or_load,
    container_name,
    engine_errors,
    hostname_of,
    list_nodes,
    name_of,
    node_ip,
    status_of,
)
from skycore.runner import CommandRunner, DockerCommandRunner

__all__ = [
    "LABEL_CLUSTER",
    "LABEL_DISK",
    "LABEL_HOSTNAME",
    "LABEL_IP",
    "LABEL_RANK",
    "PROVIDER",
    "check_resources",
    "client",
    "container_name",
    "get_cluster_info",
    "get_command_runners",
    "node_ip",
    "query_instances",
    "release_disk",
    "resolve_image",
    "run_instances",
    "start_instances",
    "stop_instances",
    "terminate_instances",
]


def resolve_image(image_id: str | None, config: SkycoreConfig, on_engine: bool = False) -> str:
    """The local image for nodes: ``docker:<image>`` from the task, else the configured one;
    ProvisionError saying why and what to give instead if the provider cannot run it (with
    ``on_engine``, also when it is not on the engine). The check is
    ``skycore.node_images.usable_image``, the dry run's too."""
    try:
        return node_images.usable_image(image_id, config, on_engine=on_engine)
    except UserError as e:
        raise ProvisionError(e.message) from None


def _create(
    cluster_name: str, rank: int, image: str, config: SkycoreConfig, resources: NodeResources
) -> Container:
    name = container_name(cluster_name, rank)
    ip = node_ip(cluster_name, rank)
    hostname = hostname_of(cluster_name, rank)
    labels = {
        LABEL_CLUSTER: cluster_name,
        LABEL_RANK: str(rank),
        LABEL_IP: ip,
        LABEL_HOSTNAME: hostname,
    }
    disk = disks.disk_of(cluster_name, rank)
    disks.remove(disk)  # a vanished node's disk is never reused
    mounts = []
    if resources.disk_size_gib is not None:
        disks.create(disk, resources.disk_size_gib)
        labels[LABEL_DISK] = str(disk.root)
        mounts.append(Mount(disks.NODE_MOUNTS_BASE, str(disk.source), type="bind"))
    try:
        # create + start, never run(): the SDK's run() pulls a missing image.
        c = client(config).containers.create(
            image,
            command=["sleep", "infinity"],
            name=name,
            hostname=hostname,
            labels=labels,
            environment={"SKYCORE_NODE_IP": ip, "SKYCORE_NODE_RANK": str(rank)},
            network_mode="host",
            devices=["/dev/fuse:/dev/fuse:rwm"],
            cap_add=["SYS_ADMIN"],
            security_opt=["apparmor=unconfined"],
            mounts=mounts,
            init=True,
            stop_signal="SIGTERM",
            detach=True,
            **limits.container_limits(resources),
        )
    except BaseException:
        disks.remove(disk)
        raise
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
        docker_disks.remove(c)
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


@engine_errors
def run_instances(
    cluster_name: str,
    num_nodes: int,
    image_id: str | None = None,
    config: SkycoreConfig | None = None,
    resources: NodeResources | None = None,
) -> ClusterInfo:
    """Create or resume the nodes 0..num_nodes-1 that are not running; leave the rest alone.
    The nodes it creates get ``resources``; a resumed node keeps what it was made with."""
    cfg = config_or_load(config)
    resources = resources or NodeResources()
    image = resolve_image(image_id, cfg)  # a wrong kind of id is refused before any engine call
    existing = list_nodes(cluster_name, cfg)
    todo: list[tuple[int, Container | None]] = []
    for rank in range(num_nodes):
        c = existing.get(rank)
        if c is None or status_of(c) is None or status_of(c) is NodeStatus.STOPPED:
            todo.append((rank, c))
    new = sum(1 for _, c in todo if c is None or status_of(c) is None)
    if new:
        limits.check(resources, new, cfg)
        resolve_image(image_id, cfg, on_engine=True)
    with contextlib.ExitStack() as stack:
        if resources.disk_size_gib is not None or docker_disks.in_use(cluster_name, existing):
            stack.enter_context(disks.cluster_lock(cluster_name))
            docker_disks.reap_held(cluster_name, set(existing))
        _bring_up(cluster_name, todo, image, cfg, resources)
    return get_cluster_info(cluster_name, cfg)


def _bring_up(
    cluster_name: str,
    todo: list[tuple[int, Container | None]],
    image: str,
    cfg: SkycoreConfig,
    resources: NodeResources,
) -> None:
    """Create (with a fresh disk) or resume each node of ``todo``, then install the runtime
    where it is missing."""
    created: dict[int, Container] = {}

    def bring_up(item: tuple[int, Container | None]) -> None:
        rank, c = item
        try:
            if c is not None and status_of(c) is None:
                docker_disks.remove(c)
                c = None
            if c is None:
                created[rank] = _create(cluster_name, rank, image, cfg, resources)
            else:
                docker_disks.start(c)
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


@engine_errors
def check_resources(
    resources: NodeResources, num_nodes: int, config: SkycoreConfig | None = None
) -> None:
    """ProvisionError naming the field, this machine's figure and the fix when ``num_nodes``
    nodes of ``resources`` do not fit on this machine."""
    limits.check(resources, num_nodes, config)


@engine_errors
def stop_instances(cluster_name: str, config: SkycoreConfig | None = None) -> None:
    """Stop every running node of the cluster (disks are kept, unmounted from the host)."""
    containers = list_nodes(cluster_name, config)
    running = [c for c in containers.values() if c.status == "running"]
    parallel(lambda c: c.stop(timeout=STOP_TIMEOUT_S), running)
    if docker_disks.in_use(cluster_name, containers):
        docker_disks.unmount_stopped(cluster_name, config)


@engine_errors
def start_instances(cluster_name: str, config: SkycoreConfig | None = None) -> ClusterInfo:
    """Resume every stopped node of the cluster (its disk mounted again first)."""
    containers = list_nodes(cluster_name, config)
    stopped = [c for c in containers.values() if status_of(c) is NodeStatus.STOPPED]

    def start(c: Container) -> None:
        try:
            docker_disks.start(c)
        except docker.errors.APIError as e:
            raise ProvisionError(f"node {name_of(c)} failed to start: {e.explanation or e}") from e

    with contextlib.ExitStack() as stack:
        if docker_disks.in_use(cluster_name, containers):
            stack.enter_context(disks.cluster_lock(cluster_name))
            docker_disks.reap_held(cluster_name, set(containers))
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

    containers = list_nodes(cluster_name, config)
    parallel(remove, list(containers.values()))
    if docker_disks.in_use(cluster_name, containers):
        docker_disks.remove_all(cluster_name, list(containers.values()), config)


@engine_errors
def query_instances(
    cluster_name: str, config: SkycoreConfig | None = None
) -> dict[int, NodeStatus]:
    """UP or STOPPED for each node that exists, by rank; gone nodes are absent. The disks
    of nodes that are gone are deleted on the way."""
    containers = list_nodes(cluster_name, config)
    if set(disks.cluster_disks(cluster_name)) - set(containers):
        docker_disks.reap(cluster_name, config, wait=False)
    result: dict[int, NodeStatus] = {}
    for rank, c in containers.items():
        status = status_of(c)
        if status is not None:
            result[rank] = status
    return result


@engine_errors
def get_cluster_info(cluster_name: str, config: SkycoreConfig | None = None) -> ClusterInfo:
    """The existing nodes of the cluster, by rank."""
    return cluster_info(cluster_name, list_nodes(cluster_name, config))


def get_command_runners(
    info: ClusterInfo, config: SkycoreConfig | None = None
) -> list[CommandRunner]:
    """A DockerCommandRunner per node, in rank order."""
    cfg = config_or_load(config)
    docker_bin = shutil.which("docker") or "/usr/local/bin/docker"
    return [DockerCommandRunner(n.name, cfg.docker.host, docker_bin) for n in info.nodes]


@engine_errors
def release_disk(cluster_name: str, rank: int, config: SkycoreConfig | None = None) -> None:
    """Delete the disk of node ``rank`` if that node is gone (what a preemption takes)."""
    docker_disks.release(cluster_name, rank, config)
