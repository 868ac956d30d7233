"""Upload order and quiet listings: the queue lock, a refresh's upload hold, the order keeper
and the drain's hurry."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from skycore.node.mountd.rc import RcError, rc

# --- listings that a writer never waits for ----------------------------------------------------
#
# A writable MOUNT_CACHED mount keeps its directory listing for its life (DirCacheTime of 100
# years): rclone then never lists a directory on demand, which is what made a create wait
# for the store (or fail) once the listing was older than DirCacheTime. The listing is made
# here instead: its top directory when the mount is made, then its whole tree by the
# daemon's refresher at once and every ``refresh`` seconds, in the background, with rc
# ``vfs/refresh recursive=true``. Measured on rclone 1.75.2 (and
# read in vfs/dir.go ``readDirTree``): it lists without holding any directory's lock (a
# create meanwhile is local, even while the store holds the listing), re-reads directories
# whose listing is not stale, keeps the old listing when the listing fails, and keeps files
# that are open or not yet uploaded. A non-recursive refresh is no use here: it lists
# holding the directory's lock and forgets the listing when that fails.
#
# Because it lists unlocked, a change that completes while it lists is lost from the new
# listing: a file whose upload (or server-side rename) ends then is no longer "being
# written", is not in the store's answer either, and vanishes from the mount until the next
# refresh (measured: hundreds of times in 20 s of back-to-back refreshes while a file was
# written every 20 ms). Reopening such a name would start an empty file. So a background
# refresh runs only at a quiet moment (no upload queued or under way: a writer that never
# pauses defers it), holds back (vfs/queue-set-expiry) every upload queued while it lists,
# then lets them go in their order, and is repeated at once if an upload or rename to the
# mount completed while it listed all the same (core/transferred). Measured with the
# refreshes back to back (~900 in 60 s) while a file was written every 0.2 s: none vanished
# and the uploads kept their order.

REFRESH_TIMEOUT_S = 300.0  # one background refresh (a listing the store holds ends with it)
PRIME_TIMEOUT_S = 60.0  # the listing made when mounting; past it the refresher goes on
HOLD_POLL_S = 0.01  # how often a refresh looks for uploads to hold back
IDLE_POLL_S = 0.02  # how often it looks whether the upload under way has ended
HOLD_FOR_S = 60.0  # how far a held upload is put back (it goes then if nobody lets it go)
HOLD_MAX_S = 2.0  # a refresh that lists longer lets the uploads go (a race is caught after)
QUIET_WAIT_S = 0.5  # a refresh waits this long for an upload under way to end, else later
PRIME_QUIET_WAIT_S = 10.0  # the same for the listing made when mounting
PRIME_PENDING_WAIT_S = 60.0  # it waits this long for uploads a dead daemon left
RACE_RETRIES = 3  # refreshes repeated at once after one that raced with an upload
REFRESHER_TICK_S = 1.0
KEEP_POLL_S = 0.2  # how often the refresher looks at a mount's queue while uploads wait
KEEP_HOLD_POLL_S = 0.02  # ... and while it holds uploads behind a failed one
KEEP_RETRY_S = 1.0  # a failed upload that others wait for is retried at least this often
KEEP_SUSPECT_S = 1.0  # an upload under way this long may be retrying in place: hold the rest
KEEP_LATE_S = 2.0  # a keeper that did not look for this long while uploads waited logs it
KEEP_MAX_S = 600.0  # past this, a file the store keeps refusing no longer holds the others
RELEASE_STEP_S = 1e-6  # released (or hurried) uploads are due this far apart, oldest first
REFRESHER_GONE_TICKS = 3  # the refresher ends once its daemon has not answered this often
COST_FACTOR = 10.0  # refresh at most every COST_FACTOR x the last refresh's duration
LOG_MAX_BYTES = 1 << 20


def _stamp(value: str) -> float:
    """Seconds since the epoch of an RFC 3339 time as rclone writes it (0.0 if unreadable)."""
    import datetime

    text = re.sub(r"(\.\d{1,6})\d*", r"\1", value.strip()).replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


@contextlib.contextmanager
def queue_lock(sock: str) -> Iterator[None]:
    """Held by every edit of the upload queue of the daemon on ``sock`` (read rc ``vfs/queue``,
    then shift expiries by what was read): the order keeper, a refresh's hold and a drain's
    hurry run in different threads and processes, and two edits made from one reading apply
    the same shift twice (two hurries put the newest files first: seen once in CI)."""
    with open(os.path.join(os.path.dirname(sock), "queue.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


class UploadHold:
    """While a refresh lists VFS ``fs``: hold back every upload that is queued (at most
    HOLD_MAX_S: a listing the store holds longer does not hold the uploads too; a race is
    then caught afterwards), then let them go as they were.

    Holding puts an item's expiry HOLD_FOR_S later (``relative``), newest first, so that an
    item rclone starts meanwhile is the oldest one; letting go puts it back as much, oldest
    first: every item gets its own expiry back, so rclone's order is kept."""

    def __init__(self, sock: str, fs: str) -> None:
        self.sock, self.fs = sock, fs
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.over = False  # let go: holds no more
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> UploadHold:
        self._hold()  # the queued ones now, before anything else happens
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _shift(self, item_id: int, seconds: float) -> bool:
        params = {"fs": self.fs, "id": item_id, "expiry": seconds, "relative": True}
        try:
            rc(self.sock, "vfs/queue-set-expiry", params)
        except (OSError, RcError):
            return False  # uploaded (or started) meanwhile
        return True

    def idle(self, wait: float) -> bool:
        """Wait up to ``wait`` s until no upload of the mount is under way and every queued
        one is held; False if that did not happen."""
        deadline = time.monotonic() + wait
        while True:
            queue = self._hold()
            if queue is not None and not any(
                item.get("uploading") or float(item.get("expiry", 0)) < HOLD_FOR_S / 2
                for item in queue
            ):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(IDLE_POLL_S)

    def _hold(self) -> list[dict[str, Any]] | None:
        """Hold every queued upload that is not held (an item rclone queued again, a file
        written again, is held again); the queue as it is then (None: no answer)."""
        with self.lock, queue_lock(self.sock):
            if self.over:
                return None
            try:
                queue = rc(self.sock, "vfs/queue", {"fs": self.fs}).get("queue") or []
            except (OSError, RcError):
                return None
            todo = sorted(
                (float(item["expiry"]), int(item["id"]), item)
                for item in queue
                if not item.get("uploading") and float(item["expiry"]) < HOLD_FOR_S / 2
            )
            for expiry, item_id, item in reversed(todo):
                if self._shift(item_id, HOLD_FOR_S):
                    item["expiry"] = expiry + HOLD_FOR_S
                    self.held.add(item_id)
            return queue

    def _let_go(self) -> None:
        with self.lock, queue_lock(self.sock):
            self.over = True
            try:
                queue = rc(self.sock, "vfs/queue", {"fs": self.fs}).get("queue") or []
            except (OSError, RcError):
                queue = []
            items = sorted(
                (float(item["expiry"]), int(item["id"]))
                for item in queue
                if int(item["id"]) in self.held and not item.get("uploading")
            )
            for _, item_id in items:
                self._shift(item_id, -HOLD_FOR_S)
            self.held.clear()

    def _run(self) -> None:
        deadline = time.monotonic() + HOLD_MAX_S
        while not self.stop.wait(HOLD_POLL_S) and time.monotonic() < deadline:
            self._hold()
        self._let_go()


