"""Plain helpers of the docker provisioner's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from skycore import provision
from skycore.config import SkycoreConfig
from skycore.provision import NodeResources, NodeStatus, ProvisionError
from skycore.provision import docker as dprov


@contextmanager
def node_1_blocked(
    cluster: str, config: SkycoreConfig, resources: NodeResources | None = None
) -> Iterator[None]:
    """A container holding node 1's name while a 2-node launch of ``cluster`` runs: the
    launch fails naming node 1 and leaves node 0 up; the container is removed on exit."""
    blocker = dprov.client(config).containers.create(
        config.docker.image, ["true"], name=dprov.container_name(cluster, 1)
    )
    try:
        with pytest.raises(ProvisionError, match="node 1"):
            provision.run_instances("docker", cluster, 2, None, config, resources)
        assert provision.query_instances("docker", cluster, config) == {0: NodeStatus.UP}
        yield
    finally:
        blocker.remove(force=True)
