"""A node's own disk (resources.disk_size) and its CPU and memory limits: real containers on
the harness's dockerd, real loop-mounted disks, nothing mocked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.cloud import preemption
from skycore import execution, provision, state
from skycore.config import SkycoreConfig
from skycore.core.clusters import provision_cluster
from skycore.errors import ClusterError
from skycore.execution import Stage
from skycore.provision import NodeResources, ProvisionError, disks
from skycore.provision import docker as dprov
from skycore.runner import CommandRunner
from tests.integration.helpers import quiet, task_maker
from tests.integration.skycore.provision.helpers import node_1_blocked

BASE = disks.NODE_MOUNTS_BASE
ONE_GIB = NodeResources(disk_size_gib=1)


def _runner(cluster: str, config: SkycoreConfig, rank: int = 0) -> CommandRunner:
    info = provision.get_cluster_info("docker", cluster, config)
    return provision.get_command_runners("docker", info, config)[rank]


def _sh(runner: CommandRunner, cmd: str) -> tuple[int, str]:
    rc, out = runner.run_output(cmd)
    return rc, out.strip()


def _attached(image: Path) -> str:
    """The loop devices backing ``image`` ('' when none)."""
    return subprocess.run(
        ["losetup", "-j", str(image)], capture_output=True, text=True, check=False
    ).stdout.strip()


def _assert_gone(disk: disks.NodeDisk) -> None:
    assert not disk.root.exists()
    assert disk.mountpoint not in disks.mounted_disks()
    assert not _attached(disk.image)


def test_a_node_disk_is_a_filesystem_of_its_size(
    cluster: str, docker_config: SkycoreConfig
) -> None:
    provision.run_instances("docker", cluster, 1, None, docker_config, ONE_GIB)
    disk = disks.disk_of(cluster, 0)
    assert disk.mountpoint.is_mount() and disk.image.is_file()
    runner = _runner(cluster, docker_config)
    rc, out = _sh(runner, f"df -B1 --output=size,avail {BASE} | tail -1")
    size, avail = map(int, out.split())
    assert 0.9 * disks.GIB < size <= disks.GIB and avail > 0.9 * disks.GIB  # no reserved blocks
    # Fill it to the last MiB at once (fallocate), then a real write runs out of space.
    fill = (
        f"python3 -c \"import os; fd = os.open('{BASE}/fill', os.O_CREAT | os.O_WRONLY); "
        f"os.posix_fallocate(fd, 0, os.statvfs('{BASE}').f_bavail * 4096 - (1 << 20))\""
    )
    assert _sh(runner, fill)[0] == 0
    rc, out = _sh(runner, f"dd if=/dev/zero of={BASE}/more bs=1M count=4 conv=fsync")
    assert rc != 0 and "No space left on device" in out
    # The node's own filesystem (the host's disk) is untouched.
    assert (
        _sh(runner, "dd if=/dev/zero of=/root/ok bs=1M count=4 2>/dev/null && echo ok")[1] == "ok"
    )


def test_no_disk_size_keeps_the_caches_on_the_node(
    cluster: str, docker_config: SkycoreConfig
) -> None:
    info = provision.run_instances("docker", cluster, 1, None, docker_config)
    runner = _runner(cluster, docker_config)
    assert (
        _sh(runner, f"mkdir -p {BASE} && stat -c %d {BASE} /")[1].split()
        == [_sh(runner, "stat -c %d /")[1]] * 2
    )
    c = dprov.client(docker_config).containers.get(info.head.instance_id)
    assert dprov.LABEL_DISK not in c.labels
    assert c.attrs["HostConfig"]["NanoCpus"] == 0 and c.attrs["HostConfig"]["Memory"] == 0
    assert disks.cluster_disks(cluster) == {}


def test_the_disk_survives_stop_and_start(cluster: str, docker_config: SkycoreConfig) -> None:
    provision.run_instances("docker", cluster, 2, None, docker_config, ONE_GIB)
    for rank in (0, 1):
        assert _sh(_runner(cluster, docker_config, rank), f"echo {rank} > {BASE}/kept")[0] == 0
    provision.stop_instances("docker", cluster, docker_config)
    for rank, disk in disks.cluster_disks(cluster).items():  # off the host, image kept
        assert not disk.mountpoint.is_mount() and disk.image.is_file(), rank
    provision.start_instances("docker", cluster, docker_config)
    for rank in (0, 1):
        assert _sh(_runner(cluster, docker_config, rank), f"cat {BASE}/kept")[1] == str(rank)
    # run_instances resumes a stopped node the same way.
    provision.stop_instances("docker", cluster, docker_config)
    provision.run_instances("docker", cluster, 2, None, docker_config, ONE_GIB)
    assert _sh(_runner(cluster, docker_config, 1), f"cat {BASE}/kept")[1] == "1"


def test_a_preempted_node_loses_its_disk(cluster: str, docker_config: SkycoreConfig) -> None:
    provision.run_instances("docker", cluster, 2, None, docker_config, ONE_GIB)
    for rank in (0, 1):
        _sh(_runner(cluster, docker_config, rank), f"echo old > {BASE}/cache")
    old = disks.disk_of(cluster, 1)
    preemption.preempt(cluster, 1, force=True, config=docker_config)
    _assert_gone(old)
    # A node removed outside skycore: the provider deletes its disk when it next looks.
    head = disks.disk_of(cluster, 0)
    dprov.client(docker_config).api.remove_container(dprov.container_name(cluster, 0), force=True)
    assert head.root.exists()
    assert provision.query_instances("docker", cluster, docker_config) == {}
    _assert_gone(head)
    # The relaunch makes fresh, empty disks.
    provision.run_instances("docker", cluster, 2, None, docker_config, ONE_GIB)
    for rank in (0, 1):
        assert _sh(_runner(cluster, docker_config, rank), f"ls -A {BASE}")[1] == ""


def test_a_stale_disk_is_replaced_never_reused(cluster: str, docker_config: SkycoreConfig) -> None:
    """A disk left by a node that vanished (no provider call saw it go) is not the new
    node's: the relaunch makes a new one."""
    stale = disks.disk_of(cluster, 0)
    disks.create(stale, 1)
    (stale.source / "cache").write_text("a vanished node's\n")
    provision.run_instances("docker", cluster, 1, None, docker_config, ONE_GIB)
    assert _sh(_runner(cluster, docker_config), f"ls -A {BASE}")[1] == ""
    assert stale.mountpoint.is_mount()  # the new disk, in the same place


