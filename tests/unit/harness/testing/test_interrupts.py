"""Ctrl-C stops a run and fails it, even when Python swallows the KeyboardInterrupt in a
finalizer (a socket closed by the garbage collector), and ``harness conform`` never exits 0
after one."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.conformance.commands import INTERRUPTED_EXIT, _run

HANG_GUARD_S = 120

SWALLOWED_CTRL_C = textwrap.dedent(
    """
    import os, signal

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands while a finalizer runs
            sum(range(1000))

    def test_first():
        open("first-ran", "w").close()
        Finalized()

    def test_second():
        open("second-ran", "w").close()
    """
)


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_swallowed.py").write_text(SWALLOWED_CTRL_C)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args,
         "test_swallowed.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["in-process", "xdist-worker"])
def test_ctrl_c_swallowed_by_a_finalizer_still_stops_and_fails_the_run(
    tmp_path: Path, workers: list[str]
) -> None:
    result = _pytest(tmp_path, *workers)
    out = result.stdout + result.stderr

    assert "KeyboardInterrupt" in out  # Python reported it as unraisable: it did not propagate
    assert (tmp_path / "first-ran").exists(), out
    assert not (tmp_path / "second-ran").exists(), out
    assert result.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "interrupted by Ctrl-C" in out


def test_a_run_without_ctrl_c_runs_every_test(tmp_path: Path) -> None:
    (tmp_path / "test_swallowed.py").write_text("def test_a():\n    pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_swallowed.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr


SUITE_THAT_PASSES_AFTER_CTRL_C = textwrap.dedent(
    """
    import os, signal, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # this suite shrugs Ctrl-C off
    parent = os.getppid()
    deadline = time.monotonic() + 60
    while open(f"/proc/{parent}/wchan").read() != "do_wait":  # harness conform is waiting
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(parent, signal.SIGINT)
    """
)


@pytest.fixture
def ctrl_c_as_python_raises_it() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in ``harness conform``, and is not recorded
    as a Ctrl-C of this test run."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("ctrl_c_as_python_raises_it")
def test_harness_conform_never_exits_0_after_ctrl_c(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([sys.executable, "-c", SUITE_THAT_PASSES_AFTER_CTRL_C]) == INTERRUPTED_EXIT
    assert "interrupted: waiting for the suite to clean up" in capsys.readouterr().err


@pytest.mark.usefixtures("ctrl_c_as_python_raises_it")
def test_harness_conform_passes_on_the_suites_own_exit_after_ctrl_c() -> None:
    failing = SUITE_THAT_PASSES_AFTER_CTRL_C + "raise SystemExit(1)\n"
    assert _run([sys.executable, "-c", failing]) == 1