def refresh_listing(
    sock: str, fs: str, quiet_wait: float = 0, timeout: float = 0
) -> tuple[str, float]:
    """Re-read the whole listing of VFS ``fs`` from the store while none of its uploads can
    complete: ("ok" | "busy" | "raced" | "failed: why", seconds the listing took). Queued
    uploads are held back meanwhile; "busy": not tried, an upload was still under way after
    ``quiet_wait`` s; "raced": done, but an upload or rename to the mount completed while it
    listed all the same (the listing may miss that file: refresh again)."""
    cache = rc(sock, "vfs/stats", {"fs": fs}).get("diskCache") or {}
    if quiet_wait < 1 and (cache.get("uploadsInProgress") or cache.get("uploadsQueued")):
        return "busy", 0.0  # at a quiet moment instead (holding nothing back)
    with UploadHold(sock, fs) as hold:
        if not hold.idle(quiet_wait):
            return "busy", 0.0
        began, t0 = time.time(), time.monotonic()
        try:
            out = rc(sock, "vfs/refresh", {"fs": fs, "recursive": "true"},
                     timeout=timeout or REFRESH_TIMEOUT_S)  # fmt: skip
            result = out.get("result") or {}
            why = "; ".join(str(v) for v in result.values() if v != "OK")
        except (OSError, RcError) as e:
            why = str(e) or type(e).__name__
        took = time.monotonic() - t0
    if why:
        return "failed: " + why, took
    done = rc(sock, "core/transferred").get("transferred") or []
    if any(t.get("dstFs") == fs and _stamp(t.get("completed_at", "")) >= began for t in done):
        return "raced", took
    return "ok", took


