"""``make flaky LOAD=1``: tools/flaky.py --load runs tools/cpu_hog.py beside the runs, says
so, and leaves no hog behind, whether the runs pass or fail; the hog also ends by itself
when its parent is gone. Real processes, with a tiny command instead of the smoke suite."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HANG_GUARD = 30.0
"""Seconds; each run takes well under one."""


def _gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (an exited process its parent has not reaped counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def flaky(tmp_path: Path, *options: str, code: str) -> subprocess.CompletedProcess[str]:
    """tools/flaky.py with ``options``, running ``python -c code`` as the suite."""
    tool = [sys.executable, str(REPO / "tools" / "flaky.py"), "--logs", str(tmp_path)]
    return subprocess.run(
        [*tool, *options, "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


@pytest.mark.parametrize("exit_code", [0, 3])
def test_load_runs_beside_the_runs_and_is_gone_after(tmp_path: Path, exit_code: int) -> None:
    done = flaky(tmp_path, "--runs", "2", "--load", code=f"import sys; sys.exit({exit_code})")
    assert done.returncode == (1 if exit_code else 0), done.stdout + done.stderr
    started = re.findall(
        r"^flaky: load: a CPU hog \(tools/cpu_hog.py, pid (\d+)\) busy", done.stdout, re.M
    )
    ran = re.findall(
        r"^flaky: load: .*pid (\d+)\) ran on one core beside every run: ", done.stdout, re.M
    )
    assert started and started == ran, done.stdout
    assert _gone(int(started[0]))
    assert f"run 2: exit {exit_code}" in done.stdout  # the usual output is still there


def test_without_load_no_hog_starts(tmp_path: Path) -> None:
    done = flaky(tmp_path, "--runs", "1", code="pass")
    assert done.returncode == 0 and "flaky: load" not in done.stdout, done.stdout


def test_hog_ends_when_its_parent_is_gone() -> None:
    """A parent that exits (or is SIGKILLed) without stopping its hog: the hog ends."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys\n"
            f"hog = subprocess.Popen([sys.executable, {str(REPO / 'tools' / 'cpu_hog.py')!r},"
            " '--parent', str(os.getpid())])\n"
            "print(hog.pid, flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None and parent.stdin is not None
    hog = int(parent.stdout.readline())
    assert not _gone(hog)  # it runs while its parent does
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + HANG_GUARD
    while not _gone(hog) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(hog), f"the hog {hog} outlived its parent"
