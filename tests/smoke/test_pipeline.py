"""The pipeline as a user drives it from the CLI: a failed setup leaves the cluster UP and
the job FAILED_SETUP; after the fix, exec works and a relaunch skips provisioning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SKYCORE = [sys.executable, "-m", "skycore.cli"]

pytestmark = pytest.mark.usefixtures("local_cloud")


def skycore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [*SKYCORE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_setup_failure_then_fix(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory("setupfail").name
    broken = tmp_path / "broken.yaml"
    broken.write_text("setup: |\n  echo preparing\n  exit 3\nrun: echo ran\n")
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("setup: echo setup-ok\nrun: echo run-ok on $SKYPILOT_NODE_RANK\n")

    first = skycore("launch", str(broken), "-c", cluster, "-y", cwd=tmp_path)
    assert first.returncode == 100, first.stdout + first.stderr
    text = first.stdout + first.stderr
    assert "FAILED_SETUP" in text
    assert "preparing" in text  # the tail of the setup log is shown

    status = skycore("status", cluster, cwd=tmp_path)
    assert "UP" in status.stdout, status.stdout

    ran = skycore("exec", cluster, str(fixed), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "run-ok on 0" in ran.stdout

    again = skycore("launch", str(fixed), "-c", cluster, "-y", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "provisioning skipped" in again.stdout
    assert "setup-ok" in again.stdout and "run-ok on 0" in again.stdout


def test_exec_on_stopped_cluster_says_what_to_do(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory("stopped").name
    task = tmp_path / "task.yaml"
    task.write_text("run: echo hi\n")
    assert skycore("launch", str(task), "-c", cluster, "-y", cwd=tmp_path).returncode == 0
    assert skycore("stop", cluster, "-y", cwd=tmp_path).returncode == 0
    result = skycore("exec", cluster, str(task), cwd=tmp_path)
    assert result.returncode == 2
    assert "STOPPED" in result.stderr + result.stdout
    assert "skycore start" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