def test_terminate_leaves_nothing_on_the_host(cluster: str, docker_config: SkycoreConfig) -> None:
    provision.run_instances("docker", cluster, 2, None, docker_config, ONE_GIB)
    made = list(disks.cluster_disks(cluster).values())
    assert len(made) == 2 and all(_attached(d.image) for d in made)
    provision.stop_instances("docker", cluster, docker_config)
    provision.start_instances("docker", cluster, docker_config)
    provision.terminate_instances("docker", cluster, docker_config)
    for disk in made:
        _assert_gone(disk)
    assert not (disks.disks_home() / cluster).exists()


def test_cpus_and_memory_are_container_limits(cluster: str, docker_config: SkycoreConfig) -> None:
    info = provision.run_instances(
        "docker", cluster, 1, None, docker_config, NodeResources(cpus=0.5, memory_gib=0.25)
    )
    c = dprov.client(docker_config).containers.get(info.head.instance_id)
    assert c.attrs["HostConfig"]["NanoCpus"] == 500_000_000
    assert c.attrs["HostConfig"]["Memory"] == 256 << 20
    limit = _sh(
        _runner(cluster, docker_config),
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
    )[1]
    assert limit == str(256 << 20)
    assert disks.cluster_disks(cluster) == {}


@pytest.mark.parametrize(
    ("resources", "field", "figure"),
    [
        (NodeResources(cpus=(os.cpu_count() or 1) + 1), "resources.cpus", f"{os.cpu_count()} CPU"),
        (NodeResources(memory_gib=1 << 20), "resources.memory", "GiB of memory"),
        (NodeResources(disk_size_gib=1 << 30), "resources.disk_size", "GiB free"),
    ],
    ids=["cpus", "memory", "disk_size"],
)
def test_more_than_this_machine_has_is_refused(
    cluster: str, docker_config: SkycoreConfig, resources: NodeResources, field: str, figure: str
) -> None:
    with pytest.raises(ProvisionError) as e:
        provision.run_instances("docker", cluster, 2, None, docker_config, resources)
    message = str(e.value)
    assert message.startswith(f"{field}: ") and figure in message and "leave" in message
    assert "\n" not in message
    assert provision.query_instances("docker", cluster, docker_config) == {}
    assert disks.cluster_disks(cluster) == {}
    # Core refuses it before recording anything: no half-made cluster.
    res = {"cloud": None, "image_id": None, "use_spot": False, "num_nodes": 2}
    res |= {"disk_size": resources.disk_size_gib, "cpus": resources.cpus}
    res["memory"] = resources.memory_gib
    with pytest.raises(ClusterError, match=f"^{field}: "):
        provision_cluster(
            cluster, "docker", 2, None, res, docker_config, Path(os.devnull), "launch: test"
        )
    assert state.get_cluster(cluster) is None


