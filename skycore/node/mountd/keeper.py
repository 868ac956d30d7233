"""Upload order and quiet listings: the queue lock, a refresh's upload hold, the order keeper
and the drain's hurry."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from skycore.node.mountd.journal import CloseOrder
from skycore.node.mountd.order import OrderState, age, decide, released, upcoming
from skycore.node.mountd.rc import RcClient, RcError, rc

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
REFRESHER_TICK_S = 1.0  # a busy mount's refresh is tried again this much later
# An order keeper looks when rclone logs an upload-queue event (``events``); these bound the
# time between two looks when no event comes (an event lost to a log rotation, say):
KEEP_BUSY_LOOK_S = 5.0  # ... while uploads are released or waiting
KEEP_PAUSED_LOOK_S = 2.0  # ... while a refresh holds them (its end is an event too)
KEEP_IDLE_LOOK_S = 60.0  # ... while the queue is empty
# Without inotify (no ctypes in the node's python3) the keepers poll, as they used to:
KEEP_BUSY_POLL_S = 0.01  # how often an order keeper looks while an upload is released
KEEP_IDLE_POLL_S = 0.05  # ... and while none is (a newly closed file waits this long at most)
DAEMON_CHECK_S = 5.0  # how often the refresher asks whether its daemon lives, without a pidfd
RELEASE_STEP_S = 1e-6  # released (or hurried) uploads are due this far apart, oldest first
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


def _hold_marker(sock: str, fs: str) -> str:
    digest = hashlib.sha256(fs.encode()).hexdigest()[:16]
    name = f"{digest}.{os.getpid()}.{threading.get_ident()}"
    return os.path.join(os.path.dirname(sock), "holds", name)


def hold_active(sock: str, fs: str) -> bool:
    """True while a refresh of VFS ``fs`` holds its uploads (in any process of the node):
    an order keeper then releases nothing."""
    folder = os.path.join(os.path.dirname(sock), "holds")
    digest = os.path.basename(_hold_marker(sock, fs)).split(".")[0]
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    for name in names:
        parts = name.split(".")
        if parts[0] == digest and len(parts) == 3 and os.path.exists(f"/proc/{parts[1]}"):
            return True
    return False


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

    def __init__(self, sock: str, fs: str, light: bool = False) -> None:
        self.sock, self.fs = sock, fs
        self.light = light  # nothing was queued: the marker alone (no thread holding uploads)
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.over = False  # let go: holds no more
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> UploadHold:
        marker = _hold_marker(self.sock, self.fs)
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with queue_lock(self.sock), open(marker, "w"):
            pass  # from now on no order keeper releases an upload of the mount
        if not self.light:
            self._hold()  # the queued ones now, before anything else happens
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.light:
            self.stop.set()
            self.thread.join()
        with contextlib.suppress(OSError):
            os.unlink(_hold_marker(self.sock, self.fs))

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
        if self.light:
            return True
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
    pending = cache.get("uploadsInProgress") or cache.get("uploadsQueued")
    if quiet_wait < 1 and pending:
        return "busy", 0.0  # at a quiet moment instead (holding nothing back)
    # With nothing queued the hold is its marker alone (the order keepers release nothing
    # meanwhile); an upload that completes while it lists all the same is caught below.
    with UploadHold(sock, fs, light=not pending) as hold:
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


@dataclass(frozen=True)
class Look:
    """What one look of an order keeper found: ``busy`` while uploads are released or
    waiting, ``paused`` while a refresh holds them, ``due_in``: seconds until the oldest
    waiting file is old enough to go (a hold-back), else None."""

    busy: bool
    paused: bool = False
    due_in: float | None = None


def daemon_pid(d: str) -> int | None:
    """The pid of the rclone daemon of folder ``d`` as its start wrote it (None: unknown)."""
    try:
        with open(os.path.join(d, "rclone.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class OrderKeeper:
    """Applies the order rule (``order.decide``) to an ordered mount's upload queue: one look
    under the queue lock (writing down in the close-order journal the uploads seen for the
    first time), then the new expiries. The refresher keeps one per ordered mount, and a drain
    or a mount runs its own (the rule is a function of the queue and the journal, so they
    agree)."""

    def __init__(
        self,
        sock: str,
        fs: str,
        hold_back_s: float = 0.0,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.sock, self.fs, self.hold_back_s, self.log = sock, fs, hold_back_s, log
        self.state = OrderState()
        self.dir = os.path.dirname(sock)
        self.journal = CloseOrder(self.dir, fs)
        self.client = RcClient(sock)
        self._cache_path = ""
        # From the last look: the one upload released (id, name) and those waiting, in the
        # order they go (see ``release_next``); None and [] when that is not so simple.
        self.in_flight: tuple[int, str] | None = None
        self.upcoming: list[tuple[int, str]] = []

    def cache_path(self) -> str:
        """The VFS's cache data folder (asked of rclone once)."""
        if not self._cache_path:
            with contextlib.suppress(OSError, RcError):
                stats = self.client.call("vfs/stats", {"fs": self.fs}).get("diskCache") or {}
                self._cache_path = str(stats.get("path") or "")
        return self._cache_path

    def _pid(self) -> int:
        pid = daemon_pid(self.dir)
        if pid is None:
            pid = int(self.client.call("core/pid").get("pid") or 0)
        return pid

    def look(self) -> Look:
        """One look at the queue (see the class docstring)."""
        with queue_lock(self.sock):
            queue = self.client.call("vfs/queue", {"fs": self.fs}).get("queue") or []
            ranks = self.journal.ranks(queue, self._pid(), self.cache_path)
            paused = hold_active(self.sock, self.fs)
            now = time.monotonic()
            decision = decide(queue, self.state, now, self.hold_back_s, paused, ranks)
            for item_id, expiry in decision.expiries.items():
                params = {"fs": self.fs, "id": item_id, "expiry": expiry}
                with contextlib.suppress(OSError, RcError):  # gone meanwhile
                    self.client.call("vfs/queue-set-expiry", params)
        for line in decision.logs:
            self.log(f"{self.fs}: {line}")
        self.in_flight, self.upcoming = upcoming(
            queue, self.state, decision.expiries, ranks, self.hold_back_s, paused
        )
        due_in = None
        waiting = [i for i in queue if not released(i) and int(i["id"]) not in decision.expiries]
        if self.hold_back_s > 0 and waiting and not paused:
            due_in = max(0.0, self.hold_back_s - max(age(i) for i in waiting))
        return Look(decision.busy, paused, due_in)

    def release_next(self, succeeded: str) -> bool:
        """rclone logged that the upload of ``succeeded`` ended well: if that is the upload
        in flight, release the next of ``upcoming`` at once, with no look (a look takes
        0.3-1.2 ms, a release 0.2 ms). The rule would release the same one: rclone takes an
        upload off its queue before it answers again, files closed since the look rank after
        every waiting one, and anything else (a failure, a removed file, a hold) either logs
        a line that makes the caller look, or fails this release. Call it only where the name
        cannot be another mount's (``keepers``: the daemon's only ordered mount that uploads).
        True when it released one."""
        if self.in_flight is None or self.in_flight[1] != succeeded or not self.upcoming:
            self.in_flight, self.upcoming = None, []
            return False
        with queue_lock(self.sock):
            if hold_active(self.sock, self.fs):
                self.in_flight, self.upcoming = None, []
                return False
            params = {"fs": self.fs, "id": self.upcoming[0][0], "expiry": 0.0}
            try:
                self.client.call("vfs/queue-set-expiry", params)
            except (OSError, RcError):
                self.in_flight, self.upcoming = None, []
                return False  # gone meanwhile: the next look decides
        self.in_flight = self.upcoming.pop(0)
        return True

    def poll(self) -> bool:
        """One look at the queue; True while uploads are released or waiting."""
        return self.look().busy


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
