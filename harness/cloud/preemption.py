"""Spot preemptions of the local cloud's nodes: ``preempt`` and ``harness preempt CLUSTER``."""

from __future__ import annotations

import time
from dataclasses import dataclass

import click
import docker.errors

from harness.cloud.chaos import ChaosError
from skycore import state
from skycore.config import SkycoreConfig, load_config
from skycore.provision import docker as docker_provider


@dataclass(frozen=True)
class Preemption:
    """One preempted node: which, when its removal was issued and when it was done
    (wall clock, seconds)."""

    cluster: str
    rank: int
    container: str
    issued_at: float
    at: float


def nodes(cluster: str, config: SkycoreConfig | None = None) -> dict[int, str]:
    """The existing nodes of ``cluster`` on the engine: rank -> container name."""
    cfg = config or load_config()
    found = docker_provider.client(cfg).containers.list(
        all=True, filters={"label": f"{docker_provider.LABEL_CLUSTER}={cluster}"}
    )
    return {int(c.labels[docker_provider.LABEL_RANK]): c.name or "" for c in found}


def preempt(
    cluster: str, rank: int = 0, *, force: bool = False, config: SkycoreConfig | None = None
) -> Preemption:
    """Remove node ``rank`` of ``cluster`` abruptly: killed, container and disk gone.

    Refuses a cluster recorded (in this SKYCORE_HOME) as on-demand unless ``force``: only
    spot nodes are preempted. Raises ChaosError if the node does not exist.
    """
    cfg = config or load_config()
    record = state.get_cluster(cluster)
    if record is not None and not record.resources.get("use_spot") and not force:
        raise ChaosError(
            f"Cluster '{cluster}' runs on-demand nodes (resources.use_spot is false), which are "
            "never preempted. Launch it with --use-spot (managed jobs: 'skycore jobs launch "
            "--use-spot'), or pass --force to remove the node anyway."
        )
    found = docker_provider.client(cfg).containers.list(
        all=True, filters={"label": f"{docker_provider.LABEL_CLUSTER}={cluster}"}
    )
    by_rank = {int(c.labels[docker_provider.LABEL_RANK]): c for c in found}
    if rank not in by_rank:
        have = ", ".join(map(str, sorted(by_rank))) or "none"
        raise ChaosError(
            f"Cluster '{cluster}' has no node of rank {rank} on {cfg.docker.host} (ranks: "
            f"{have}). Check the name with 'skycore status' or 'skycore jobs queue'."
        )
    container = by_rank[rank]
    name = container.name or docker_provider.container_name(cluster, rank)
    issued = time.time()
    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass  # it vanished on its own meanwhile: preempted all the same
    except docker.errors.APIError as e:
        raise ChaosError(f"Removing node {name} failed: {e.explanation or e}.") from e
    docker_provider.release_disk(cluster, rank, cfg)  # a node's own disk goes with it
    return Preemption(cluster, rank, name, issued, time.time())


def wait_for_node(
    cluster: str, rank: int = 0, timeout: float = 120.0, config: SkycoreConfig | None = None
) -> str:
    """Wait until node ``rank`` of ``cluster`` exists; its container name."""
    deadline = time.monotonic() + timeout
    while True:
        found = nodes(cluster, config)
        if rank in found:
            return found[rank]
        if time.monotonic() > deadline:
            raise ChaosError(f"Cluster '{cluster}' has no node {rank} after {timeout:.0f} s.")
        time.sleep(0.2)


@click.command("preempt")
@click.argument("cluster")
@click.option("--rank", default=0, show_default=True, type=int, help="Rank of the node.")
@click.option("--force", is_flag=True, help="Remove the node even if it is on-demand.")
def preempt_command(cluster: str, rank: int, force: bool) -> None:
    """Preempt a spot node of CLUSTER: remove it abruptly with its disk (no drain)."""
    try:
        hit = preempt(cluster, rank, force=force)
    except ChaosError as e:
        raise click.ClickException(str(e)) from None
    click.echo(
        f"Preempted node {hit.rank} of cluster {hit.cluster} ({hit.container}) at "
        f"{time.strftime('%H:%M:%S', time.localtime(hit.at))}."
    )
