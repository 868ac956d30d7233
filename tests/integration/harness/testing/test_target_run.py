"""A target run under pytest-xdist: the workers name their buckets with the controller's run
id (so the controller's clean-up finds them), the header says where the run goes and what
it creates, and a bad --run-id is refused in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.base import RunningEmulator
from harness.targets import dump_target

PROBE = """
import os
from pathlib import Path

import pytest
from harness.testing import access

@pytest.mark.parametrize("n", range(4))
def test_probe(n):
    (Path(os.environ["PROBE_OUT"]) / f"tag-{n}.txt").write_text(access.bucket_tag())
"""


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PROBE_OUT"] = str(tmp_path)
    for old in tmp_path.glob("tag-*.txt"):
        old.unlink()
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_probe.py"), "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'base'}", "--rootdir", str(tmp_path), *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip


@pytest.fixture
def target_file(emulators: dict[str, RunningEmulator], tmp_path: Path) -> Path:
    emu = emulators["s3"] if "s3" in emulators else next(iter(emulators.values()))
    path = tmp_path / "t.yaml"
    path.write_text(
        dump_target(emu.store, emu.config_section(USER), emu.config_section(OTHER), None)
    )
    path.chmod(0o600)
    return path


def test_workers_share_the_controllers_run_id(target_file: Path, tmp_path: Path) -> None:
    r = run(tmp_path, "-n", "2", "--target", str(target_file))
    assert r.returncode == 0, r.stdout + r.stderr
    header = re.search(r"every bucket of this run carries (skyconf-[0-9a-f]{8})", r.stdout)
    assert header, r.stdout
    assert "buckets and" in r.stdout  # the plan: what the run creates
    tags = {p.read_text() for p in tmp_path.glob("tag-*.txt")}
    assert tags == {header.group(1)}, (tags, header.group(1))


def test_a_given_run_id_is_used_and_a_bad_one_refused(target_file: Path, tmp_path: Path) -> None:
    r = run(tmp_path, "-n", "2", "--target", str(target_file), "--run-id", "0123abcd")
    assert r.returncode == 0, r.stdout + r.stderr
    assert {p.read_text() for p in tmp_path.glob("tag-*.txt")} == {"skyconf-0123abcd"}
    r = run(tmp_path, "--target", str(target_file), "--run-id", "Bad_Id")
    assert r.returncode != 0
    assert "8 lowercase hex digits" in r.stderr and "Traceback" not in r.stderr, r.stderr
