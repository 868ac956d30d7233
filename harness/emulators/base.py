"""What every storage emulator of the local cloud has in common.

An emulator is two processes bound to 127.0.0.1: the emulator itself on an internal port,
and an access gate (``python -m harness.gate``) in front of it on the port users talk to.
Their PIDs, ports and logs are recorded in ``$HARNESS_HOME/emulators/<store>.json`` so that
later runs reuse them and ``stop`` stops exactly what was started.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
    log_tail,
    port_is_free,
    start_process,
    stop_process,
    wait_healthy,
    wait_port_free,
)

if TYPE_CHECKING:
    from harness.gate_protocol import GateProtocol

CAPABILITIES = ("records_events",)
"""What an emulator may lack; a test that needs one is skipped (with the reason) where it
is missing."""


class EmulatorError(Exception):
    """An emulator could not be started or used; the message names the cause and the fix."""


@dataclass(frozen=True)
class WriteEvent:
    """A completed write seen by a gate, in completion order.

    ``op`` names the kind of write in the protocol's terms (put, copy, multipart,
    resumable, rewrite, compose, commit, delete...). ``size`` is -1 when unknown.
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
    gate_mtime: float = 0.0
    """The newest modification time of the running gate's code (see gate_code_mtime)."""
    sealed: bool = False
    """The emulator runs in a private network namespace (only its gate reaches it)."""


harness_home = harness_home_path


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