def refresh_until_clean(
    sock: str, fs: str, quiet_wait: float = QUIET_WAIT_S, timeout: float = 0
) -> tuple[str, float]:
    """``refresh_listing``, repeated at once (up to RACE_RETRIES times) while it raced."""
    outcome, took = refresh_listing(sock, fs, quiet_wait, timeout)
    for _ in range(RACE_RETRIES):
        if outcome != "raced":
            break
        outcome, took = refresh_listing(sock, fs, quiet_wait, timeout)
    return outcome, took


class OrderKeeper:
    """Keeps a mount's uploads in creation order when the store fails them: rclone puts a
    failed upload back in its queue behind the files created after it, and goes on with
    those, so whichever retry first falls after the store is back goes first.

    The head is the oldest upload that failed, or one under way for more than
    KEEP_SUSPECT_S (rclone may be retrying it in place: a 503 storm, an outage; with one
    transfer at a time nothing else could go meanwhile anyway). While there is a head,
    every newer queued upload is held back (its expiry put HOLD_FOR_S later, newest first),
    the held ones older than the head go first, in creation order (writeback ids), then the
    head, retried at least every KEEP_RETRY_S; once no upload is in trouble, every held one
    goes, in creation order. Past KEEP_MAX_S on the same head (a file the store never
    takes), order is given up for it so that the others go on.

    The keeper polls; a file closed between two polls is due after the mount's write-back
    delay. Were it due before the keeper saw it, rclone would start it the moment the head's
    upload ended, ahead of the held ones (seen in CI at a 0.1 s write-back, and once at 1 s
    with the keeper stopped 0.3 s in every 0.6 s on a machine so loaded that a 1 MiB upload
    took 7 s). So the write-back delay (5 s) is the time the keeper has to see a new upload,
    and held uploads are let go ahead of every one it has not held. A keeper that did not
    look for longer than KEEP_LATE_S while uploads waited says so in the refresher's log.
    While no upload has failed, those it sees go at once (``hurry``): the delay is only paid
    by a file closed while the keeper is idle (its tick, 1 s) or behind a failure."""

    def __init__(self, sock: str, fs: str, log: Callable[[str], None] = lambda _: None) -> None:
        self.sock, self.fs, self.log = sock, fs, log
        self.held: set[int] = set()
        self.head: tuple[int, float] | None = None  # (id, since)
        self.uploading: dict[int, float] = {}  # id -> first seen under way
        self.given_up: set[int] = set()
        self.looked: tuple[float, bool] | None = None  # (when, uploads waited) at the last poll

    def _set(self, item_id: int, expiry: float, relative: bool = False) -> bool:
        params = {"fs": self.fs, "id": item_id, "expiry": expiry, "relative": relative}
        try:
            rc(self.sock, "vfs/queue-set-expiry", params)
        except (OSError, RcError):
            return False
        return True

    def poll(self) -> tuple[bool, bool]:
        """One look at the queue: (holding uploads back, uploads queued or under way)."""
        now = time.monotonic()
        if self.looked and self.looked[1] and now - self.looked[0] > KEEP_LATE_S:
            self.log(
                f"{self.fs}: the order keeper did not look at the upload queue for "
                f"{now - self.looked[0]:.1f} s while uploads waited (a loaded node?)"
            )
        busy = True  # a poll that fails is no sign of a quiet queue
        try:
            with queue_lock(self.sock):
                outcome = self._poll()
            busy = outcome[1]
            return outcome
        finally:
            self.looked = (time.monotonic(), busy)

    def _poll(self) -> tuple[bool, bool]:
        cache = rc(self.sock, "vfs/stats", {"fs": self.fs}).get("diskCache") or {}
        if not (cache.get("uploadsQueued") or cache.get("uploadsInProgress") or self.held):
            self.head, self.uploading = None, {}
            return False, False
        queue = rc(self.sock, "vfs/queue", {"fs": self.fs}).get("queue") or []
        items = sorted(queue, key=lambda item: int(item["id"]))
        now = time.monotonic()
        under_way = {int(i["id"]) for i in items if i.get("uploading")}
        self.uploading = {i: self.uploading.get(i, now) for i in under_way}

        def troubled(item: dict[str, Any]) -> bool:
            item_id = int(item["id"])
            if item_id in self.given_up:
                return False
            if failed(item):
                return True
            return bool(item.get("uploading")) and now - self.uploading[item_id] > KEEP_SUSPECT_S

        first = next((n for n, i in enumerate(items) if troubled(i)), None)
        if first is None:
            if not self.held:  # no failure seen: the write-back delay is only the time to see one
                hurry(self.sock, self.fs, items)
            self._release(items, items)
            return False, bool(items)
        head = items[first]
        head_id = int(head["id"])
        if self.head is None or self.head[0] != head_id:
            self.head = (head_id, now)
            if failed(head):
                self.log(f"{self.fs}: {head.get('name')} failed; newer uploads wait for it")
        elif now - self.head[1] > KEEP_MAX_S:
            self.given_up.add(head_id)
            self.log(f"{self.fs}: {head.get('name')} still fails; the others go on")
            return self._poll()
        # Older ones than the head (held, never failed) go first, in their order; the head
        # waits for them, then goes; every newer one waits.
        self._release(items[:first], items, keep_head=True)
        if first == 0:
            if head_id in self.held:
                self.held.discard(head_id)
                self._set(head_id, 0)
            elif not head.get("uploading") and float(head["expiry"]) > KEEP_RETRY_S:
                self._set(head_id, KEEP_RETRY_S)
        waiting = items[first + (first == 0) :]
        todo = [
            i for i in waiting if not i.get("uploading") and float(i["expiry"]) < HOLD_FOR_S / 2
        ]
        for item in reversed(todo):
            if self._set(int(item["id"]), HOLD_FOR_S, relative=True):
                self.held.add(int(item["id"]))
        return True, True

    def _release(
        self, items: list[dict[str, Any]], queue: list[dict[str, Any]], keep_head: bool = False
    ) -> None:
        """Let the held uploads among ``items`` go now, oldest (lowest writeback id) first,
        and before every waiting upload of ``queue`` that is not held (the head, or a file the
        keeper has not seen yet, which may be due already). Relative shifts: a hold someone
        else adds meanwhile (a refresh's) is kept."""
        held = [i for i in items if int(i["id"]) in self.held and not i.get("uploading")]
        floor = min(
            [0.0]
            + [
                float(i["expiry"])
                for i in queue
                if int(i["id"]) not in self.held and not i.get("uploading")
            ]
        )
        for rank, item in enumerate(held):
            due = floor - (len(held) - rank) * RELEASE_STEP_S
            self._set(int(item["id"]), due - float(item["expiry"]), relative=True)
            self.held.discard(int(item["id"]))
        if keep_head:
            return
        if held:
            self.log(f"{self.fs}: no failed upload is left; {len(held)} held go on in order")
        self.held.clear()
        self.head = None


