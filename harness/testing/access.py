"""How the tests reach a store: the local cloud's running emulator, or a target file's
endpoint through the same helpers (harness.emulators.base.RunningEmulator.attach).

The harness plugin activates a target once per process (``--target FILE``); everything the
suite does to a store then goes through :func:`store_access`, so a test never learns which
of the two it talks to, unless it asks :func:`target` (to skip what needs the local cloud).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import emulator_registry as registry
from harness.emulators import fleet
from harness.emulators.base import RunningEmulator
from harness.targets import Target, run_tag

LOCAL_CLOUD_ONLY = "needs the local cloud (the gate's admin API, events or faults)"
NO_OTHER_ACCOUNT = "no other account in the target file"
NO_PUBLIC_BUCKET = "no public_bucket in the target file"


@dataclass
class _Active:
    target: Target | None = None
    run_id: str = ""
    attached: dict[str, RunningEmulator] = field(default_factory=dict)


_ACTIVE = _Active()


def activate(target: Target | None, run_id: str) -> None:
    """Point this process at ``target`` (None: the local cloud) for run ``run_id``."""
    _ACTIVE.target = target
    _ACTIVE.run_id = run_id
    _ACTIVE.attached.clear()


def target() -> Target | None:
    """The active target file, or None for the local cloud."""
    return _ACTIVE.target


def run_id() -> str:
    """The id of this run (every bucket a target run creates carries it)."""
    return _ACTIVE.run_id


def bucket_tag() -> str:
    """``PREFIX-RUNID`` in target mode (the start of every bucket name the run makes); empty
    for the local cloud."""
    t = _ACTIVE.target
    return run_tag(t.bucket_prefix, _ACTIVE.run_id) if t is not None else ""


def store_access(store: str) -> RunningEmulator:
    """The helpers of ``store``: attached to the active target, else the running emulator."""
    t = _ACTIVE.target
    if t is None:
        return fleet.get(store)
    if store != t.store:
        raise fleet.EmulatorError(
            f"This run's target file is for store '{t.store}', not '{store}'."
        )
    if store not in _ACTIVE.attached:
        _ACTIVE.attached[store] = registry.get_emulator_class(store).attach(t)
    return _ACTIVE.attached[store]
