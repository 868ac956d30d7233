"""An emulator's ``prepare(home)`` run once per process and harness home.

``harness up`` reaches ``prepare`` from two steps that run side by side: the install step
(``fleet.prepare_all``) and the start of the emulators (``launcher.launch``). ``prepare_once``
makes them share one call: the first caller runs it, a caller that comes while it runs waits
for it and gets its outcome (its error, too), and a later caller gets that outcome at once.
Across processes (pytest-xdist workers, two ``harness up``) the calls for one store take
turns under ``$HARNESS_HOME/prepare/<store>.lock``, so each finds what the one before
installed instead of installing beside it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import ClassVar, Protocol

from filelock import FileLock, Timeout

from harness.emulators.records import EmulatorError

LOCK_TIMEOUT = 900.0


class Preparable(Protocol):
    """What ``prepare_once`` needs of an emulator class."""

    store: ClassVar[str]

    @classmethod
    def prepare(cls, home: Path) -> None: ...


_CALLS: dict[tuple[type, Path], Future[None]] = {}
_CALLS_LOCK = threading.Lock()


def prepare_lock(home: Path, store: str) -> FileLock:
    """The file lock under which ``store``'s ``prepare`` runs (one process at a time)."""
    folder = home / "prepare"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{store}.lock"), timeout=LOCK_TIMEOUT)


def prepare_once(cls: type[Preparable], home: Path) -> None:
    """Run ``cls.prepare(home)`` unless this process has run it for ``cls`` and ``home``
    (or is running it: then wait for that call); raise the error it raised."""
    key = (cls, Path(home).expanduser().resolve())
    with _CALLS_LOCK:
        call = _CALLS.get(key)
        mine = call is None
        if call is None:
            call = _CALLS[key] = Future()
    if not mine:
        call.result()
        return
    try:
        with prepare_lock(key[1], cls.store):
            cls.prepare(home)
    except Timeout:
        error = EmulatorError(
            f"Another process has held {key[1] / 'prepare' / cls.store}.lock for "
            f"{LOCK_TIMEOUT:.0f} s while installing the {cls.store} emulator. Wait for it to "
            "finish, or stop it and start again."
        )
        call.set_exception(error)
        raise error from None
    except Exception as e:
        call.set_exception(e)
        raise
    except BaseException:
        with _CALLS_LOCK:  # interrupted, not failed: the next caller tries again
            _CALLS.pop(key, None)
        call.set_exception(EmulatorError(f"Preparing the {cls.store} emulator was interrupted."))
        raise
    call.set_result(None)


def forget_prepared() -> None:
    """Forget every ``prepare`` this process ran (the next ``prepare_once`` calls it again),
    e.g. after removing what it installed."""
    with _CALLS_LOCK:
        _CALLS.clear()