def failed(item: dict[str, Any]) -> bool:
    """Whether an item of rclone's upload queue (``vfs/queue``) has failed at least once (rclone
    counts a try when the upload starts)."""
    tries = int(item.get("tries") or 0)
    return tries > (1 if item.get("uploading") else 0)


def hurry(sock: str, fs: str, queue: list[dict[str, Any]] | None = None) -> int:
    """Let the uploads of VFS ``fs`` that only wait for the write-back delay go now, in their
    order, unless one has failed or is held back (an order keeper's or a refresh's hold, or
    a write-back of HOLD_FOR_S / 2 or more): then the queue is left as it is. ``queue``: rc
    ``vfs/queue``'s answer, read under ``queue_lock`` by a caller that still holds it (else
    it is read here, under the lock). How many were hurried."""
    if queue is None:
        with queue_lock(sock):
            try:
                queue = rc(sock, "vfs/queue", {"fs": fs}).get("queue") or []
            except (OSError, RcError):
                return 0
            return hurry(sock, fs, queue)
    if any(failed(i) or float(i["expiry"]) >= HOLD_FOR_S / 2 for i in queue):
        return 0
    waiting = sorted(
        (int(i["id"]), float(i["expiry"]))
        for i in queue
        if not i.get("uploading") and float(i["expiry"]) > 0
    )
    hurried = 0
    for rank, (item_id, expiry) in enumerate(waiting):
        # after every upload already due (expiry <= 0), each just after the one before;
        # relative, so a hold someone adds meanwhile is kept
        params = {"fs": fs, "id": item_id, "expiry": rank * RELEASE_STEP_S - expiry,
                  "relative": True}  # fmt: skip
        try:
            rc(sock, "vfs/queue-set-expiry", params)
        except (OSError, RcError):
            continue  # started (or gone) meanwhile
        hurried += 1
    return hurried
