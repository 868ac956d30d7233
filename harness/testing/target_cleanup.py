"""Clean-up of a target run: every bucket a run creates carries ``PREFIX-RUNID`` (see
harness.targets), so the run's buckets are found by name through the store's own API and
deleted at its end, after a failure or Ctrl-C too; ``harness conform --sweep`` deletes the
leftovers of older runs."""

from __future__ import annotations

import time

from harness import emulator_registry as registry
from harness.accounts import OTHER, USER
from harness.emulators.base import RunningEmulator
from harness.targets import Target, run_tag, tag_pattern

SWEEP_AGE_S = 3600.0


def _owners(target: Target) -> list[str]:
    return [USER, OTHER] if target.has_other else [USER]


def _buckets(emulator: RunningEmulator, target: Target) -> dict[str, float]:
    """Every bucket the target's accounts own: name -> creation time."""
    found: dict[str, float] = {}
    for owner in _owners(target):
        found.update(emulator.list_buckets(owner))
    return found


def _delete(emulator: RunningEmulator, names: list[str]) -> list[str]:
    lines = []
    for name in sorted(names):
        try:
            emulator.delete_bucket(name)
            lines.append(f"deleted bucket {name}")
        except Exception as e:  # keep deleting the rest; say what is left
            lines.append(f"could not delete bucket {name}: {type(e).__name__}: {e}")
    return lines


def delete_run_buckets(target: Target, run_id: str) -> list[str]:
    """Delete every bucket of run ``run_id``; one line per bucket (what was done)."""
    emulator = registry.get_emulator_class(target.store).attach(target)
    tag = run_tag(target.bucket_prefix, run_id)
    pattern = tag_pattern(target.bucket_prefix)
    names = [
        name
        for name in _buckets(emulator, target)
        if (m := pattern.search(name)) is not None and m.group(1) == run_id
    ]
    lines = _delete(emulator, names)
    return [f"clean-up of run {tag}: {line}" for line in lines]


def sweep(target: Target, older_than_s: float = SWEEP_AGE_S) -> list[str]:
    """Delete buckets of any run with the target's prefix created more than
    ``older_than_s`` ago; one line per bucket, or one saying there was nothing."""
    emulator = registry.get_emulator_class(target.store).attach(target)
    pattern = tag_pattern(target.bucket_prefix)
    now = time.time()
    old = [
        name
        for name, created in _buckets(emulator, target).items()
        if pattern.search(name) and now - created > older_than_s
    ]
    if not old:
        return [
            f"no bucket with prefix '{target.bucket_prefix}-' older than "
            f"{older_than_s / 60:.0f} min"
        ]
    return _delete(emulator, old)
