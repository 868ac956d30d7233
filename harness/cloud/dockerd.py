"""The Docker engine the nodes run on: reuse one that answers, else start a private dockerd.

A private engine runs with ``--bridge=none --iptables=false --ip6tables=false`` (nodes use
host networking; no docker network is ever created), its own data root under
``$HARNESS_HOME/docker`` and its own socket. Only an engine we started is ever stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
from docker.errors import DockerException

from harness.errors import CloudError
from harness.paths import harness_home
from skycore.processes import pid_alive

DEFAULT_HOST = "unix:///var/run/docker.sock"
START_TIMEOUT_S = 60.0


@dataclass
class EngineState:
    """What we know of the engine: its host URL and, if we started it, its PID and log."""

    host: str
    pid: int | None = None
    log: str | None = None
    data_root: str | None = None


def _state_file() -> Path:
    path = harness_home() / "docker"
    path.mkdir(parents=True, exist_ok=True)
    return path / "state.json"


def _read_state() -> EngineState | None:
    try:
        return EngineState(**json.loads(_state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def answers(host: str, timeout: float = 3.0) -> bool:
    """True if a Docker engine answers a ping at ``host``."""
    if host.startswith("unix://") and not Path(host[len("unix://") :]).exists():
        return False
    try:
        client = docker.DockerClient(base_url=host, version="auto", timeout=int(timeout) or 1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (DockerException, OSError):
        return False


def current() -> EngineState | None:
    """The engine the harness uses, if it answers now."""
    state = _read_state()
    if state and answers(state.host):
        return state
    return None


def ensure_dockerd(say: Callable[[str], None] = print) -> str:
    """Return the docker host URL of a running engine, starting a private one if needed."""
    state = current()
    if state:
        return state.host
    env_host = os.environ.get("DOCKER_HOST")
    for host in [h for h in (env_host, DEFAULT_HOST) if h]:
        if answers(host):
            _state_file().write_text(json.dumps(asdict(EngineState(host=host))))
            return host
    return _start_private(say)


def _start_private(say: Callable[[str], None]) -> str:
    binary = shutil.which("dockerd", path=os.environ.get("PATH", "") + ":/usr/sbin")
    if not binary:
        raise CloudError(
            "dockerd is not installed. Run 'harness up' as root (it installs Debian's docker.io) "
            "or 'apt-get install -y docker.io'."
        )
    if os.geteuid() != 0:
        raise CloudError("Starting dockerd needs root. Run 'harness up' as root.")
    base = harness_home() / "docker"
    data_root = base / "root"
    data_root.mkdir(parents=True, exist_ok=True)
    # exec-root holds containerd's sockets: keep its path short (unix socket limit).
    tag = hashlib.sha256(str(base).encode()).hexdigest()[:8]
    exec_root = Path(f"/run/skycore-docker-{tag}")
    sock = exec_root / "docker.sock"
    host = f"unix://{sock}"
    log_path = base / "dockerd.log"
    stale = _read_state()
    if stale and stale.pid and pid_alive(stale.pid):
        # Our own engine from before, still alive but not answering: stop it first.
        _terminate(stale.pid)
    cmd = [
        binary,
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-forward=false",
        "--ip-masq=false",
        f"--data-root={data_root}",
        f"--exec-root={exec_root}",
        f"--pidfile={base / 'dockerd.pid'}",
        f"--host={host}",
    ]
    say("Starting a private dockerd (bridge off, host networking only)...")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if answers(host):
            _state_file().write_text(
                json.dumps(
                    asdict(
                        EngineState(
                            host=host, pid=proc.pid, log=str(log_path), data_root=str(data_root)
                        )
                    )
                )
            )
            say(f"dockerd is up (pid {proc.pid}, {host}).")
            return host
        time.sleep(0.3)
    if proc.poll() is None:
        _terminate(proc.pid)
    tail = _tail(log_path)
    raise CloudError(
        f"dockerd did not come up within {START_TIMEOUT_S:.0f} s (exit {proc.poll()}). Last lines "
        f"of {log_path}: {tail}. Fix the cause shown (another dockerd on the same data root, "
        "missing kernel features) and run 'harness up' again."
    )


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _terminate(pid: int, timeout: float = 20.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.2)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def stop_dockerd(say: Callable[[str], None] = print) -> bool:
    """Stop the engine only if the harness started it; True if something was stopped."""
    state = _read_state()
    if not state or not state.pid:
        return False
    if pid_alive(state.pid):
        say(f"Stopping the private dockerd (pid {state.pid})...")
        _terminate(state.pid)
    _state_file().unlink(missing_ok=True)
    return True


def client(host: str) -> docker.DockerClient:
    """A docker SDK client for ``host`` (API version negotiated with the server)."""
    return docker.DockerClient(base_url=host, version="auto", timeout=120)
