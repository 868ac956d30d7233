"""Starting an emulator and its gate: the emulator sealed in a private network namespace,
its gate (``python -m harness.gate``) joining that namespace and serving on a socket made in
the host's, health checks and the state file. The gate's version (a hash of the code that
runs inside the gate, so a changed gate is restarted and a changed test helper is not) is
harness.emulators.gate_code's."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

import harness
from harness.emulators.gate_client import gate_token
from harness.emulators.gate_code import gate_code_mtime, gate_version
from harness.emulators.preparing import prepare_once
from harness.emulators.records import EmulatorError, EmulatorRecord, save_record
from harness.processes import (
    LOOPBACK,
    HarnessProcessError,
    Proc,
    exit_code,
    free_port,
    http_ok,
    is_port_conflict,
    listening_socket,
    log_tail,
    port_is_free,
    start_process,
    stop_process,
    wait_healthy,
    wait_port_free,
)


class Launchable(Protocol):
    """What starting an emulator and its gate needs of an emulator (its class is a
    harness.emulators.base.RunningEmulator, which uses this module)."""

    store: ClassVar[str]
    persistent: ClassVar[bool]
    startup_timeout: ClassVar[float]
    home: Path
    record: EmulatorRecord

    def __init__(self, home: Path, record: EmulatorRecord) -> None: ...

    @classmethod
    def prepare(cls, home: Path) -> None: ...

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]: ...

    @classmethod
    def gate_protocol(cls) -> object: ...

    @property
    def procs(self) -> tuple[Proc, Proc]: ...


E = TypeVar("E", bound=Launchable)

GATE_MODULE = "harness.gate"
"""Run with ``python -m``: one gate."""


def launch(
    cls: type[E],
    home: Path,
    ports: tuple[int, int] | None = None,
    prefer: tuple[int, int] | None = None,
) -> E:
    """Start the emulator and its gate, wait until both are healthy, record them.

    ``ports`` forces (emulator port, gate port); ``prefer`` is tried if both are free;
    otherwise free ports are picked (and picked again if another process takes one
    first). Raises EmulatorError, leaving nothing running. ``cls.prepare`` runs once per
    process and home (see harness.emulators.preparing): a launch while the set-up's install
    step prepares the same emulator waits for that call.
    """
    prepare_once(cls, home)
    if ports is not None:
        return _launch_on(cls, home, ports)
    if prefer and prefer[0] != prefer[1] and all(port_is_free(p) for p in prefer):
        candidates = prefer
    else:
        port = free_port()
        candidates = (port, free_port(exclude={port}))
    for attempt in range(3):
        try:
            return _launch_on(cls, home, candidates)
        except EmulatorError as e:
            if attempt == 2 or not is_port_conflict(str(e)):
                raise
        port = free_port()
        candidates = (port, free_port(exclude={port}))
    raise AssertionError("unreachable")


def _launch_on(cls: type[E], home: Path, ports: tuple[int, int]) -> E:
    port, gate_port = ports
    for p in ports:
        if not port_is_free(p):
            raise EmulatorError(
                f"Cannot start the {cls.store} emulator: port {p} on {LOOPBACK} is already "
                "in use. Stop whatever listens there (for a stale harness: 'harness down') "
                "or let the harness pick free ports."
            )
    logs = home / "logs"
    log = logs / f"{cls.store}.log"
    gate_log = logs / f"gate-{cls.store}.log"
    gate_state = home / "emulators" / f"{cls.store}-gate-state.json"
    if not cls.persistent:
        gate_state.unlink(missing_ok=True)  # a fresh in-memory emulator has no buckets
    started: list[Proc] = []
    try:
        listener = gate_socket(cls.store, gate_port)
        try:
            argv, env = cls.command(home, port, gate_port)
            upstream = start_process(sealed_argv(argv), log, env=env, cwd=home)
            started.append(upstream)
            gate = start_gate(
                cls.store,
                home,
                port,
                listener,
                gate_state,
                gate_log,
                upstream=upstream,
                timeout=cls.startup_timeout,
                upstream_log=log,
            )
            started.append(gate)
        finally:
            listener.close()
    except HarnessProcessError as e:
        for proc in reversed(started):
            stop_process(proc)
        raise EmulatorError(str(e)) from None
    except BaseException:
        for proc in reversed(started):
            stop_process(proc)
        raise
    record = EmulatorRecord(
        store=cls.store,
        port=port,
        pid=upstream.pid,
        start_time=upstream.start_time,
        gate_port=gate_port,
        gate_pid=gate.pid,
        gate_start_time=gate.start_time,
        log=str(log),
        gate_log=str(gate_log),
        gate_state=str(gate_state),
        started_at=time.time(),
        gate_version=gate_version(cls),
        gate_mtime=gate_code_mtime(cls),
        sealed=True,
    )
    save_record(home, record)
    return cls(home, record)


def restart_gate(emulator: Launchable) -> None:
    """Restart only the gate of ``emulator`` on its port (after its code changed); the
    emulator and the bucket ownership stay, the event log starts empty."""
    r = emulator.record
    if not r.sealed:
        raise EmulatorError(
            f"The {emulator.store} emulator runs in the host network namespace (started by an "
            "older harness); it must be started again, sealed."
        )
    stop_process(emulator.procs[1])
    try:
        if not wait_port_free(r.gate_port, 5.0):
            raise HarnessProcessError(
                f"Cannot restart the {emulator.store} access gate: port {r.gate_port} on "
                f"{LOOPBACK} is in use. Stop whatever listens there."
            )
        listener = gate_socket(emulator.store, r.gate_port)
        try:
            gate = start_gate(
                emulator.store,
                emulator.home,
                r.port,
                listener,
                Path(r.gate_state),
                Path(r.gate_log),
                upstream=emulator.procs[0],
            )
        finally:
            listener.close()
    except (HarnessProcessError, EmulatorError) as e:
        raise EmulatorError(str(e)) from None
    r.gate_pid, r.gate_start_time = gate.pid, gate.start_time
    r.gate_version = gate_version(type(emulator))
    r.gate_mtime = gate_code_mtime(type(emulator))
    save_record(emulator.home, r)


SEAL = 'ip link set lo up && exec "$@"'


def sealed_argv(argv: list[str]) -> list[str]:
    """``argv`` run in a new, private network namespace with only loopback up: nothing
    outside it (the host, nodes with --network host) can connect to it."""
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            raise HarnessProcessError(
                f"Cannot seal the emulator: '{tool}' is not on PATH. Install util-linux and "
                "iproute2 (apt-get install util-linux iproute2)."
            )
    return ["unshare", "--net", "--", "sh", "-c", SEAL, "sh", *argv]


def gate_socket(store: str, gate_port: int) -> socket.socket:
    """The gate's listening socket, made here in the host network namespace."""
    try:
        return listening_socket(LOOPBACK, gate_port)
    except OSError as e:
        raise HarnessProcessError(
            f"Cannot start the {store} access gate: port {gate_port} on {LOOPBACK} is already "
            f"in use ({e}). Stop whatever listens there (for a stale harness: 'harness down')."
        ) from None


