"""A hypothesis state machine over launch / exec / stop / start / down on a docker cluster.

After every step the recorded cluster state must match what the provider reports
(``query_instances``): no record <-> no nodes, UP <-> every node running, STOPPED <-> every
node stopped. Commands that are not allowed in a state must fail with a clear ClusterError
and change nothing.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from rich.console import Console

from skycore import execution, provision, state
from skycore.backend import ClusterError
from skycore.config import DockerConfig, SkycoreConfig, save_config
from skycore.provision import NodeStatus
from skycore.task import Task

pytestmark = [pytest.mark.cloud, pytest.mark.slow]

NUM_NODES = 2


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_recorded_state_matches_provider(
    node_engine: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, image = node_engine
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    config = SkycoreConfig(
        docker=DockerConfig(host=host, image=image), logs_dir=str(tmp_path / "sky_logs")
    )
    save_config(config)
    (tmp_path / "wd").mkdir()
    task_path = tmp_path / "task.yaml"
    task_path.write_text(
        yaml.safe_dump(
            {
                "num_nodes": NUM_NODES,
                "workdir": str(tmp_path / "wd"),
                "setup": "echo setup >> ~/setup-count",
                "run": "test -d ~/sky_workdir && echo run-$SKYPILOT_NODE_RANK",
            }
        )
    )
    task = Task.from_yaml(task_path)
    names: list[str] = []

    class ClusterMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.name = f"tsm-{uuid.uuid4().hex[:8]}"
            names.append(self.name)
            self.expected: str | None = None  # None: no cluster

        def _nodes(self) -> dict[int, NodeStatus]:
            return provision.query_instances("docker", self.name, config)

        @rule(marker=st.integers(0, 3))
        def launch(self, marker: int) -> None:
            (tmp_path / "wd" / f"f{marker}.txt").write_text(uuid.uuid4().hex)
            res = execution.launch(task, self.name, console=quiet(), config=config, stream=False)
            assert res.exit_code == 0
            self.expected = state.CLUSTER_UP

        @rule()
        def exec_(self) -> None:
            if self.expected == state.CLUSTER_UP:
                res = execution.exec_task(
                    task, self.name, console=quiet(), config=config, stream=False
                )
                assert res.exit_code == 0
            else:
                with pytest.raises(ClusterError):
                    execution.exec_task(task, self.name, console=quiet(), config=config)

        @rule()
        def stop(self) -> None:
            if self.expected is None:
                with pytest.raises(ClusterError):
                    execution.stop(self.name, console=quiet(), config=config)
                return
            execution.stop(self.name, console=quiet(), config=config)
            self.expected = state.CLUSTER_STOPPED

        @rule()
        def start(self) -> None:
            if self.expected is None:
                with pytest.raises(ClusterError):
                    execution.start(self.name, console=quiet(), config=config)
                return
            execution.start(self.name, console=quiet(), config=config)
            self.expected = state.CLUSTER_UP

        @rule()
        def down(self) -> None:
            if self.expected is None:
                with pytest.raises(ClusterError):
                    execution.down(self.name, console=quiet(), config=config)
                return
            execution.down(self.name, console=quiet(), config=config)
            self.expected = None

        @invariant()
        def recorded_matches_provider(self) -> None:
            record = state.get_cluster(self.name)
            nodes = self._nodes()
            if record is None:
                assert self.expected is None
                assert nodes == {}
                return
            assert record.status == self.expected, record.status_reason
            want = NodeStatus.UP if record.status == state.CLUSTER_UP else NodeStatus.STOPPED
            assert nodes == {rank: want for rank in range(NUM_NODES)}
            events = state.cluster_events(self.name)
            assert events and events[-1].reason

        def teardown(self) -> None:
            provision.terminate_instances("docker", self.name, config)
            state.remove_cluster(self.name, "test teardown")

    try:
        run_state_machine_as_test(
            ClusterMachine,
            settings=settings(
                max_examples=10,
                stateful_step_count=10,
                deadline=None,
                derandomize=False,
                suppress_health_check=list(HealthCheck),
                database=None,
            ),
        )
    finally:
        for name in names:
            provision.terminate_instances("docker", name, config)
