"""Following a command's output: lines as they come, and Ctrl-C acted on while it is quiet."""

from __future__ import annotations

import array
import fcntl
import signal
import subprocess
import termios
import threading
import time
from typing import IO

import pytest

from skycore.runner import pipe_lines


def test_lines_come_whole_and_the_last_one_may_lack_its_newline() -> None:
    """The command writes its second part only once the first two lines came through."""
    script = "printf 'a\\nbb\\n'; read -r _; printf 'c\\n'; printf 'last'"
    proc = subprocess.Popen(["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    lines = pipe_lines(proc.stdout)
    assert [next(lines), next(lines)] == [b"a\n", b"bb\n"]
    proc.stdin.write(b"go on\n")
    proc.stdin.close()
    assert list(lines) == [b"c\n", b"last"]
    assert proc.wait() == 0


def _unread(pipe: IO[bytes]) -> int:
    """How many bytes wait in ``pipe`` for its reader."""
    count = array.array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, count)
    return count[0]


def test_a_line_written_in_pieces_comes_whole() -> None:
    """The command writes the next piece only once the reader took the last one (it says
    on stderr when a piece is out; the pipe is empty once the reader took it)."""
    script = "printf 'x'; echo >&2; read -r _; printf 'y'; echo >&2; read -r _; printf 'z\\nq\\n'"
    proc = subprocess.Popen(
        ["bash", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

    def next_piece_once_read() -> None:
        for _ in range(2):
            stderr.readline()
            deadline = time.monotonic() + 60  # a hang guard only
            while _unread(stdout) and time.monotonic() < deadline:
                time.sleep(0.001)
            stdin.write(b"\n")
            stdin.flush()
        stdin.close()

    feeder = threading.Thread(target=next_piece_once_read)
    feeder.start()
    assert list(pipe_lines(stdout)) == [b"xyz\n", b"q\n"]
    feeder.join()
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
