"""Start, health-check and stop the harness's background processes.

Every process is started in its own session (so it outlives the pytest or CLI run that
started it and can be stopped as a group), writes stdout and stderr to one log file, and is
identified by ``(pid, start_time)``: the kernel's start time of the process guards against
stopping an unrelated process that reused a recorded PID.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from skycore.processes import start_detached

LOOPBACK = "127.0.0.1"


class HarnessProcessError(Exception):
    """A harness process could not be started; the message names the cause and the fix."""


@dataclass(frozen=True)
class Proc:
    """A process started by the harness: PID plus the kernel start time that pins it."""

    pid: int
    start_time: int

    def alive(self) -> bool:
        """True while this very process (not a later one with the same PID) runs."""
        return process_start_time(self.pid) == self.start_time


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if there is no such
    process (zombies count as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def free_port(exclude: set[int] | frozenset[int] = frozenset()) -> int:
    """A TCP port on 127.0.0.1 that is free right now.

    It is picked below the kernel's ephemeral range, where outgoing connections never take
    it between this check and the server binding it (the port the kernel hands out for
    ``bind(0)`` is in that range and may be reused by a client socket at once).
    """
    low = _ephemeral_low()
    if low > 12000:
        rng = random.Random()
        for _ in range(200):
            port = rng.randrange(10000, low)
            if port not in exclude and port_is_free(port):
                return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, 0))
            port = int(s.getsockname()[1])
        if port not in exclude:
            return port


def free_ports(n: int, exclude: set[int] | frozenset[int] = frozenset()) -> tuple[int, ...]:
    """``n`` distinct TCP ports on 127.0.0.1 that are free right now, for a server that
    listens on several (its API, admin, cluster ports...).

    Picked like ``free_port``'s, below the kernel's ephemeral range (where no outgoing
    connection takes one before the server binds it), none of them in ``exclude``.
    """
    if n < 0:
        raise ValueError(f"free_ports needs a count of 0 or more, got {n}")
    picked: list[int] = []
    for _ in range(n):
        picked.append(free_port(exclude=set(exclude) | set(picked)))
    return tuple(picked)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for a gate (TCP_NODELAY, inherited by accepted connections)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(512)
    return sock


def is_port_conflict(message: str) -> bool:
    """True if a startup error (with its log tail) says the address was in use."""
    lowered = message.lower()
    return "already in use" in lowered or "eaddrinuse" in lowered


def port_is_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:port. Like the servers themselves, this binds
    with SO_REUSEADDR, so connections of a stopped server in TIME_WAIT do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def wait_port_free(port: int, timeout: float) -> bool:
    """Poll until 127.0.0.1:port is free (a server just stopped may need a moment)."""
    deadline = time.monotonic() + timeout
    while not port_is_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (empty if it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_logged(
    argv: Sequence[str],
    log: IO[bytes],
    timeout: float,
    header: str = "$ ",
    env: Mapping[str, str] | None = None,
) -> int | str:
    """Run ``argv`` to its end (no input), its output appended to the open ``log`` after
    ``header`` and the command line: its exit code, or ``timeout after N s``. An OSError
    (the program cannot start) is raised."""
    log.write(f"{header}{' '.join(argv)}\n".encode())
    log.flush()
    try:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=timeout,
            check=False,
        ).returncode
    except subprocess.TimeoutExpired:
        return f"timeout after {timeout:.0f} s"


def start_process(
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
) -> Proc:
    """Start ``argv`` detached in a new session, appending stdout/stderr to ``log_path``;
    ``pass_fds`` stay open in the child (same numbers)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: {' '.join(argv)}\n".encode())
        log.flush()
        try:
            popen = start_detached(argv, log, full_env, cwd, pass_fds)
        except FileNotFoundError as e:
            raise HarnessProcessError(
                f"Cannot start {argv[0]}: the program does not exist ({e}). Reinstall the "
                "harness dependencies with 'make venv'."
            ) from e
    # Keep the Popen so that a child that dies early (or is stopped by us) gets reaped
    # instead of lingering as a zombie of this process.
    _POPENS[popen.pid] = popen
    start_time = None
    for _ in range(100):
        start_time = process_start_time(popen.pid)
        if start_time is not None or popen.poll() is not None:
            break
        time.sleep(0.01)
    return Proc(popen.pid, start_time if start_time is not None else -1)


_POPENS: dict[int, subprocess.Popen[bytes]] = {}


def exit_code(proc: Proc) -> int | None:
    """The exit code if ``proc`` (started by this process) has exited, else None."""
    popen = _POPENS.get(proc.pid)
    if popen is not None:
        return popen.poll()
    return None if proc.alive() else -1


def http_ok(url: str, timeout: float = 1.0, any_status: bool = False) -> bool:
    """True if ``url`` answers (with 2xx, or with any HTTP status if ``any_status``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= resp.status < 300
    except urllib.error.HTTPError:
        return any_status
    except (OSError, ValueError):
        return False


def wait_healthy(
    name: str,
    proc: Proc,
    check: Callable[[], bool],
    log_path: Path,
    timeout: float,
) -> None:
    """Poll ``check`` until it passes; raise HarnessProcessError (with the log tail) if the
    process exits first or the timeout passes. The caller stops the process on error."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        if check():
            return
        code = exit_code(proc)
        if code is not None:
            raise HarnessProcessError(
                f"{name} exited during startup (exit code {code}). Its log {log_path} ends "
                f"with:\n{log_tail(log_path)}\nFix the cause shown there (a port in use: run "
                "'harness down' or free the port) and start again."
            )
        if time.monotonic() > deadline:
            raise HarnessProcessError(
                f"{name} did not become healthy within {timeout:.0f} s. Its log {log_path} "
                f"ends with:\n{log_tail(log_path)}\nCheck the log, then run 'harness down' "
                "and start again."
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def stop_process(proc: Proc, timeout: float = 5.0) -> bool:
    """Stop ``proc`` and its process group: SIGTERM, then SIGKILL after ``timeout``; return
    once every thread has exited (so its ports are free again).

    Does nothing if the recorded process is gone or its PID now belongs to another process.
    Returns True if the process was running.
    """
    if not proc.alive():
        _reap(proc)
        return False
    _signal_group(proc, signal.SIGTERM)
    if not _wait_gone(proc, timeout):
        _signal_group(proc, signal.SIGKILL)
        _wait_gone(proc, 5.0)
    return True


def _wait_gone(proc: Proc, timeout: float) -> bool:
    """Wait until ``proc`` has exited completely. A multi-threaded process shows as a zombie
    as soon as its main thread ends, while other threads may still hold its sockets."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(proc)
        if not proc.alive() and _threads_done(proc.pid):
            return True
        time.sleep(0.02)
    return False


def _threads_done(pid: int) -> bool:
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (FileNotFoundError, ProcessLookupError):
        return True


def _signal_group(proc: Proc, sig: signal.Signals) -> None:
    # Started with start_new_session: the process leads its own group (pgid == pid).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, sig)


def _reap(proc: Proc) -> None:
    popen = _POPENS.get(proc.pid)
    if popen is not None and popen.poll() is not None:
        _POPENS.pop(proc.pid, None)
