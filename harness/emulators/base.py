"""The contract of a storage emulator of the local cloud (the part every store implements).

An emulator is two processes bound to 127.0.0.1: the emulator itself on an internal port,
and an access gate (``python -m harness.gate``) in front of it on the port users talk to.
Their PIDs, ports and logs are recorded in ``$HARNESS_HOME/emulators/<store>.json`` so that
later runs reuse them and ``stop`` stops exactly what was started. Starting them is
harness.emulators.launcher's job, talking to the gate harness.emulators.gate_client's.
"""

from __future__ import annotations

import contextlib
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness import emulator_registry as registry
from harness.accounts import USER
from harness.emulators import launcher, old_signatures
from harness.emulators.deviations import Deviation
from harness.emulators.gate_client import GateClient
from harness.emulators.records import EmulatorError, EmulatorRecord, WriteEvent, state_file
from harness.gate.access_features import AccessFeatures
from harness.processes import LOOPBACK, Proc, http_ok, stop_process

if TYPE_CHECKING:
    from harness.gate.protocol import GateProtocol
    from harness.targets import Target

__all__ = [
    "CAPABILITIES",
    "AccessFeatures",
    "Deviation",
    "EmulatorError",
    "EmulatorRecord",
    "PublicAccessUnavailable",
    "RunningEmulator",
    "WriteEvent",
    "installing_notice",
    "no_other_account",
    "state_file",
]

CAPABILITIES = ("records_events",)
"""What an emulator may lack; a test that needs one is skipped (with the reason) where it
is missing."""


class PublicAccessUnavailable(EmulatorError):
    """The harness cannot make a bucket public here (the store does it only outside its
    API, e.g. in a dashboard, and the run is against a target); the message names the fix.
    Test helpers skip with it."""