def test_a_node_that_fails_to_come_up_leaves_no_disk(
    cluster: str, docker_config: SkycoreConfig
) -> None:
    with node_1_blocked(cluster, docker_config, ONE_GIB):
        assert set(disks.cluster_disks(cluster)) == {0}
        assert not _attached(disks.disk_of(cluster, 1).image)


def test_unmount_all_takes_the_disks_off_the_host(
    cluster: str, docker_config: SkycoreConfig
) -> None:
    """What 'harness down' does once its dockerd stopped the nodes: the disks come off the
    host, the images stay, and a node mounts its disk again when it starts."""
    provision.run_instances("docker", cluster, 1, None, docker_config, ONE_GIB)
    _sh(_runner(cluster, docker_config), f"echo kept > {BASE}/kept")
    dprov.client(docker_config).containers.get(dprov.container_name(cluster, 0)).stop(timeout=1)
    disk = disks.disk_of(cluster, 0)
    assert disks.unmount_all(under=disks.disks_home()) == [disk.mountpoint]
    assert not disk.mountpoint.is_mount() and disk.image.is_file()
    provision.run_instances("docker", cluster, 1, None, docker_config, ONE_GIB)
    assert _sh(_runner(cluster, docker_config), f"cat {BASE}/kept")[1] == "kept"


def test_a_launch_with_node_resources_from_yaml(
    cluster: str, docker_config: SkycoreConfig, tmp_path: Path
) -> None:
    """The task's fields through launch: recorded, part of the relaunch comparison, kept
    across stop/start, gone with down; a node beyond this machine is refused up front."""
    make = task_maker(tmp_path)
    shape = {"disk_size": 1, "cpus": 1, "memory": "512MB"}
    task = make(resources=shape, run=f"df -B1 --output=size {BASE} | tail -1 > {BASE}/size")
    assert execution.launch(task, cluster, console=quiet(), config=docker_config).exit_code == 0
    record = state.get_cluster(cluster)
    assert record is not None and record.resources["disk_size"] == 1
    assert record.resources["memory"] == 0.5
    c = dprov.client(docker_config).containers.get(dprov.container_name(cluster, 0))
    assert c.attrs["HostConfig"]["NanoCpus"] == 10**9
    again = execution.launch(task, cluster, console=quiet(), config=docker_config)
    assert next(s for s in again.stages if s.stage is Stage.PROVISION).skipped
    with pytest.raises(ClusterError) as e:
        bigger = make(resources={**shape, "disk_size": 2}, run="true")
        execution.launch(bigger, cluster, console=quiet(), config=docker_config)
    assert "disk_size=1 GiB" in e.value.message and "disk_size=2 GiB" in e.value.message
    assert "resources.disk_size back to match" in e.value.message
    execution.stop(cluster, console=quiet(), config=docker_config)
    execution.start(cluster, console=quiet(), config=docker_config)
    size = int(_sh(_runner(cluster, docker_config), f"cat {BASE}/size")[1])
    assert 0.9 * disks.GIB < size <= disks.GIB
    execution.down(cluster, console=quiet(), config=docker_config)
    _assert_gone(disks.disk_of(cluster, 0))
    other = f"{cluster}-x"
    with pytest.raises(ClusterError, match=r"^resources\.cpus: "):
        execution.launch(
            make(resources={"cpus": 4096}, run="true"), other, console=quiet(), config=docker_config
        )
    assert state.get_cluster(other) is None
