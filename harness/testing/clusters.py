"""A cluster as a smoke test drives it: launch, exec, stop, start, down and a node shell,
through skycore's own Python API (the same code the CLI runs)."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from skycore import execution, provision, state
from skycore.backend import get_handle
from skycore.config import load_config
from skycore.task import Task


@dataclass
class Outcome:
    """What a launch or exec produced."""

    result: execution.RunResult
    output: str

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def job_status(self) -> str | None:
        return self.result.job_status

    def run_log(self, rank: int = 0) -> str:
        """The run log of node ``rank``."""
        path = self.result.log_dir / f"run-{rank}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class SmokeCluster:
    """One uniquely named cluster of a test."""

    name: str
    workdir: Path
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def new(cls, prefix: str, workdir: Path) -> SmokeCluster:
        """A fresh, unique cluster name (nothing is started yet)."""
        return cls(f"{prefix[:20]}-{uuid.uuid4().hex[:8]}".lower(), workdir)

    def _console(self) -> tuple[Console, io.StringIO]:
        buffer = io.StringIO()
        return Console(file=buffer, width=200, force_terminal=False), buffer

    def task(self, spec: dict[str, Any], env: dict[str, str] | None = None) -> Task:
        """Write ``spec`` as a task YAML and load it as skycore would."""
        path = self.workdir / f"{self.name}-{len(self.outputs)}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return Task.from_yaml(path, env or {})

    def launch(self, spec: dict[str, Any] | Task, env: dict[str, str] | None = None) -> Outcome:
        """``skycore launch`` of ``spec`` on this cluster."""
        task = spec if isinstance(spec, Task) else self.task(spec, env)
        console, buffer = self._console()
        result = execution.launch(task, self.name, console=console, stream=False)
        self.outputs.append(buffer.getvalue())
        return Outcome(result, buffer.getvalue())

    def exec(self, spec: dict[str, Any], env: dict[str, str] | None = None) -> Outcome:
        """``skycore exec`` of ``spec`` on this cluster."""
        console, buffer = self._console()
        result = execution.exec_task(self.task(spec, env), self.name, console=console, stream=False)
        self.outputs.append(buffer.getvalue())
        return Outcome(result, buffer.getvalue())

    def stop(self) -> str:
        """``skycore stop``; what it printed."""
        console, buffer = self._console()
        execution.stop(self.name, console=console)
        return buffer.getvalue()

    def start(self) -> None:
        """``skycore start``."""
        console, _ = self._console()
        execution.start(self.name, console=console)

    def down(self) -> None:
        """``skycore down``; nodes left without a record (a failed launch, a controller that
        forgot the cluster) are removed too. No error if nothing was ever started."""
        if state.get_cluster(self.name) is not None:
            console, _ = self._console()
            execution.down(self.name, console=console)
        provision.terminate_instances("docker", self.name, load_config())

    def status(self) -> str | None:
        """The recorded cluster status (INIT / UP / STOPPED), None if unknown."""
        record = state.get_cluster(self.name)
        return record.status if record else None

    def shell(self, cmd: str, rank: int = 0, timeout: float = 120) -> tuple[int, str]:
        """Run ``cmd`` on node ``rank``; (exit code, merged output)."""
        record = state.get_cluster(self.name)
        assert record is not None, f"cluster {self.name} is not recorded"
        handle = get_handle(record, load_config())
        return handle.runners[rank].run_output(cmd, timeout=timeout)

    def describe_access(self) -> str:
        """How to reach the cluster after the test (for --keep-on-failure)."""
        return (
            f"cluster {self.name} left up (SKYCORE_HOME={state.db_path().parent}); "
            f"'skycore status -v {self.name}', 'skycore down {self.name}'"
        )