class RunningEmulator(GateClient, ABC):
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
    contract_probes: ClassVar[str | None] = None
    """The module of the emulator contract's probes for this API (a ``Probes`` class and its
    ``RELIANCE`` table); None: no probes, and test_emulator_contract is skipped saying so."""
    known_deviations: ClassVar[tuple[Deviation, ...]] = ()
    """Contract checks the server is known to fail, and why (harness.plugin_api.Deviation):
    reported in the run's summary instead of failing; one that passes fails."""
    is_the_product: ClassVar[bool] = False
    """True if the emulator runs the store's own server (not a stand-in): a failed contract
    check is then a finding about the store, and no test is skipped for it."""
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
    denial_status: ClassVar[int] = 403
    """The HTTP status of a request the access rules refuse (S3, GCS: 403; Azure answers an
    anonymous caller 404, as for a container that does not exist)."""
    public_read_ignores_bad_credentials: ClassVar[bool] = False
    """True if the emulator serves a public bucket to a caller with wrong credentials (as
    the real service does), instead of refusing the credentials."""
    access_features: ClassVar[AccessFeatures] = AccessFeatures(frozenset())
    """The access mechanisms the store has (harness.gate.access_features): its gate
    enforces these only, and :meth:`make_public` uses them. Every store declares its own
    (S3Emulator: S3's, which its subclasses inherit)."""

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

    comp_test: ClassVar[Path | None] = None
    """The store's own comp test YAML (shipped as package data); None: a
    ``comp_test_<store>.yaml`` beside the emulator's module, else the built-in
    harness/conformance/fixtures/comp_test_<store>.yaml, else comp_test.yaml's part for the
    store."""

    target: Target | None = None
    """Set on an emulator attached to a target file (:meth:`attach`): its helpers then reach
    the target's endpoint with the target's accounts, and the gate's admin API is gone."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        old_signatures.adapt(cls)

    def __init__(self, home: Path, record: EmulatorRecord) -> None:
        self.home = home
        self.record = record

    @classmethod
    def attach(cls, target: Target) -> RunningEmulator:
        """This store's helpers (client, make_bucket, list_keys, ...) pointed at ``target``
        (a real endpoint, or the local gate as an outsider sees it) instead of a running
        emulator: no processes, no admin API, no events, no faults."""
        emulator = cls.__new__(cls)
        emulator.home = Path("/nonexistent-harness-home")
        emulator.record = None  # type: ignore[assignment]
        emulator.target = target
        emulator.use_target(target)
        return emulator

    def use_target(self, target: Target) -> None:
        """Take the endpoint and the accounts' credentials from ``target`` (per store: its
        ``target.section(USER)`` and, when ``target.has_other``, ``target.section(OTHER)``)."""
        raise EmulatorError(
            f"{type(self).__name__} cannot run against a target file: it does not implement "
            "use_target (docs/conformance.md)."
        )

    @abstractmethod
    def list_buckets(self, owner: str = USER) -> dict[str, float]:
        """``owner``'s buckets: name -> creation time (Unix seconds), from the store's API."""

    # --- addresses and processes ---------------------------------------------------------

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
        return launcher.answers_in_namespace(self.record.pid, self.record.port, timeout)

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
        return launcher.launch(cls, home, ports, prefer)

    def restart_gate(self) -> None:
        """Restart only the gate on its port (after its code changed); the emulator and the
        bucket ownership stay, the event log starts empty."""
        launcher.restart_gate(self)

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
    def config_section(self, owner: str = USER) -> Any:
        """``owner``'s skycore config section (the store's config model) for this emulator:
        the user's goes into ~/.skycore/config.yaml, both into ``harness target``'s file."""

    @abstractmethod
    def client(self, owner: str | None = USER) -> Any:
        """An SDK client through the gate for ``owner`` (user, other or unknown; None:
        anonymous)."""

    @abstractmethod
    def bucket_url(self, name: str, owner: str = USER) -> str:
        """The URL a task uses for bucket ``name`` owned by ``owner``."""

    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        """Create bucket ``name`` owned by ``owner`` (public or private), fill it with
        ``objects`` and return its URL (:meth:`bucket_url`). Built on :meth:`create_bucket`;
        an emulator may override either."""
        put = self.create_bucket(name, owner, public)
        for key, data in (objects or {}).items():
            put(key, data)
        return self.bucket_url(name, owner)

    def create_bucket(self, name: str, owner: str, public: bool) -> Callable[[str, bytes], None]:
        """Create bucket ``name`` owned by ``owner`` (public or private, the gate told so);
        returns what writes one object into it."""
        raise NotImplementedError(
            f"{type(self).__name__} overrides neither make_bucket nor create_bucket"
        )

    def make_public(self, name: str, owner: str = USER) -> None:
        """Make ``owner``'s bucket ``name`` readable and listable by everyone, the store's
        way (S3: DeletePublicAccessBlock and a public-read bucket policy). Raises
        PublicAccessUnavailable where the harness cannot (naming what the user must do)."""
        raise NotImplementedError(
            f"{type(self).__name__} makes buckets public in create_bucket only; it does not "
            "implement make_public"
        )

    def check_public_possible(self) -> None:
        """Raise PublicAccessUnavailable (naming the fix) if this run cannot make a bucket
        public through the store's API; nothing otherwise. Called before any bucket is made,
        so that a test skips with nothing to clean up."""

    def is_public(self, name: str, owner: str = USER) -> bool:
        """True if everyone may read and list ``owner``'s bucket ``name``, asked the way
        :meth:`make_public` made it so."""
        raise NotImplementedError(f"{type(self).__name__} does not implement is_public")

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


registry.register_contract(RunningEmulator)


def no_other_account(emulator: RunningEmulator, owner: str) -> EmulatorError:
    """The error of a helper asked to act as an account the target file does not name."""
    path = emulator.target.path if emulator.target is not None else None
    return EmulatorError(
        f"There is no {owner} account in the target file {path}: the {emulator.store} "
        f"helpers cannot act as '{owner}'. Add an '{owner}' section to the file (the same "
        f"fields as its 'user' section, for an account of its own), or run only the tests that "
        f"need no {owner} account."
    )


def installing_notice(message: str) -> None:
    """Tell the person at the terminal, even under pytest's output capture."""
    stream = sys.__stderr__ or sys.stderr
    with contextlib.suppress(OSError):
        stream.write(f"harness: {message}\n")
        stream.flush()
