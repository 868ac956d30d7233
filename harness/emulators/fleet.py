"""The storage emulators of the local cloud, each behind its access gate.

``start_all()`` starts (or reuses) them, ``stop_all()`` stops what it started,
``status_all()`` reports. An emulator is one module of harness/emulators/ (or of a store
package), found through harness.emulator_registry under the store's name; its store is one
module in skycore/storage.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from harness import emulator_registry as registry
from harness.emulators.base import CAPABILITIES, RunningEmulator
from harness.emulators.gate_code import gate_code_mtime, gate_version
from harness.emulators.preparing import prepare_once
from harness.emulators.records import EmulatorError, WriteEvent, state_file
from harness.paths import harness_home
from harness.processes import stop_process

LOCK_TIMEOUT = 900.0

__all__ = [
    "CAPABILITIES",
    "EmulatorError",
    "RunningEmulator",
    "WriteEvent",
    "emulator_class",
    "get",
    "prepare_all",
    "start_all",
    "status_all",
    "stop_all",
    "stop_one",
    "stores",
]


def _lock(home: Path) -> FileLock:
    home.mkdir(parents=True, exist_ok=True)
    return FileLock(str(home / "emulators.lock"), timeout=LOCK_TIMEOUT)


@contextlib.contextmanager
def _holding_lock(home: Path, doing: str) -> Iterator[None]:
    """The emulators' lock held while ``doing``; EmulatorError if another process holds it
    too long."""
    try:
        with _lock(home):
            yield
    except Timeout:
        raise EmulatorError(
            f"Another process has held {home / 'emulators.lock'} for {LOCK_TIMEOUT:.0f} s while "
            f"{doing}. Wait for it to finish, or stop it and start again."
        ) from None


def stores() -> tuple[str, ...]:
    """Every registered store."""
    return registry.store_names()


def emulator_class(store: str) -> type[RunningEmulator]:
    """The emulator class of ``store`` (EmulatorError naming it if none is registered)."""
    try:
        return registry.get_emulator_class(store)
    except registry.UnknownEmulatorError as e:
        raise EmulatorError(str(e)) from None


def _check_stores(wanted: tuple[str, ...] | list[str]) -> None:
    for store in wanted:
        emulator_class(store)


def _start_one(home: Path, store: str) -> RunningEmulator:
    cls = emulator_class(store)
    old = cls.load(home)
    if old is not None and not old.record.sealed:
        old.stop()  # started by an older harness in the host network namespace: reseal it
        return cls.launch(home, prefer=(old.record.port, old.record.gate_port))
    if old is not None and _healthy_or_busy(old):
        if old.record.gate_version != gate_version(cls) and (
            gate_code_mtime(cls) >= old.record.gate_mtime
        ):
            old.restart_gate()  # the gate's code changed since it started
        return old
    if old is not None and old.procs[0].alive() and old.upstream_answers():
        old.restart_gate()  # only the gate died: keep the emulator and its buckets
        return old
    prefer = None
    if old is not None:  # dead or half-dead: stop what is left, restart on the same ports
        for proc in reversed(old.procs):
            stop_process(proc)
        prefer = (old.record.port, old.record.gate_port)
    return cls.launch(home, prefer=prefer)


def _healthy_or_busy(emulator: RunningEmulator, patience: float = 20.0) -> bool:
    """True if the recorded processes run and answer. Processes that run but answer slowly
    (a loaded machine) get ``patience`` seconds: restarting an in-memory emulator would
    wipe every bucket other test workers are using."""
    if emulator.healthy():
        return True
    deadline = time.monotonic() + patience
    while all(p.alive() for p in emulator.procs) and time.monotonic() < deadline:
        if emulator.healthy(timeout=5):
            return True
        time.sleep(0.5)
    return False


def prepare_all(
    home: Path | None = None, stores: tuple[str, ...] | list[str] | None = None
) -> None:
    """Install or locate what the emulators of ``stores`` (default: every registered one)
    need, without starting them (Azurite's npm install, for one), so it can run beside other
    set-up work, the other emulators' start included: it does not take their lock. Each
    ``prepare`` runs once per process and home (harness.emulators.preparing): ``start_all``
    then finds it done, or waits for it if it is still running."""
    home = harness_home(home, create=False)
    stores = tuple(registry.store_names() if stores is None else stores)
    _check_stores(stores)
    for store in stores:
        prepare_once(emulator_class(store), home)


def start_all(
    home: Path | None = None, stores: tuple[str, ...] | list[str] | None = None
) -> dict[str, RunningEmulator]:
    """Start the emulators of ``stores`` (default: every registered one) behind their gates,
    or reuse the
    healthy ones recorded in ``$HARNESS_HOME``; dead ones are restarted.

    Safe under concurrent callers (a file lock serialises them). Raises EmulatorError with
    the cause and the fix if one cannot start; the others stay up.
    """
    home = harness_home(home, create=False)
    stores = tuple(registry.store_names() if stores is None else stores)
    _check_stores(stores)
    with _holding_lock(home, "starting the emulators"):
        if len(stores) == 1:
            return {stores[0]: _start_one(home, stores[0])}
        with ThreadPoolExecutor(max_workers=len(stores)) as pool:
            futures = {s: pool.submit(_start_one, home, s) for s in stores}
        errors = [f.exception() for f in futures.values() if f.exception() is not None]
        if errors:
            if len(errors) == 1:
                raise errors[0]  # type: ignore[misc]
            raise EmulatorError("\n\n".join(str(e) for e in errors))
        return {s: f.result() for s, f in futures.items()}


def get(store: str, home: Path | None = None) -> RunningEmulator:
    """The running emulator of ``store`` (EmulatorError if it is not running). Cheap: it
    checks the recorded processes, not their HTTP health (a loaded machine answers slowly)."""
    home = harness_home(home, create=False)
    _check_stores([store])
    emulator = emulator_class(store).load(home)
    if emulator is None or not all(p.alive() for p in emulator.procs):
        raise EmulatorError(
            f"The {store} emulator is not running (state {state_file(home, store)}). Start the "
            "local cloud with 'harness up'."
        )
    return emulator


def stop_all(home: Path | None = None) -> list[str]:
    """Stop every emulator and gate recorded in ``$HARNESS_HOME`` (by recorded PID only);
    return the stores that had a record."""
    home = harness_home(home, create=False)
    stopped = []
    with _lock(home):
        for store, cls in registry.emulator_classes().items():
            emulator = cls.load(home)
            if emulator is not None:
                emulator.stop()
                stopped.append(store)
    return stopped


def stop_one(store: str, home: Path | None = None) -> bool:
    """Stop the emulator and gate of ``store`` recorded in ``$HARNESS_HOME`` (by recorded PID
    only); True if there was a record."""
    home = harness_home(home, create=False)
    cls = emulator_class(store)
    with _lock(home):
        emulator = cls.load(home)
        if emulator is None:
            return False
        emulator.stop()
        return True


def status_all(home: Path | None = None) -> dict[str, dict[str, Any]]:
    """Per-store status for ``harness status``: running, pid, pid_alive, gate_pid,
    gate_pid_alive, endpoint, upstream, log, gate_log (the same keys whether or not the
    store was ever started)."""
    home = harness_home(home, create=False)
    result: dict[str, dict[str, Any]] = {}
    for store, cls in registry.emulator_classes().items():
        emulator = cls.load(home)
        if emulator is None:
            result[store] = {
                "store": store,
                "running": False,
                "pid": None,
                "pid_alive": False,
                "gate_pid": None,
                "gate_pid_alive": False,
                "endpoint": None,
                "upstream": None,
                "log": str(home / "logs" / f"{store}.log"),
                "gate_log": str(home / "logs" / f"gate-{store}.log"),
            }
        else:
            result[store] = emulator.status()
    return result
