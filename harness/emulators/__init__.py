"""The storage emulators of the local cloud, each behind its access gate.

``start_all()`` starts (or reuses) them, ``stop_all()`` stops what it started,
``status_all()`` reports. A store is one module here plus one in skycore/storage; register
its class in ``EMULATORS``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from harness.emulators.azure import AzureEmulator
from harness.emulators.base import (
    EmulatorError,
    RunningEmulator,
    WriteEvent,
    gate_version,
    harness_home,
    state_file,
)
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from harness.procs import stop_process

EMULATORS: dict[str, type[RunningEmulator]] = {
    "s3": S3Emulator,
    "gcs": GcsEmulator,
    "azure": AzureEmulator,
}
STORES: tuple[str, ...] = tuple(EMULATORS)
LOCK_TIMEOUT = 900.0

__all__ = [
    "EMULATORS",
    "STORES",
    "EmulatorError",
    "RunningEmulator",
    "WriteEvent",
    "get",
    "harness_home",
    "start_all",
    "status_all",
    "stop_all",
]


def _lock(home: Path) -> FileLock:
    home.mkdir(parents=True, exist_ok=True)
    return FileLock(str(home / "emulators.lock"), timeout=LOCK_TIMEOUT)


def _check_stores(stores: tuple[str, ...] | list[str]) -> None:
    unknown = [s for s in stores if s not in EMULATORS]
    if unknown:
        raise EmulatorError(
            f"Unknown store(s) {', '.join(unknown)}; the harness has {', '.join(STORES)}."
        )


def _start_one(home: Path, store: str) -> RunningEmulator:
    cls = EMULATORS[store]
    old = cls.load(home)
    if old is not None and _healthy_or_busy(old):
        if old.record.gate_version != gate_version():
            old.restart_gate()
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


def start_all(
    home: Path | None = None, stores: tuple[str, ...] | list[str] = STORES
) -> dict[str, RunningEmulator]:
    """Start the emulators of ``stores`` (default all) behind their gates, or reuse the
    healthy ones recorded in ``$HARNESS_HOME``; dead ones are restarted.

    Safe under concurrent callers (a file lock serialises them). Raises EmulatorError with
    the cause and the fix if one cannot start; the others stay up.
    """
    home = harness_home(home)
    _check_stores(stores)
    try:
        with _lock(home):
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
    except Timeout:
        raise EmulatorError(
            f"Another process has held {home / 'emulators.lock'} for {LOCK_TIMEOUT:.0f} s while "
            "starting the emulators. Wait for it to finish, or stop it and start again."
        ) from None


def get(store: str, home: Path | None = None) -> RunningEmulator:
    """The running emulator of ``store`` (EmulatorError if it is not running). Cheap: it
    checks the recorded processes, not their HTTP health (a loaded machine answers slowly)."""
    home = harness_home(home)
    _check_stores([store])
    emulator = EMULATORS[store].load(home)
    if emulator is None or not all(p.alive() for p in emulator.procs):
        raise EmulatorError(
            f"The {store} emulator is not running (state {state_file(home, store)}). Start the "
            "local cloud with 'harness up'."
        )
    return emulator


def stop_all(home: Path | None = None) -> list[str]:
    """Stop every emulator and gate recorded in ``$HARNESS_HOME`` (by recorded PID only);
    return the stores that had a record."""
    home = harness_home(home)
    stopped = []
    with _lock(home):
        for store, cls in EMULATORS.items():
            emulator = cls.load(home)
            if emulator is not None:
                emulator.stop()
                stopped.append(store)
    return stopped


def status_all(home: Path | None = None) -> dict[str, dict[str, Any]]:
    """Per-store status for ``harness status``: running, pid, pid_alive, gate_pid,
    gate_pid_alive, endpoint, upstream, log, gate_log (the same keys whether or not the
    store was ever started)."""
    home = harness_home(home)
    result: dict[str, dict[str, Any]] = {}
    for store, cls in EMULATORS.items():
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