def answers_in_namespace(pid: int, port: int, timeout: float) -> bool:
    """True if 127.0.0.1:port answers HTTP inside the network namespace of ``pid``."""
    probe = (
        "import sys,urllib.request,urllib.error\n"
        "try:\n"
        f"    urllib.request.urlopen('http://{LOOPBACK}:{port}/', timeout={timeout})\n"
        "except urllib.error.HTTPError:\n"
        "    pass\n"
        "except Exception:\n"
        "    sys.exit(1)\n"
    )
    argv = ["nsenter", f"--net=/proc/{pid}/ns/net", "--", sys.executable, "-c", probe]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout + 5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def start_gate(
    store: str,
    home: Path,
    port: int,
    listener: socket.socket,
    gate_state: Path,
    gate_log: Path,
    upstream: Proc,
    timeout: float = 30.0,
    upstream_log: Path | None = None,
) -> Proc:
    """Start the gate (``python -m harness.gate``) for ``store`` in the network namespace of the
    ``upstream`` emulator, serving on ``listener`` (a socket of the host namespace), and wait
    until it is healthy (it reaches the emulator). Raises HarnessProcessError (after
    stopping it) if it does not come up."""
    gate_port = int(listener.getsockname()[1])
    fd = listener.fileno()
    _wait_sealed(upstream, store, timeout, upstream_log)
    argv = [
        "nsenter",
        f"--net=/proc/{upstream.pid}/ns/net",
        "--",
        sys.executable,
        "-m",
        GATE_MODULE,
        "--store",
        store,
        "--listen-fd",
        str(fd),
        "--upstream",
        f"http://{LOOPBACK}:{port}",
        "--state",
        str(gate_state),
        "--token-file",
        str(home / "gate-token"),
    ]
    gate_token(home)
    gate = start_process(
        argv, gate_log, env={"PYTHONPATH": harness_pythonpath()}, cwd=home, pass_fds=(fd,)
    )
    health = f"http://{LOOPBACK}:{gate_port}/__gate__/health"
    try:
        wait_healthy(
            f"The {store} access gate",
            gate,
            lambda: _alive_or_raise(upstream, store, upstream_log) and http_ok(health, timeout=1),
            gate_log,
            timeout,
        )
    except HarnessProcessError:
        stop_process(gate)
        # A gate fails at once when its emulator dies under it ('nsenter' finds no namespace
        # to join): that is the emulator's failure, so report it (a process that is exiting
        # can outlive its namespace for a moment, hence the short wait).
        _raise_if_upstream_exits(upstream, store, upstream_log, within=2.0)
        raise
    except BaseException:
        stop_process(gate)
        raise
    return gate


def _raise_if_upstream_exits(upstream: Proc, store: str, log: Path | None, within: float) -> None:
    """Raise the emulator's own startup error if ``upstream`` exits within ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        _alive_or_raise(upstream, store, log)
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _wait_sealed(upstream: Proc, store: str, timeout: float, log: Path | None) -> None:
    """Wait until ``upstream`` has left the host network namespace (``unshare`` has run), so
    that its gate joins the private one and never the host's."""
    ours = os.readlink("/proc/self/ns/net")

    def sealed() -> bool:
        try:
            return os.readlink(f"/proc/{upstream.pid}/ns/net") != ours
        except OSError:
            return False

    wait_healthy(
        f"The {store} emulator (entering its private network namespace)",
        upstream,
        sealed,
        log or Path("/dev/null"),
        timeout,
    )


def _alive_or_raise(upstream: Proc, store: str, log: Path | None) -> bool:
    if exit_code(upstream) is None:
        return True
    tail = f" Its log {log} ends with:\n{log_tail(log)}" if log else ""
    raise HarnessProcessError(
        f"The {store} emulator exited during startup (exit code {exit_code(upstream)}).{tail}"
    )


def harness_pythonpath() -> str:
    """PYTHONPATH for a child running a module of this harness (``python -m harness...``):
    this tree first, whatever the child's working directory."""
    root = str(Path(harness.__file__).resolve().parents[1])
    current = os.environ.get("PYTHONPATH")
    return f"{root}{os.pathsep}{current}" if current else root
