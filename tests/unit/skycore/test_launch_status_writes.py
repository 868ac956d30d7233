"""A launch records each cluster status once: INIT while the nodes come up, INIT (SYNCING)
once they are healthy, UP once the workdir and file mounts are in place.

The launch runs for real against a SQLite state home in tmp_path; only the node work (start
the nodes, wait for health, sync, reserve a job id) is replaced, and the state writers that
core calls are wrapped to count their calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from skycore import execution
from skycore.backend import provision as backend_provision
from skycore.backend.handle import ClusterHandle
from skycore.config import DockerConfig, SkycoreConfig
from skycore.core import clusters
from skycore.provision import ClusterInfo, NodeInfo
from skycore.state.clusters import CLUSTER_INIT, CLUSTER_UP, cluster_events, get_cluster
from skycore.state.jobs import JOB_SUCCEEDED, JobRecord, add_job
from skycore.task import Task

NAME = "writes"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SkycoreConfig:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    return SkycoreConfig(
        docker=DockerConfig(host="unix:///run/none.sock", image="x"),
        logs_dir=str(tmp_path / "logs"),
    )


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (status, reason) that core writes to a cluster row, in order."""
    seen: list[tuple[str, str]] = []

    def counted(write: Callable[..., None], status_at: int) -> Callable[..., None]:
        def wrapper(name: str, *args: Any) -> None:
            seen.append((args[status_at], args[-1]))
            write(name, *args)

        return wrapper

    monkeypatch.setattr(clusters, "set_cluster_status", counted(clusters.set_cluster_status, 0))
    monkeypatch.setattr(clusters, "upsert_cluster", counted(clusters.upsert_cluster, 0))
    return seen


@pytest.fixture(autouse=True)
def no_nodes(monkeypatch: pytest.MonkeyPatch, config: SkycoreConfig) -> ClusterHandle:
    """Node work replaced: one healthy node, nothing to sync, job ids from the state."""
    node = NodeInfo(0, "i-0", f"{NAME}-0", f"{NAME}-0", "10.0.0.2")
    handle = ClusterHandle(NAME, "docker", ClusterInfo(NAME, "docker", [node]), [], config)

    def submit(_h: ClusterHandle, task: Task, log_dir: Path, status: str, *_: Any) -> JobRecord:
        return add_job(NAME, task.name, task.num_nodes, str(log_dir), 0, status=status)

    monkeypatch.setattr(backend_provision, "start_nodes", lambda *a, **k: handle)
    monkeypatch.setattr(backend_provision, "wait_healthy", lambda *a: None)
    monkeypatch.setattr(execution, "get_handle", lambda *a: handle)
    monkeypatch.setattr(execution, "node_problems", lambda *a: [])
    monkeypatch.setattr(execution, "sync_file_mounts", lambda *a, **k: (0, 0))
    monkeypatch.setattr(execution.jobs, "submit_job", submit)
    return handle


def _launch(tmp_path: Path, config: SkycoreConfig) -> execution.RunResult:
    path = tmp_path / "task.yaml"
    path.write_text("name: t\n")  # no workdir, setup or run: only the cluster's statuses
    console = Console(file=(tmp_path / "out.txt").open("a"), width=200)
    return execution.launch(Task.from_yaml(str(path)), NAME, console=console, config=config)


def test_a_new_cluster_is_written_init_syncing_and_up_once_each(
    tmp_path: Path, config: SkycoreConfig, writes: list[tuple[str, str]]
) -> None:
    result = _launch(tmp_path, config)
    assert result.job_status == JOB_SUCCEEDED
    assert writes == [
        (CLUSTER_INIT, "launch: new cluster"),
        (CLUSTER_INIT, clusters.SYNCING),
        (CLUSTER_UP, "all 1 node(s) healthy; workdir and 0 file mount(s) in place"),
    ]
    changes = [(e.from_status, e.to_status) for e in cluster_events(NAME)]
    assert changes == [(None, CLUSTER_INIT), (CLUSTER_INIT, CLUSTER_UP)]


def test_a_relaunch_on_an_up_cluster_writes_syncing_once(
    tmp_path: Path, config: SkycoreConfig, writes: list[tuple[str, str]]
) -> None:
    _launch(tmp_path, config)
    writes.clear()
    _launch(tmp_path, config)
    assert [status for status, _ in writes] == [CLUSTER_INIT, CLUSTER_UP]
    assert writes[0] == (CLUSTER_INIT, clusters.SYNCING)
    record = get_cluster(NAME)
    assert record is not None and record.status == CLUSTER_UP
