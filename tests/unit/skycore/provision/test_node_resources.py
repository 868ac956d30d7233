"""A node's own disk, CPUs and memory: the checks against this machine, the container
limits, the recorded resources and their comparison (no engine, no disk made)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skycore import backend, core, state
from skycore.config import DockerConfig, SkycoreConfig
from skycore.core import nodes
from skycore.core.clusters import check_node_resources
from skycore.errors import ClusterError
from skycore.provision import NodeResources, ProvisionError, disks, limits
from skycore.storage import mounting
from skycore.task import Task

LOCAL = SkycoreConfig(docker=DockerConfig(host="unix:///run/none.sock", image="x"))


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _refusal(resources: NodeResources, num_nodes: int = 1, config: SkycoreConfig = LOCAL) -> str:
    with pytest.raises(ProvisionError) as e:
        limits.check(resources, num_nodes, config)
    message = str(e.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_the_provider_keeps_the_nodes_mount_base() -> None:
    assert disks.NODE_MOUNTS_BASE == mounting.NODE_MOUNTS_BASE


def test_describe() -> None:
    assert NodeResources().describe() == ""
    assert NodeResources(1, 2, 0.5).describe() == "1 GiB disk, 2 CPUs, 0.5 GiB memory"
    assert NodeResources(cpus=1).describe() == "1 CPU"


def test_container_limits() -> None:
    assert limits.container_limits(NodeResources()) == {}
    assert limits.container_limits(NodeResources(cpus=0.5, memory_gib=0.25)) == {
        "nano_cpus": 500_000_000,
        "mem_limit": 256 << 20,
    }


def test_what_this_machine_has_fits() -> None:
    limits.check(NodeResources(None, limits.machine_cpus(), 0.5), 3, LOCAL)
    limits.check(NodeResources(cpus=0.01, memory_gib=0.01), 1, LOCAL)


def test_more_cpus_than_the_machine_is_refused() -> None:
    have = os.cpu_count()
    message = _refusal(NodeResources(cpus=have + 1))  # type: ignore[operator]
    assert message.startswith("resources.cpus:")
    assert f"has {have} CPU(s)" in message
    assert "or leave cpus out" in message
    assert "resources.cpus" in _refusal(NodeResources(cpus=0.001))


def test_more_memory_than_the_machine_is_refused() -> None:
    have = limits.machine_memory_gib()
    message = _refusal(NodeResources(memory_gib=have * 2))
    assert message.startswith("resources.memory:")
    assert f"{have:.1f} GiB of memory" in message
    assert "leave memory out" in message


def test_a_disk_larger_than_the_free_space_is_refused() -> None:
    if disks.tools_problem():
        pytest.skip(f"node disks cannot be made here: {disks.tools_problem()}")
    free, where = disks.free_bytes()
    size = free // disks.GIB + 1
    message = _refusal(NodeResources(disk_size_gib=size))
    assert message.startswith("resources.disk_size:")
    assert f"{free / disks.GIB:.1f} GiB free" in message and str(where) in message
    assert "leave disk_size out" in message
    # The free space is shared by every node made now; no new node needs none.
    half = max(1, free // disks.GIB // 2 + 1)
    assert "2 node(s)" in _refusal(NodeResources(disk_size_gib=half), num_nodes=2)
    limits.check(NodeResources(disk_size_gib=size), 0, LOCAL)
    assert "too small" in _refusal(NodeResources(disk_size_gib=0))


def test_a_disk_needs_the_engine_on_this_machine() -> None:
    if disks.tools_problem():
        pytest.skip(f"node disks cannot be made here: {disks.tools_problem()}")
    remote = SkycoreConfig(docker=DockerConfig(host="tcp://10.0.0.1:2375", image="x"))
    message = _refusal(NodeResources(disk_size_gib=1), config=remote)
    assert "docker.host" in message and "leave disk_size out" in message
    limits.check(NodeResources(cpus=1), 1, remote)


def test_disk_paths(home: Path) -> None:
    disk = disks.disk_of("my-cluster", 2)
    assert disk.root == home / "node-disks" / "my-cluster" / "2"
    assert disk.source == disk.root / "fs" / "mounts"
    assert disks.is_disk_root(disk.root)
    assert not disks.is_disk_root(Path("/etc"))
    assert not disks.is_disk_root(home / "node-disks" / "my-cluster")
    assert disks.cluster_disks("my-cluster") == {}
    (disk.root).mkdir(parents=True)
    (disk.root.parent / "junk").mkdir()
    assert disks.cluster_disks("my-cluster") == {2: disk}
    disks.remove(disk)
    assert not disk.root.exists()


def _task(tmp_path: Path, resources: str = "") -> Task:
    path = tmp_path / "task.yaml"
    path.write_text(f"num_nodes: 2\nresources:\n  use_spot: true\n{resources}run: 'true'\n")
    return Task.from_yaml(str(path))


def _record(resources: dict[str, object]) -> state.ClusterRecord:
    return state.ClusterRecord("c1", state.CLUSTER_UP, "docker", 2, resources, None, "", 0, 0)


def test_recorded_resources_and_their_comparison(tmp_path: Path) -> None:
    task = _task(tmp_path)
    res = backend.resources_of(task)
    assert {k: res[k] for k in ("disk_size", "cpus", "memory")} == dict.fromkeys(
        ("disk_size", "cpus", "memory")
    )
    assert (
        backend.describe_resources(res) == "cloud=None, image_id=None, use_spot=True, num_nodes=2"
    )
    assert backend.describe_resources({**res, "disk_size": 1, "memory": 0.5}).endswith(
        "num_nodes=2, disk_size=1 GiB, memory=0.5 GiB"
    )
    # A cluster recorded before the per-node fields existed still matches the same task.
    old = {"cloud": None, "image_id": None, "use_spot": True, "num_nodes": 2}
    core.check_same_resources(_record(old), task)
    core.check_same_resources(_record(res), task)
    with pytest.raises(ClusterError) as e:
        core.check_same_resources(_record({**res, "disk_size": 4, "cpus": 1}), task)
    message = str(e.value)
    assert "disk_size=4 GiB" in message and "different: disk_size, cpus" in message
    assert "resources.disk_size, resources.cpus back to match" in message


def test_a_task_beyond_this_machine_has_no_provider(tmp_path: Path) -> None:
    task = _task(tmp_path)
    assert core.provider_of(task) == "docker"
    with pytest.raises(ClusterError, match=r"^resources\.cpus: "):
        check_node_resources("docker", {"cpus": 10_000}, new_nodes=0)
    check_node_resources("docker", {"cpus": None}, new_nodes=5)


def test_status_text_names_the_node_resources() -> None:
    assert nodes.node_resources_text(_record({"disk_size": 2, "cpus": 1.5})) == (
        "2 GiB disk, 1.5 CPUs"
    )
    assert nodes.node_resources_text(_record({"cloud": None})) == ""
