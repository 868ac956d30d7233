"""The order keepers of one rclone daemon, as its refresher runs them: one per ordered mount,
each looking at its upload queue when an event says something changed (``events.Woken``) or
when its own timer runs out.

When is a look needed:
- an upload ended (failed, was cancelled, a file removed) or succeeded: the next may go;
- a file was closed: it may go at once if nothing is in flight; while an upload is in flight
  it only has to be written down in the close-order journal, so looks for that are spaced
  JOURNAL_LOOK_S apart (a daemon killed meanwhile leaves at most that much of the newest
  closes to be ordered by their cache files' times);
- a refresh's hold on this mount ended, if the last look found it paused;
- its timer: a held-back file becomes old enough, or no event came for a while.

A daemon whose only uploading mount is one ordered mount (the usual case: one checkpoint
mount) releases the next upload straight from rclone's "upload succeeded" line, in the order
its last look found (``OrderKeeper.release_next``), without a look. With several such
mounts a file name in rclone's log could be any of theirs, so they look each time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from skycore.node.mountd.events import Woken
from skycore.node.mountd.journal import digest
from skycore.node.mountd.keeper import (
    KEEP_BUSY_LOOK_S,
    KEEP_BUSY_POLL_S,
    KEEP_IDLE_LOOK_S,
    KEEP_IDLE_POLL_S,
    KEEP_PAUSED_LOOK_S,
    OrderKeeper,
)
from skycore.node.mountd.rc import RcError

JOURNAL_LOOK_S = 0.05  # files closed while an upload is in flight are written down this soon


class KeeperSlot:
    """The order keeper of one ordered mount, and when it looks next."""

    def __init__(self, d: str, fs: str, hold_back: float, log: Callable[[str], None]) -> None:
        self.keeper = OrderKeeper(os.path.join(d, "rc.sock"), fs, hold_back, log)
        self.log = log
        self.digest = digest(fs)
        self.next_look = 0.0  # monotonic: at once
        self.last_look = float("-inf")
        self.busy = False
        self.paused = False  # its last look found a refresh holding the uploads

    def look(self, evented: bool) -> None:
        """Apply the order rule once and set when to look again without an event."""
        now = self.last_look = time.monotonic()
        try:
            seen = self.keeper.look()
        except (OSError, RcError):
            self.busy, self.next_look = False, now + KEEP_PAUSED_LOOK_S
            return
        except Exception as e:  # keep the order whatever one look met
            self.log(f"order keeper error: {type(e).__name__}: {e}")
            self.busy, self.next_look = False, now + KEEP_PAUSED_LOOK_S
            return
        self.busy, self.paused = seen.busy, seen.paused
        if not evented:
            self.next_look = now + (KEEP_BUSY_POLL_S if seen.busy else KEEP_IDLE_POLL_S)
        elif seen.paused:
            self.next_look = now + KEEP_PAUSED_LOOK_S
        elif seen.busy:
            wait = KEEP_BUSY_LOOK_S if seen.due_in is None else min(KEEP_BUSY_LOOK_S, seen.due_in)
            self.next_look = now + wait
        else:
            self.next_look = now + KEEP_IDLE_LOOK_S

    def wants_look(self, woken: Woken, now: float, released: bool = False) -> bool:
        """Whether ``woken`` (or the timer) calls for a look now (``released``: the success
        line already released the next upload, so it does not); a close seen while an upload
        is in flight moves the timer to JOURNAL_LOOK_S after the last look instead."""
        if woken.ended or (woken.succeeded and not released) or self.next_look <= now:
            return True
        if self.paused and self.digest in woken.holds_ended:
            return True
        if woken.queued:
            if not self.busy or now - self.last_look >= JOURNAL_LOOK_S:
                return True
            self.next_look = min(self.next_look, self.last_look + JOURNAL_LOOK_S)
        return False


class DaemonKeepers:
    """The keepers of the daemon whose folder is ``d``."""

    def __init__(self, d: str, log: Callable[[str], None]) -> None:
        self.d, self.log = d, log
        self.slots: dict[str, KeeperSlot] = {}
        self.exclusive: KeeperSlot | None = None  # the daemon's only uploading mount

    def match(self, ordered: dict[str, float], uploaders: set[str]) -> None:
        """Keep one slot per mount of ``ordered`` (VFS name -> hold-back s); ``uploaders``:
        every live mount of the daemon that may upload (ordered or not)."""
        for fs in [fs for fs in self.slots if fs not in ordered]:
            del self.slots[fs]
        for fs, hold in ordered.items():
            if fs not in self.slots:
                self.slots[fs] = KeeperSlot(self.d, fs, hold, self.log)
        only = next(iter(self.slots.values())) if len(self.slots) == 1 else None
        self.exclusive = only if only is not None and uploaders == set(self.slots) else None

    def handle(self, woken: Woken, evented: bool) -> None:
        """Release straight from the success lines where that is safe, then look where
        ``woken`` or a timer calls for it."""
        released = False
        if self.exclusive is not None and woken.succeeded:
            keeper = self.exclusive.keeper
            released = all([keeper.release_next(name) for name in woken.succeeded])
        now = time.monotonic()
        for slot in self.slots.values():
            if not evented or slot.wants_look(woken, now, released and slot is self.exclusive):
                slot.look(evented)

    def wake_at(self) -> list[float]:
        """When each keeper wants to look again (monotonic)."""
        return [slot.next_look for slot in self.slots.values()]
