"""Upload order checked at every moment, from a gate's write events (pure: no I/O).

The events are replayed in completion order (sorted by ``t_ns``, stably: ties keep the order
given, which is the gate's): a write (put, copy, multipart, resumable, rewrite, compose,
commit) makes its key visible, a delete hides it. After each event the keys visible must be
exactly the first k keys of the creation order, for some k: a file is never visible while one
created before it is not. First-seen order is not enough: a file deleted and written again
(rclone removing a failed copy) leaves a moment where newer files are visible without it.

Keys outside ``prefix`` are ignored. A key under ``prefix`` that is not in the creation order
is a violation of its own ("unexpected key") each time it is written, and takes no part in
the prefix check. An op that is neither a write nor a delete is a ValueError.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

WRITE_OPS = frozenset({"put", "copy", "multipart", "resumable", "rewrite", "compose", "commit"})
DELETE_OPS = frozenset({"delete"})

OUT_OF_ORDER = "out of order"
UNEXPECTED_KEY = "unexpected key"

_SHOWN = 4  # keys named in a message before "..."


class Event(Protocol):
    """A completed write as a gate records it (harness.emulators.records.WriteEvent)."""

    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def t_ns(self) -> int: ...


@dataclass(frozen=True)
class Violation:
    """One moment the store broke the order, right after event ``index`` of the replay."""

    kind: str
    """OUT_OF_ORDER or UNEXPECTED_KEY."""
    index: int
    """The event's position in the replay (0-based, after sorting by ``t_ns``)."""
    event: Event
    seconds: float
    """The event's time, in seconds after the replay's first event."""
    visible: tuple[str, ...]
    """The creation-order keys visible right after the event, in creation order."""
    intact: int
    """How many of the oldest keys were all visible (``visible[:intact]``)."""
    missing: str | None
    """The oldest key not visible while a newer one was (None for UNEXPECTED_KEY)."""

    def describe(self) -> str:
        """One line: the event, the keys visible then and the first older key missing."""
        e = self.event
        head = f"event #{self.index} ({e.op} {e.key}, {e.size} B, +{self.seconds:.3f} s)"
        if self.kind == UNEXPECTED_KEY:
            return f"{head}: {e.key} is under the prefix but not in the creation order"
        oldest = self.visible[: self.intact]
        newer = self.visible[self.intact :]
        seen = f"the {len(oldest)} oldest ({_span(oldest)}) and " if oldest else ""
        return (
            f"{head}: visible then {seen}{len(newer)} newer ({_names(newer)}); "
            f"{self.missing}, created before them, was not visible"
        )


def visible_prefix_violations(
    events: Iterable[Event], creation_order: Sequence[str], prefix: str = ""
) -> list[Violation]:
    """Every event after which the visible keys under ``prefix`` are not the first k keys of
    ``creation_order`` (for any k), and every write of a key under ``prefix`` that is not in
    it; in replay order. Empty if the order held at every moment."""
    position = _positions(creation_order, prefix)
    found: list[Violation] = []
    for index, event, seconds, visible in _replay(events, position, prefix):
        if event.key not in position:
            if event.op in WRITE_OPS:
                found.append(Violation(UNEXPECTED_KEY, index, event, seconds, (), 0, None))
            continue
        intact = _intact(visible, len(creation_order))
        if intact < len(visible):
            shown = tuple(creation_order[p] for p in sorted(visible))
            missing = creation_order[intact]
            found.append(Violation(OUT_OF_ORDER, index, event, seconds, shown, intact, missing))
    return found


def assert_visible_prefix(
    events: Iterable[Event],
    creation_order: Sequence[str],
    prefix: str = "",
    error: type[AssertionError] = AssertionError,
) -> None:
    """Raise ``error`` (an AssertionError) describing the first violation, and how many
    events were violations, if the order was broken at any moment."""
    events = list(events)
    found = visible_prefix_violations(events, creation_order, prefix)
    if found:
        raise error(
            f"upload order broken at {found[0].describe()} "
            f"[{len(found)} of {len(events)} events were violations]"
        )


