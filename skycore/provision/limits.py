"""What a docker node may ask for: ``resources.cpus``, ``memory`` and ``disk_size`` against
this machine (every node is a container on it), and the container limits they become."""

from __future__ import annotations

import os
from typing import Any

from skycore.config import SkycoreConfig, load_config
from skycore.provision import NodeResources, ProvisionError, disks

MIN_CPUS = 0.01
"""The smallest CPU share docker accepts."""
MIN_MEMORY_GIB = 6 / 1024
"""The smallest memory limit docker accepts (6 MiB)."""


def machine_cpus() -> int:
    """The CPUs of this machine."""
    return os.cpu_count() or 1


def machine_memory_gib() -> float:
    """The total memory of this machine, in GiB."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / disks.GIB


def _refuse(message: str) -> ProvisionError:
    return ProvisionError(" ".join(message.split()))


def check(resources: NodeResources, num_nodes: int, config: SkycoreConfig | None) -> None:
    """ProvisionError (one paragraph naming the field, this machine's figure and the fix)
    when ``num_nodes`` new nodes of ``resources`` do not fit on this machine (the config,
    read from its file when None and needed, says where the engine is)."""
    cpus, memory, disk = resources.cpus, resources.memory_gib, resources.disk_size_gib
    have_cpus = machine_cpus()
    if cpus is not None and not MIN_CPUS <= cpus <= have_cpus:
        raise _refuse(
            f"resources.cpus: {cpus:g} CPU(s) per node is not possible here: every node is a "
            f"container on this machine, which has {have_cpus} CPU(s), and a node needs at "
            f"least {MIN_CPUS}. Ask for {MIN_CPUS} to {have_cpus} (e.g. 'cpus: {have_cpus}'), "
            "or leave cpus out for no limit."
        )
    have_memory = machine_memory_gib()
    if memory is not None and not MIN_MEMORY_GIB <= memory <= have_memory:
        raise _refuse(
            f"resources.memory: {memory:g} GiB per node is not possible here: every node is a "
            f"container on this machine, which has {have_memory:.1f} GiB of memory, and a "
            f"node needs at least 6 MiB. Ask for at most {int(have_memory)} (GiB), or leave "
            "memory out for no limit."
        )
    if disk is None:
        return
    problem = disks.tools_problem() or _engine_problem(config or load_config())
    if problem:
        raise _refuse(
            f"resources.disk_size: {disk} GiB disks cannot be made here: {problem}. Fix that, "
            "or leave disk_size out (the mount caches then use the node's own filesystem)."
        )
    if disk < 1:
        raise _refuse(
            f"resources.disk_size: {disk} GiB is too small. Ask for at least 1 (GiB), or "
            "leave disk_size out."
        )
    free, where = disks.free_bytes()
    if disk * num_nodes * disks.GIB > free:
        most = free // disks.GIB // max(num_nodes, 1)
        ask = f"Ask for 1 to {most} GiB per node, free" if most >= 1 else "Free"
        raise _refuse(
            f"resources.disk_size: {num_nodes} node(s) x {disk} GiB is more than the "
            f"{free / disks.GIB:.1f} GiB free on this machine where node disks live ({where}). "
            f"{ask} some space there, or leave disk_size out."
        )


def _engine_problem(config: SkycoreConfig) -> str | None:
    host = config.docker.host
    if host.startswith("unix://") or host.startswith("/"):
        return None
    return (
        f"the docker engine ({host}, docker.host in config.yaml) is not on this machine, "
        "and a node's disk is a folder of this machine bound into it"
    )


def container_limits(resources: NodeResources) -> dict[str, Any]:
    """The ``containers.create`` arguments that give a node its CPU and memory limits."""
    limits: dict[str, Any] = {}
    if resources.cpus is not None:
        limits["nano_cpus"] = round(resources.cpus * 1e9)
    if resources.memory_gib is not None:
        limits["mem_limit"] = round(resources.memory_gib * disks.GIB)
    return limits
