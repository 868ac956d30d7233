"""``harness up`` calls an emulator's ``prepare`` once, though its install step and its start
of the emulators (which run side by side) both reach it; processes take turns."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import emulator_registry as registry
from harness.cloud import cloud
from harness.emulators import fleet
from harness.emulators.preparing import forget_prepared

S3 = registry.get_emulator_class("s3")


class SlowPrepareS3(S3):  # type: ignore[misc,valid-type]
    """The s3 emulator with a slow ``prepare`` (an install) that counts its calls."""

    @classmethod
    def prepare(cls, home: Path) -> None:
        with open(home / "prepare-calls", "a") as out:
            out.write("called\n")
        time.sleep(1.0)
        super().prepare(home)


def calls(home: Path) -> int:
    path = home / "prepare-calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_harness_up_prepares_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "harness"
    monkeypatch.setenv("HARNESS_HOME", str(home))
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "skycore"))
    real = fleet.emulator_class
    monkeypatch.setattr(fleet, "emulator_class", lambda s: SlowPrepareS3 if s == "s3" else real(s))
    forget_prepared()
    said: list[str] = []
    try:
        info = cloud.up(say=said.append, stores=("s3",), with_docker=False)
        assert "s3" in info.endpoints
        assert any("emulator installs: ready" in line for line in said), said
        assert calls(home) == 1, said
        cloud.up(say=said.append, stores=("s3",), with_docker=False)  # again, same process
        assert calls(home) == 1
    finally:
        fleet.stop_all(home)


PREPARE_IN_A_PROCESS = """
import sys, time
from pathlib import Path
from harness.emulators.preparing import prepare_once

class Install:
    store = "installs"

    @classmethod
    def prepare(cls, home):
        log = Path(home) / "prepare-log"
        with open(log, "a") as out:
            out.write("enter\\n")
        time.sleep(0.5)
        with open(log, "a") as out:
            out.write("leave\\n")

prepare_once(Install, Path(sys.argv[1]))
"""


def test_processes_take_turns(tmp_path: Path) -> None:
    """Each process prepares once (it cannot know what another installed), one at a time:
    the log never shows two calls inside each other."""
    starters = [
        subprocess.Popen([sys.executable, "-c", PREPARE_IN_A_PROCESS, str(tmp_path)])
        for _ in range(3)
    ]
    assert [p.wait(timeout=60) for p in starters] == [0, 0, 0]
    lines = (tmp_path / "prepare-log").read_text().split()
    assert lines == ["enter", "leave"] * 3
