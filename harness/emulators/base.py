"""What every storage emulator of the local cloud has in common.

An emulator is two processes bound to 127.0.0.1: the emulator itself (moto, fake-gcs-server,
Azurite) on an internal port, and an access gate (``python -m harness.gate``) in front of it
on the port users talk to. Their PIDs, ports and logs are recorded in
``$HARNESS_HOME/emulators/<store>.json`` so that later runs reuse them and ``stop`` stops
exactly what was started.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import harness
from harness.accounts import OWNERS, USER
from harness.paths import harness_home_path
from harness.procs import (
    LOOPBACK,
    HarnessProcessError,
    Proc,
    free_port,
    http_ok,
    is_port_conflict,
    port_is_free,
    start_process,
    stop_process,
    wait_healthy,
    wait_port_free,
)


class EmulatorError(Exception):
    """An emulator could not be started or used; the message names the cause and the fix."""


@dataclass(frozen=True)
class WriteEvent:
    """A completed write seen by a gate, in completion order.

    ``op`` is one of put, copy, multipart (S3 CompleteMultipartUpload), resumable, rewrite,
    compose (GCS), commit (Azure Put Block List) or delete. ``size`` is -1 when unknown.
    """

    bucket: str
    key: str
    size: int
    op: str
    t_ns: int


@dataclass
class EmulatorRecord:
    """The state file of one running emulator and its gate."""

    store: str
    port: int
    pid: int
    start_time: int
    gate_port: int
    gate_pid: int
    gate_start_time: int
    log: str
    gate_log: str
    gate_state: str
    started_at: float
    gate_version: str = ""


harness_home = harness_home_path


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


class RunningEmulator(ABC):
    """A running emulator behind its access gate; one subclass per store."""

    store: ClassVar[str]
    """'s3', 'gcs' or 'azure'."""
    startup_timeout: ClassVar[float] = 60.0
    persistent: ClassVar[bool] = False
    """True if the emulator keeps its data across restarts (then so does the gate state)."""

    def __init__(self, home: Path, record: EmulatorRecord) -> None:
        self.home = home
        self.record = record

    # --- addresses and processes ---------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The gate's URL: the endpoint clients use."""
        return f"http://{LOOPBACK}:{self.record.gate_port}"

    @property
    def upstream(self) -> str:
        """The emulator's own URL (behind the gate; tests and clients should not use it)."""
        return f"http://{LOOPBACK}:{self.record.port}"

    @property
    def procs(self) -> tuple[Proc, Proc]:
        """(emulator process, gate process)."""
        r = self.record
        return Proc(r.pid, r.start_time), Proc(r.gate_pid, r.gate_start_time)

    def healthy(self, timeout: float = 2.0) -> bool:
        """Both processes are the recorded ones and the gate reaches the emulator."""
        upstream, gate = self.procs
        return (
            upstream.alive()
            and gate.alive()
            and http_ok(f"{self.endpoint}/__gate__/health", timeout=timeout)
        )

    def upstream_answers(self, timeout: float = 5.0) -> bool:
        """The emulator itself answers HTTP (any status)."""
        return http_ok(f"{self.upstream}/", timeout=timeout, any_status=True)

    def status(self) -> dict[str, Any]:
        """Status for ``harness status``: running?, pids, ports, endpoint, logs."""
        upstream, gate = self.procs
        return {
            "store": self.store,
            "running": self.healthy(),
            "pid": self.record.pid,
            "pid_alive": upstream.alive(),
            "gate_pid": self.record.gate_pid,
            "gate_pid_alive": gate.alive(),
            "endpoint": self.endpoint,
            "upstream": self.upstream,
            "log": self.record.log,
            "gate_log": self.record.gate_log,
        }

    def stop(self) -> None:
        """Stop the gate and the emulator (only the recorded processes) and forget them."""
        upstream, gate = self.procs
        stop_process(gate)
        stop_process(upstream)
        state_file(self.home, self.store).unlink(missing_ok=True)

    # --- how to start one (per store) ----------------------------------------------------

    @classmethod
    @abstractmethod
    def prepare(cls, home: Path) -> None:
        """Install or locate what the emulator needs (before any port is taken); raise
        EmulatorError naming what is missing and how to get it."""

    @classmethod
    @abstractmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment of the emulator process."""

    @classmethod
    def launch(
        cls, home: Path, ports: tuple[int, int] | None = None, prefer: tuple[int, int] | None = None
    ) -> RunningEmulator:
        """Start the emulator and its gate, wait until both are healthy, record them.

        ``ports`` forces (emulator port, gate port); ``prefer`` is tried if both are free;
        otherwise free ports are picked (and picked again if another process takes one
        first). Raises EmulatorError, leaving nothing running.
        """
        cls.prepare(home)
        if ports is not None:
            return cls._launch_on(home, ports)
        if prefer and prefer[0] != prefer[1] and all(port_is_free(p) for p in prefer):
            candidates = prefer
        else:
            port = free_port()
            candidates = (port, free_port(exclude={port}))
        for attempt in range(3):
            try:
                return cls._launch_on(home, candidates)
            except EmulatorError as e:
                if attempt == 2 or not is_port_conflict(str(e)):
                    raise
            port = free_port()
            candidates = (port, free_port(exclude={port}))
        raise AssertionError("unreachable")

    @classmethod
    def _launch_on(cls, home: Path, ports: tuple[int, int]) -> RunningEmulator:
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
            argv, env = cls.command(home, port, gate_port)
            upstream = start_process(argv, log, env=env, cwd=home)
            started.append(upstream)
            wait_healthy(
                f"The {cls.store} emulator ({Path(argv[0]).name})",
                upstream,
                lambda: http_ok(f"http://{LOOPBACK}:{port}/", timeout=1, any_status=True),
                log,
                cls.startup_timeout,
            )
            gate = _start_gate(cls.store, home, port, gate_port, gate_state, gate_log)
            started.append(gate)
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
            gate_version=gate_version(),
        )
        _write_json(state_file(home, cls.store), asdict(record))
        return cls(home, record)

    def restart_gate(self) -> None:
        """Restart only the gate on its port (after its code changed); the emulator and the
        bucket ownership stay, the event log starts empty."""
        r = self.record
        stop_process(self.procs[1])
        try:
            gate = _start_gate(
                self.store, self.home, r.port, r.gate_port, Path(r.gate_state), Path(r.gate_log)
            )
        except HarnessProcessError as e:
            raise EmulatorError(str(e)) from None
        r.gate_pid, r.gate_start_time, r.gate_version = gate.pid, gate.start_time, gate_version()
        _write_json(state_file(self.home, self.store), asdict(r))

    @classmethod
    def load(cls, home: Path) -> RunningEmulator | None:
        """The emulator recorded in ``home`` (running or not), or None if none is."""
        path = state_file(home, cls.store)
        try:
            data = json.loads(path.read_text())
            return cls(home, EmulatorRecord(**data))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    # --- the gate's admin API ------------------------------------------------------------

    def _admin(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.endpoint}/__gate__/{route}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise EmulatorError(
                f"The {self.store} access gate refused {method} /__gate__/{route}: {e.code} "
                f"{detail}"
            ) from e
        except (urllib.error.URLError, OSError) as e:
            raise EmulatorError(
                f"The {self.store} access gate at {self.endpoint} does not answer ({e}). "
                f"See {self.record.gate_log}; restart the local cloud with 'harness up'."
            ) from e

    def set_bucket_access(self, name: str, owner: str = USER, public: bool = False) -> None:
        """Tell the gate who owns bucket ``name`` and whether it is public."""
        if owner not in OWNERS:
            raise ValueError(f"owner must be one of {OWNERS}, not {owner!r}")
        self._admin("POST", "buckets", {"bucket": name, "owner": owner, "public": public})

    def bucket_owner(self, name: str) -> str | None:
        """The owner of ``name`` as recorded by the gate (None if unknown)."""
        info = self._admin("GET", "buckets").get(name)
        return info["owner"] if info else None

    def events(self, bucket: str) -> list[WriteEvent]:
        """Completed writes to ``bucket`` recorded by the gate, in completion order."""
        from urllib.parse import quote

        rows = self._admin("GET", f"events?bucket={quote(bucket)}")
        return [WriteEvent(**row) for row in rows]

    # --- per store -----------------------------------------------------------------------

    @abstractmethod
    def config_section(self) -> Any:
        """The skycore.config section (AwsConfig / GcpConfig / AzureConfig) of the user."""

    @abstractmethod
    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        """Create bucket ``name`` owned by ``owner`` (public or private), fill it with
        ``objects`` and return its URL (s3://, gs://, azure://account/...)."""

    @abstractmethod
    def delete_bucket(self, name: str) -> None:
        """Delete bucket ``name`` and everything in it (no error if it does not exist)."""

    @abstractmethod
    def client(self, owner: str | None = USER) -> Any:
        """An SDK client through the gate for ``owner`` ('user' / 'other'; None: anonymous)."""


def state_file(home: Path, store: str) -> Path:
    """``$HARNESS_HOME/emulators/<store>.json``."""
    return home / "emulators" / f"{store}.json"


def gate_version() -> str:
    """A hash of the gate's code: a running gate with another version is restarted."""
    digest = hashlib.sha256()
    for name in ("gate.py", "gate_rules.py", "accounts.py"):
        digest.update((Path(harness.__file__).parent / name).read_bytes())
    return digest.hexdigest()[:16]


def _start_gate(
    store: str, home: Path, port: int, gate_port: int, gate_state: Path, gate_log: Path
) -> Proc:
    """Start ``python -m harness.gate`` for ``store`` and wait until it is healthy.
    Raises HarnessProcessError (after stopping it) if it does not come up."""
    if not wait_port_free(gate_port, 5.0):
        raise HarnessProcessError(
            f"Cannot start the {store} access gate: port {gate_port} on {LOOPBACK} is already "
            "in use. Stop whatever listens there (for a stale harness: 'harness down')."
        )
    argv = [
        sys.executable,
        "-m",
        "harness.gate",
        "--store",
        store,
        "--listen",
        f"{LOOPBACK}:{gate_port}",
        "--upstream",
        f"http://{LOOPBACK}:{port}",
        "--state",
        str(gate_state),
    ]
    gate = start_process(argv, gate_log, env={"PYTHONPATH": _pythonpath()}, cwd=home)
    try:
        wait_healthy(
            f"The {store} access gate",
            gate,
            lambda: http_ok(f"http://{LOOPBACK}:{gate_port}/__gate__/health", timeout=1),
            gate_log,
            30.0,
        )
    except BaseException:
        stop_process(gate)
        raise
    return gate


def _pythonpath() -> str:
    root = str(Path(harness.__file__).resolve().parents[1])
    current = os.environ.get("PYTHONPATH")
    return f"{root}{os.pathsep}{current}" if current else root


def installing_notice(message: str) -> None:
    """Tell the person at the terminal, even under pytest's output capture."""
    stream = sys.__stderr__ or sys.stderr
    with contextlib.suppress(OSError):
        stream.write(f"harness: {message}\n")
        stream.flush()
