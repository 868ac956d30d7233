"""The contract's verdict on a running emulator, computed once per emulator process and
shared by every pytest worker: ``$HARNESS_HOME/contract/<store>.json``, written under a file
lock, keyed by the recorded processes (a restarted emulator is checked again)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from filelock import FileLock

from harness.conformance.contract import Outcome, contract_checks, run
from harness.paths import harness_home

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

LOCK_TIMEOUT_S = 600.0
"""A hang guard: the whole contract takes a few seconds per store."""


FORMAT = 2
"""The cache file's format: a file of another format is computed again."""


def _identity(emulator: RunningEmulator) -> list[object]:
    """The processes checked, and what they were checked against (the checks, the declared
    deviations): a change of either checks again."""
    r = emulator.record
    declared = sorted(repr(d) for d in getattr(emulator, "known_deviations", ()))
    checks = list(contract_checks(type(emulator)))
    processes = [r.pid, r.start_time, r.gate_pid, r.gate_start_time, emulator.endpoint]
    return [FORMAT, *processes, checks, declared]


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
                return Outcome.from_json(cached["outcome"])
        except (OSError, ValueError, TypeError, KeyError):
            pass
        outcome = run(emulator)
        path.write_text(
            json.dumps({"identity": _identity(emulator), "outcome": outcome.to_json()}, indent=2)
        )
        return outcome


def skip_reason(emulator: RunningEmulator, module: str) -> str | None:
    """Why test module ``module`` (short name) must not run on ``emulator``: the failed
    contract checks it relies on (None: it relies on none that failed)."""
    blocking = verdict(emulator).blocking(module)
    if not blocking:
        return None
    first = blocking[0]
    more = f" (and {len(blocking) - 1} more check)" if len(blocking) > 1 else ""
    return (
        f"{first.text}{more}. {module} relies on the {first.check} check ({first.why}), so "
        f"it cannot tell your store's faults from the stand-in's and is skipped for "
        f"{emulator.store}; every test that does not rely on it runs (test_emulator_contract "
        "lists every failure)."
    )