def lost_keys(
    events: Iterable[Event], creation_order: Sequence[str], prefix: str = ""
) -> list[str]:
    """The keys of ``creation_order`` not visible after the last event (never written, or
    deleted and not written again), in creation order."""
    return list(_at_end(events, creation_order, prefix))


def assert_all_visible(
    events: Iterable[Event],
    creation_order: Sequence[str],
    prefix: str = "",
    error: type[AssertionError] = AssertionError,
) -> None:
    """Raise ``error`` naming the keys of ``creation_order`` that the events leave not
    visible at the end (each: never written, or deleted at event #i and not written again)."""
    events = list(events)
    lost = _at_end(events, creation_order, prefix)
    if lost:
        why = [
            f"{k} (never written)"
            if i is None
            else f"{k} (deleted at event #{i}, not written again)"
            for k, i in list(lost.items())[:_SHOWN]
        ]
        more = f", and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else ""
        raise error(
            f"{len(lost)} of {len(creation_order)} files not in the store after the last of "
            f"{len(events)} events: {', '.join(why)}{more}"
        )


def _at_end(
    events: Iterable[Event], creation_order: Sequence[str], prefix: str
) -> dict[str, int | None]:
    """{key of ``creation_order`` not visible after the last event: the index of the delete
    that last hid it, or None if it was never written}, in creation order."""
    position = _positions(creation_order, prefix)
    hidden_by: dict[str, int | None] = dict.fromkeys(creation_order)
    for index, event, _, _ in _replay(events, position, prefix):
        if event.key in position:
            if event.op in DELETE_OPS:
                hidden_by[event.key] = index
            else:
                hidden_by.pop(event.key, None)
    return {k: hidden_by[k] for k in creation_order if k in hidden_by}


def _positions(creation_order: Sequence[str], prefix: str) -> dict[str, int]:
    position = {key: i for i, key in enumerate(creation_order)}
    if len(position) != len(creation_order):
        raise ValueError("creation_order names a key twice")
    outside = [k for k in creation_order if not k.startswith(prefix)]
    if outside:
        raise ValueError(f"creation_order has keys outside the prefix {prefix!r}: {outside[:3]}")
    return position


def _replay(
    events: Iterable[Event], position: dict[str, int], prefix: str
) -> Iterator[tuple[int, Event, float, set[int]]]:
    """(index, event, seconds after the first event, creation positions visible after it)
    for each event under ``prefix``, sorted by ``t_ns`` (stable). The set is live: copy it to
    keep it."""
    ordered = sorted(events, key=lambda e: e.t_ns)
    t0 = ordered[0].t_ns if ordered else 0
    visible: set[int] = set()
    for index, event in enumerate(ordered):
        if event.op not in WRITE_OPS and event.op not in DELETE_OPS:
            known = ", ".join(sorted(WRITE_OPS | DELETE_OPS))
            raise ValueError(f"event #{index} has an unknown op {event.op!r} (known: {known})")
        if not event.key.startswith(prefix):
            continue
        p = position.get(event.key)
        if p is not None:
            if event.op in WRITE_OPS:
                visible.add(p)
            else:
                visible.discard(p)
        yield index, event, (event.t_ns - t0) / 1e9, visible


def _intact(visible: set[int], n: int) -> int:
    """How many of the oldest positions (0, 1, ...) are all in ``visible``."""
    k = 0
    while k < n and k in visible:
        k += 1
    return k


def _span(keys: Sequence[str]) -> str:
    return keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"


def _names(keys: Sequence[str]) -> str:
    more = f", ... {keys[-1]}" if len(keys) > _SHOWN else ""
    return ", ".join(keys[: min(len(keys), _SHOWN - 1 if more else _SHOWN)]) + more