class RunningEmulator(ABC):
    """A running emulator behind its access gate; one subclass per store, in its own module
    of harness/emulators/ (or of a plug-in package), registered under the entry-point group
    ``harness.emulators`` with the store's name."""

    store: ClassVar[str]
    """The store's name, the same as in skycore's store registry."""
    cli_alias: ClassVar[str | None] = None
    """A pytest option and marker naming this store by its cloud (``--<alias>``), also the
    test id of its parameters; the store name when None."""
    public_dataset: ClassVar[str]
    """The seeded public bucket owned by the other account (public-not-by-user)."""
    implementation: ClassVar[str] = "emulator"
    """What serves the store behind the gate, named in harness status (e.g. moto)."""
    startup_timeout: ClassVar[float] = 60.0
    persistent: ClassVar[bool] = False
    """True if the emulator keeps its data across restarts (then so does the gate state)."""
    needs_node: ClassVar[bool] = False
    """True if installing the emulator needs Node.js and npm on the machine."""
    records_events: ClassVar[bool] = True
    """Capability: the gate records every completed write (bucket, key, size, time)."""
    invalid_credentials_status: ClassVar[int] = 403
    """The HTTP status the real service answers to credentials it does not know (an unknown
    access key: 403; an invalid OAuth token: 401)."""
    public_read_ignores_bad_credentials: ClassVar[bool] = False
    """True if the emulator serves a public bucket to a caller with wrong credentials (as
    the real service does), instead of refusing the credentials."""

    @classmethod
    def marker(cls) -> str:
        """The pytest marker and test id of this store."""
        return cls.cli_alias or cls.store

    @classmethod
    def supports(cls, capability: str) -> bool:
        """True if the emulator has ``capability`` (one of CAPABILITIES)."""
        if capability not in CAPABILITIES:
            raise ValueError(
                f"Unknown emulator capability {capability!r}; known: {', '.join(CAPABILITIES)}."
            )
        return bool(getattr(cls, capability))

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
        """The emulator itself answers HTTP (any status), asked from inside its namespace."""
        if not self.record.sealed:
            return http_ok(f"{self.upstream}/", timeout=timeout, any_status=True)
        return _answers_in_namespace(self.record.pid, self.record.port, timeout)

    def status(self) -> dict[str, Any]:
        """Status for ``harness status``: running?, pids, ports, endpoint, logs."""
        upstream, gate = self.procs
        return {
            "store": self.store,
            "implementation": self.implementation,
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
            listener = _gate_socket(cls.store, gate_port)
            try:
                argv, env = cls.command(home, port, gate_port)
                upstream = start_process(sealed_argv(argv), log, env=env, cwd=home)
                started.append(upstream)
                gate = _start_gate(
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
        _write_json(state_file(home, cls.store), asdict(record))
        return cls(home, record)

    def restart_gate(self) -> None:
        """Restart only the gate on its port (after its code changed); the emulator and the
        bucket ownership stay, the event log starts empty."""
        r = self.record
        if not r.sealed:
            raise EmulatorError(
                f"The {self.store} emulator runs in the host network namespace (started by an "
                "older harness); it must be started again, sealed."
            )
        stop_process(self.procs[1])
        try:
            if not wait_port_free(r.gate_port, 5.0):
                raise HarnessProcessError(
                    f"Cannot restart the {self.store} access gate: port {r.gate_port} on "
                    f"{LOOPBACK} is in use. Stop whatever listens there."
                )
            listener = _gate_socket(self.store, r.gate_port)
            try:
                gate = _start_gate(
                    self.store,
                    self.home,
                    r.port,
                    listener,
                    Path(r.gate_state),
                    Path(r.gate_log),
                    upstream=self.procs[0],
                )
            finally:
                listener.close()
        except (HarnessProcessError, EmulatorError) as e:
            raise EmulatorError(str(e)) from None
        r.gate_pid, r.gate_start_time = gate.pid, gate.start_time
        r.gate_version = gate_version(type(self))
        r.gate_mtime = gate_code_mtime(type(self))
        _write_json(state_file(self.home, self.store), asdict(r))

    @classmethod
    def load(cls, home: Path) -> RunningEmulator | None:
        """The emulator recorded in ``home`` (running or not), or None if none is."""
        path = state_file(home, cls.store)
        try:
            data = json.loads(path.read_text())
            # Fields of another harness version are ignored (a record it cannot read would
            # make this process start a second emulator beside the recorded one).
            known = {f.name for f in fields(EmulatorRecord)}
            return cls(home, EmulatorRecord(**{k: v for k, v in data.items() if k in known}))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    # --- the gate's admin API ------------------------------------------------------------

    def _admin(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.endpoint}/__gate__/{route}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **self.admin_headers()},
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

    def admin_headers(self) -> dict[str, str]:
        """The header that opens the gate's admin API (the token in the harness home)."""
        return {"X-Gate-Token": gate_token(self.home)}

    # --- injected faults (harness.gate_faults) -------------------------------------------

    def add_fault(self, kind: str, **options: Any) -> dict[str, Any]:
        """Start a fault in this store's gate (outage, errors, latency, bandwidth, reset,
        deny; options seconds, rate, status, ms, mibps, bucket, method; no seconds: until
        cleared). Returns the fault as the gate shows it (its ``id`` clears it)."""
        body = {"kind": kind, **{k: v for k, v in options.items() if v is not None}}
        return dict(self._admin("POST", "faults", body))

    def clear_faults(self, fault_id: int | None = None, bucket: str | None = None) -> list[Any]:
        """End every fault (or one, or those scoped to ``bucket``); the faults ended."""
        from urllib.parse import urlencode

        query = urlencode(
            {k: v for k, v in (("id", fault_id), ("bucket", bucket)) if v is not None}
        )
        return list(self._admin("DELETE", f"faults?{query}" if query else "faults"))

    def faults(self) -> list[dict[str, Any]]:
        """The faults active now."""
        return list(self._admin("GET", "faults"))

    def fault_log(self, bucket: str | None = None) -> list[dict[str, Any]]:
        """Every fault start and end (``phase``, ``t_ns``, the fault's fields), oldest first;
        with ``bucket``: the faults on that bucket and those on every bucket."""
        from urllib.parse import quote

        route = f"faults/log?bucket={quote(bucket)}" if bucket else "faults/log"
        return list(self._admin("GET", route))

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
        """Completed writes to ``bucket`` recorded by the gate, in completion order. Raises
        EmulatorError if this emulator does not record events (never an empty list)."""
        from urllib.parse import quote

        if not self.records_events:
            raise EmulatorError(
                f"The {self.store} emulator does not record write events (capability "
                "records_events); a test that needs them must require that capability."
            )
        rows = self._admin("GET", f"events?bucket={quote(bucket)}")
        return [WriteEvent(**row) for row in rows]

    # --- per store ----------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def gate_protocol(cls) -> GateProtocol:
        """How the gate reads this store's API (identities, access, errors, events)."""

    @classmethod
    @abstractmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        """The exception types the SDK behind :meth:`client` raises for a refused request."""

    @abstractmethod
    def config_section(self) -> Any:
        """The user's skycore config section (the store's config model) for this emulator."""

    @abstractmethod
    def client(self, owner: str | None = USER) -> Any:
        """An SDK client through the gate for ``owner`` (user, other or unknown; None:
        anonymous)."""

    @abstractmethod
    def bucket_url(self, name: str, owner: str = USER) -> str:
        """The URL a task uses for bucket ``name`` owned by ``owner``."""

    @abstractmethod
    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        """Create bucket ``name`` owned by ``owner`` (public or private), fill it with
        ``objects`` and return its URL (:meth:`bucket_url`)."""

    @abstractmethod
    def delete_bucket(self, name: str) -> None:
        """Delete bucket ``name`` and everything in it (no error if it does not exist)."""

    @abstractmethod
    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        """True if ``owner`` has a bucket called ``name``."""

    @abstractmethod
    def list_keys(self, bucket: str, owner: str | None = USER) -> list[str]:
        """Every key of ``bucket``, sorted, listed with ``owner``'s credentials."""

    @abstractmethod
    def read_object(self, bucket: str, key: str, owner: str | None = USER) -> bytes:
        """The content of ``key`` in ``bucket``, read with ``owner``'s credentials."""

    @abstractmethod
    def write_object(self, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
        """Write ``data`` to ``key`` in ``bucket`` with ``owner``'s credentials."""

    @abstractmethod
    def delete_object(self, bucket: str, key: str, owner: str | None = USER) -> None:
        """Delete ``key`` from ``bucket`` with ``owner``'s credentials."""

    @abstractmethod
    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        """An rclone.conf section named ``remote`` reaching this emulator through the gate
        as ``owner`` (None: anonymous), able to reach ``bucket`` when given."""


def state_file(home: Path, store: str) -> Path:
    """``$HARNESS_HOME/emulators/<store>.json``."""
    return home / "emulators" / f"{store}.json"


GATE_FILES = (
    "gate.py",
    "gate_rules.py",
    "gate_protocol.py",
    "gate_state.py",
    "gate_faults.py",
    "accounts.py",
)


def _gate_files(emulator: type[RunningEmulator]) -> list[Path]:
    root = Path(harness.__file__).parent
    files = [root / name for name in GATE_FILES]
    for cls in emulator.__mro__:
        if cls.__module__.split(".")[0] in sys.stdlib_module_names:
            continue
        module = sys.modules.get(cls.__module__)
        if module is not None and getattr(module, "__file__", None):
            files.append(Path(str(module.__file__)))
    return files


def gate_code_mtime(emulator: type[RunningEmulator]) -> float:
    """The newest modification time of the gate's code for ``emulator``: a caller whose code
    is older than the running gate's (a long-running process that loaded the harness before
    an edit) never restarts it, so two versions cannot restart each other's gate in turn."""
    return max((p.stat().st_mtime for p in _gate_files(emulator) if p.exists()), default=0.0)


def gate_version(emulator: type[RunningEmulator]) -> str:
    """A hash of the gate's code for ``emulator`` (the shared gate modules and the modules of
    the emulator's classes, where its protocol lives): a running gate with another version
    is restarted."""
    digest = hashlib.sha256()
    for path in _gate_files(emulator):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def gate_token(home: Path) -> str:
    """The token of the gates' admin API: ``$HARNESS_HOME/gate-token`` (mode 0600), made
    once. Only the harness reads it; nodes never receive it."""
    path = home / "gate-token"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    # A unique temporary file (mode 0600): emulators start side by side in threads of one
    # process, so a name made of the pid alone was shared, and one thread's cleanup removed
    # the file another was about to link.
    fd, tmp_name = tempfile.mkstemp(prefix=".gate-token.", dir=home)
    tmp = Path(tmp_name)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    with contextlib.suppress(FileExistsError):
        os.link(tmp, path)  # the first writer wins; everyone reads the same token
    tmp.unlink(missing_ok=True)
    return path.read_text().strip()


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


def _gate_socket(store: str, gate_port: int) -> socket.socket:
    """The gate's listening socket, made here in the host network namespace."""
    from harness.gate import listening_socket

    try:
        return listening_socket(LOOPBACK, gate_port)
    except OSError as e:
        raise HarnessProcessError(
            f"Cannot start the {store} access gate: port {gate_port} on {LOOPBACK} is already "
            f"in use ({e}). Stop whatever listens there (for a stale harness: 'harness down')."
        ) from None


def _answers_in_namespace(pid: int, port: int, timeout: float) -> bool:
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


def _start_gate(
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
    """Start ``python -m harness.gate`` for ``store`` in the network namespace of the
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
        "harness.gate",
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
        argv, gate_log, env={"PYTHONPATH": _pythonpath()}, cwd=home, pass_fds=(fd,)
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
    from harness.procs import _exited

    if _exited(upstream) is None:
        return True

    tail = f" Its log {log} ends with:\n{log_tail(log)}" if log else ""
    raise HarnessProcessError(
        f"The {store} emulator exited during startup (exit code {_exited(upstream)}).{tail}"
    )


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
