"""Following a command's output: lines as they come, and Ctrl-C acted on while it is quiet."""

from __future__ import annotations

import signal
import subprocess
import threading

import pytest

from skycore.runner import pipe_lines


def test_lines_come_whole_and_the_last_one_may_lack_its_newline() -> None:
    script = "printf 'a\\nbb\\n'; sleep 0.4; printf 'c\\n'; printf 'last'"
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert list(pipe_lines(proc.stdout)) == [b"a\n", b"bb\n", b"c\n", b"last"]
    assert proc.wait() == 0


def test_a_ctrl_c_that_reaches_another_thread_stops_a_quiet_follow() -> None:
    """The kernel may hand a process's SIGINT to any of its threads; Python then only sets a
    flag for the main thread. A follow blocked in read() never saw it while the command was
    quiet (CI: a terminal that did not detach). Here the signal goes to another thread on
    purpose, and the follow must stop while the command still runs."""
    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    timer = threading.Timer(0.3, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in pipe_lines(proc.stdout):
                pass
        assert proc.poll() is None, "the follow only stopped because the command ended"
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
