"""PROVISION's node work: start or resume the nodes and wait until every one is healthy."""

from __future__ import annotations

import time
from pathlib import Path

from skycore import logs, node, provision
from skycore.backend.handle import ClusterHandle
from skycore.concurrency import parallel
from skycore.config import SkycoreConfig
from skycore.errors import StageError
from skycore.provision import NodeResources, NodeStatus, ProvisionError
from skycore.runner import CommandRunner

HEALTH_TIMEOUT_S = 30.0


def node_problems(handle: ClusterHandle, expected_nodes: int) -> list[str]:
    """Why the cluster is not healthy ([] when every node is UP and passes the health check)."""
    return _node_problems(handle, expected_nodes)[0]


def _node_problems(handle: ClusterHandle, expected_nodes: int) -> tuple[list[str], bool]:
    """(problems, definitive): definitive when a node's runtime answered but the node itself
    is unfit (no FUSE, no SYS_ADMIN): waiting will not fix that."""
    statuses = provision.query_instances(handle.provider, handle.name, handle.config)
    problems = []
    for rank in range(expected_nodes):
        status = statuses.get(rank)
        if status is None:
            problems.append(f"node {rank} is gone")
        elif status is not NodeStatus.UP:
            problems.append(f"node {rank} is {status.value}")
    if problems:
        return problems, False

    def check(runner: CommandRunner) -> tuple[str | None, bool]:
        rc, out = runner.run_output(node.program("health.sh"), timeout=30)
        if rc == 0 and "skycore-node-ok" in out:
            for line in out.splitlines():  # the home comes with it: no exec of its own later
                if line.startswith("skycore-home "):
                    runner.remember_home(line.split(" ", 1)[1].strip())
            return None, False
        lines = [ln for ln in out.strip().splitlines() if ln != "skycore-health-start"]
        last = lines[-1] if lines else "no output"
        ran = "skycore-health-start" in out
        what = "failed the health check (FUSE or SYS_ADMIN missing)" if ran else "did not answer"
        return f"{runner.node_name} {what} (exit {rc}: {last})", ran

    results = parallel(check, handle.runners[:expected_nodes])
    return [p for p, _ in results if p], any(d for p, d in results if p)


def wait_healthy(handle: ClusterHandle, expected_nodes: int, log_path: Path) -> None:
    """Poll the health check until every node passes; StageError after HEALTH_TIMEOUT_S."""
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while True:
        problems, definitive = _node_problems(handle, expected_nodes)
        if not problems:
            logs.append(log_path, f"health check passed on {expected_nodes} node(s)")
            return
        logs.append(log_path, "health check: " + "; ".join(problems))
        if definitive or time.monotonic() > deadline:
            raise StageError(
                "Nodes did not become healthy: " + "; ".join(problems), log_path=log_path
            )
        time.sleep(0.3)


def start_nodes(
    name: str,
    provider: str,
    num_nodes: int,
    image_id: str | None,
    config: SkycoreConfig,
    log_path: Path,
    resources: NodeResources | None = None,
) -> ClusterHandle:
    """Create or resume the nodes (not yet checked for health), the new ones with
    ``resources``; StageError if the provider fails, its ``reason`` the line a caller records
    for the cluster."""
    resources = resources or NodeResources()
    try:
        info = provision.run_instances(provider, name, num_nodes, image_id, config, resources)
    except ProvisionError as e:
        msg = f"provisioning failed: {e}"
        logs.append(log_path, msg)
        raise StageError(str(e), log_path=log_path, reason=msg) from None
    each = resources.describe()
    for n in info.nodes:
        logs.append(
            log_path,
            f"node {n.rank}: {n.name} hostname={n.hostname} ip={n.ip}"
            + (f" ({each})" if each else ""),
        )
    runners = provision.get_command_runners(provider, info, config)
    return ClusterHandle(name, provider, info, runners, config)
