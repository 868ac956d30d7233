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


def test_a_line_written_in_pieces_comes_whole() -> None:
    script = "printf 'x'; sleep 0.3; printf 'y'; sleep 0.3; printf 'z\\nq\\n'"
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert list(pipe_lines(proc.stdout)) == [b"xyz\n", b"q\n"]
    assert proc.wait() == 0
    assert proc.wait() == 0


def test_a_ctrl_c_that_reaches_another_thread_stops_a_quiet_follow() -> None:
    """The kernel may hand a process's SIGINT to any of its threads; Python then only sets a
    flag for the main thread. A follow blocked in read() never saw it while the command was
    quiet (CI: a terminal that did not detach). Here the signal goes to another thread on
    purpose, and the follow must stop while the command still runs."""
    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    # Python's own Ctrl-C, also when this suite was started with SIGINT ignored (in the
    # background): the flag the other thread sets is what the follow must act on.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in pipe_lines(proc.stdout):
                pass
        assert proc.poll() is None, "the follow only stopped because the command ended"
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
        proc.kill()
        proc.wait()
