"""Stages as the user sees them: their names and log files, the result of each, and the
reporter that prints one line per stage and progress while it runs."""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from skycore.errors import StageError

EXIT_JOB_FAILED = 100  # FAILED and FAILED_SETUP, as SkyPilot's JobExitCode.FAILED
EXIT_JOB_CANCELLED = 103


class Stage(enum.Enum):
    """A step of a pipeline, in the order they run."""

    PROVISION = "PROVISION"
    SYNC_WORKDIR = "SYNC_WORKDIR"
    SYNC_FILE_MOUNTS = "SYNC_FILE_MOUNTS"
    SETUP = "SETUP"
    EXEC = "EXEC"
    DOWN = "DOWN"
    STOP = "STOP"
    START = "START"


LOG_NAMES = {
    Stage.PROVISION: "provision.log",
    Stage.SYNC_WORKDIR: "workdir_sync.log",
    Stage.SYNC_FILE_MOUNTS: "file_mounts.log",
    Stage.DOWN: "teardown.log",
    Stage.STOP: "stop.log",
    Stage.START: "start.log",
}


@dataclass
class StageResult:
    """How a stage went."""

    stage: Stage
    seconds: float
    note: str = ""
    ok: bool = True
    skipped: bool = False


@dataclass
class RunResult:
    """The outcome of launch / exec: stage timings, the job and the exit code for the CLI."""

    cluster: str
    log_dir: Path
    stages: list[StageResult] = field(default_factory=list)
    job_id: int | None = None
    job_status: str | None = None
    exit_code: int = 0

    def seconds(self, stage: Stage) -> float | None:
        """Duration of a stage, None if it did not run."""
        for s in self.stages:
            if s.stage is stage:
                return s.seconds
        return None


class Reporter:
    """Prints one line per stage (with its duration) and progress while a stage runs."""

    def __init__(self, console: Console, result: RunResult) -> None:
        self.console = console
        self.result = result
        self._status: Any = None

    @contextmanager
    def stage(self, stage: Stage, quiet_progress: bool = False) -> Iterator[StageResult]:
        """Time a stage; on StageError print the failure (log tail and path) and re-raise."""
        res = StageResult(stage, 0.0)
        start = time.monotonic()
        status = None
        if not quiet_progress and self.console.is_terminal:
            status = self.console.status(f"{stage.value}...")
            status.start()
        self._status = status
        try:
            yield res
        except StageError as e:
            res.ok = False
            res.seconds = time.monotonic() - start
            self._stop_status()
            self.result.stages.append(res)
            self.line(res, note=e.message)
            self.show_failure(e.tail, e.log_path)
            raise
        except BaseException:
            res.ok = False
            res.seconds = time.monotonic() - start
            self._stop_status()
            self.result.stages.append(res)
            self.line(res, note="failed")
            raise
        res.seconds = time.monotonic() - start
        self._stop_status()
        self.result.stages.append(res)
        self.line(res)

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def progress(self, msg: str) -> None:
        """Progress inside a stage: spinner text on a terminal, a dim line otherwise."""
        if self._status is not None:
            self._status.update(escape(msg))
        else:
            self.console.print(f"  [dim]{escape(msg)}[/dim]", highlight=False)

    def line(self, res: StageResult, note: str | None = None) -> None:
        """The one line of a stage."""
        mark = "[green]✓[/green]" if res.ok else "[red]✗[/red]"
        if res.skipped:
            mark = "[yellow]-[/yellow]"
        text = escape(note if note is not None else res.note)
        self.console.print(
            f"{mark} {res.stage.value:<17} {res.seconds:6.1f}s  {text}", highlight=False
        )

    def show_failure(self, tail: str, log_path: Path | None) -> None:
        """The last lines of a failed stage's log and where the whole log is."""
        if tail:
            self.console.print("[dim]" + escape(_indent(tail)) + "[/dim]", highlight=False)
        if log_path is not None:
            self.console.print(f"  Full log: {escape(str(log_path))}", highlight=False)


def _indent(text: str) -> str:
    return "\n".join("  | " + line for line in text.splitlines())
