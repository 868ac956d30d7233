"""The contract's verdict on a running emulator, computed once per emulator process and
shared by every pytest worker: ``$HARNESS_HOME/contract/<store>.json``, written under a file
lock, keyed by the recorded processes (a restarted emulator is checked again)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from filelock import FileLock

from harness.conformance.contract import Outcome, run
from harness.paths import harness_home

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

LOCK_TIMEOUT_S = 600.0
"""A hang guard: the whole contract takes a few seconds per store."""


def _identity(emulator: RunningEmulator) -> list[object]:
    r = emulator.record
    return [r.pid, r.start_time, r.gate_pid, r.gate_start_time, emulator.endpoint]


def verdict(emulator: RunningEmulator) -> Outcome:
    """The contract's outcome for ``emulator``: read from the cache when the same processes
    were checked before, else run now (by the first worker that asks) and cached."""
    folder = harness_home() / "contract"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{emulator.store}.json"
    with FileLock(str(path.with_suffix(".lock")), timeout=LOCK_TIMEOUT_S):
        try:
            cached = json.loads(path.read_text())
            if cached.get("identity") == _identity(emulator):
                return Outcome(**cached["outcome"])
        except (OSError, ValueError, TypeError, KeyError):
            pass
        outcome = run(emulator)
        path.write_text(
            json.dumps({"identity": _identity(emulator), "outcome": asdict(outcome)}, indent=2)
        )
        return outcome


def skip_reason(emulator: RunningEmulator) -> str | None:
    """Why the rest of the suite must not run on ``emulator`` (None: it kept the contract)."""
    outcome = verdict(emulator)
    if not outcome.failures:
        return None
    more = f" (and {len(outcome.failures) - 1} more)" if len(outcome.failures) > 1 else ""
    return (
        f"{outcome.failures[0]}{more}. The suite cannot tell your store's faults from the "
        f"stand-in's, so the rest of it is skipped for {emulator.store}: see "
        "test_emulator_contract for every failure."
    )
