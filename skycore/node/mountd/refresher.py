"""Mounts that keep their listing: the listing at mount time, and the daemon's refresher
(background refreshes and the order keepers of its mounts)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from skycore.node.mountd.cachefull import CacheFullNotes
from skycore.node.mountd.events import DaemonWatch, Woken
from skycore.node.mountd.keeper import (
    COST_FACTOR,
    DAEMON_CHECK_S,
    IDLE_POLL_S,
    LOG_MAX_BYTES,
    PRIME_PENDING_WAIT_S,
    PRIME_QUIET_WAIT_S,
    PRIME_TIMEOUT_S,
    REFRESHER_TICK_S,
    OrderKeeper,
    refresh_until_clean,
)
from skycore.node.mountd.keepers import DaemonKeepers
from skycore.node.mountd.rc import RcError, answers, live_mounts, norm, rc, warn

_registry_lock = threading.Lock()


def keep_listing(d: str, dst: str, every: float, hold_back: float | None = None) -> bool:
    """For a mount that keeps its listing, just mounted through DIR ``d``'s daemon: list it
    (a failure is a warning: the refresher tries again) and register it with the daemon's
    refresher (which lists it again every ``every`` s and, for an ordered mount, whose
    ``hold_back`` is not None, releases its uploads in order: ``keeper.OrderKeeper``).
    True when registered."""
    sock, p = os.path.join(d, "rc.sock"), norm(dst)
    try:
        fs = live_mounts(sock)[p]
    except (OSError, RcError, KeyError, TypeError) as e:
        warn(f"skycore: warning: cannot find the mount {dst} in its rclone daemon ({e})")
        return False
    # The mount's top directory is listed now (one request or a few, holding its lock: no
    # writer uses the mount yet); the whole tree is listed by the refresher at once, in the
    # background (a big bucket's listing takes seconds: 5-14 s for 10,000 objects here).
    # Files a dead daemon left in the cache are queued again by the new one, each with an
    # entry that holds no object until a listing shows it (rclone gives the object only to
    # files written through a handle): such an entry reads as an empty file. So when there
    # are some, the whole tree is listed here once they are uploaded (a bounded wait).
    cache = rc(sock, "vfs/stats", {"fs": fs}).get("diskCache") or {}
    if cache.get("uploadsQueued") or cache.get("uploadsInProgress"):
        deadline = time.monotonic() + PRIME_PENDING_WAIT_S
        keeper = None if hold_back is None else OrderKeeper(sock, fs, hold_back, warn)
        while time.monotonic() < deadline:
            if keeper is not None:  # an ordered mount's uploads go only when released
                keeper.poll()
            cache = rc(sock, "vfs/stats", {"fs": fs}).get("diskCache") or {}
            if not cache.get("uploadsQueued") and not cache.get("uploadsInProgress"):
                break
            time.sleep(IDLE_POLL_S)
        outcome, _ = refresh_until_clean(sock, fs, PRIME_QUIET_WAIT_S, PRIME_TIMEOUT_S)
        whole = outcome == "ok"
    else:
        try:
            out = rc(sock, "vfs/refresh", {"fs": fs}, timeout=PRIME_TIMEOUT_S)
            why = "; ".join(str(v) for v in (out.get("result") or {}).values() if v != "OK")
        except (OSError, RcError) as e:
            why = str(e) or type(e).__name__
        outcome, whole = ("failed: " + why) if why else "ok", False
    if outcome != "ok":
        warn(
            f"skycore: warning: listing {dst} from the store did not succeed ({outcome}); "
            "until a listing does (the node tries again every "
            f"{max(every, REFRESHER_TICK_S):g} s), creating a file there may wait for the store"
        )
    path = os.path.join(d, "refresh.json")
    with _registry_lock, open(os.path.join(d, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The daemon's mounts as they are now: mounts made meanwhile (by other threads, while
        # this one listed) are registered already and must stay.
        live = {**live_mounts(sock), p: fs}
        table = _registry(d)
        table = {k: v for k, v in table.items() if live.get(k) == v.get("fs")}
        table[p] = {"fs": fs, "every": every, "listed": whole, "order": hold_back}
        with open(path + ".tmp", "w") as f:
            json.dump(table, f)
        os.replace(path + ".tmp", path)
    return True


def _registry(d: str) -> dict[str, dict[str, Any]]:
    try:
        with open(os.path.join(d, "refresh.json")) as f:
            table = json.load(f)
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def _refresher_pid(d: str) -> int | None:
    """The pid of DIR ``d``'s refresher if it runs."""
    try:
        with open(os.path.join(d, "refresher.pid")) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"refresher" in args and os.fsencode(d) in args else None


def spawn_refresher(d: str) -> None:
    """Start DIR ``d``'s refresher unless it runs (detached; output to its log)."""
    if _refresher_pid(d) is not None:
        return
    # the program file this process runs (a node's helper file; not a file when streamed)
    me = os.path.abspath(getattr(sys.modules["__main__"], "__file__", None) or "")
    if not os.path.isfile(me):
        warn(f"skycore: warning: no refresher for {d}: the mount helper is not a file")
        return
    with open(os.path.join(d, "refresher.log"), "ab") as out:
        subprocess.Popen(
            [sys.executable or "python3", me, "refresher", d],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )  # fmt: skip


def _log(d: str, msg: str) -> None:
    path = os.path.join(d, "refresher.log")
    with contextlib.suppress(OSError):
        if os.path.getsize(path) > LOG_MAX_BYTES:
            os.truncate(path, 0)
    with contextlib.suppress(OSError), open(path, "a") as f:
        f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + msg + "\n")


def ordered_mounts(d: str) -> dict[str, float]:
    """The ordered mounts registered in DIR ``d``: VFS name -> hold-back seconds."""
    return {
        str(e["fs"]): float(e["order"])
        for e in _registry(d).values()
        if isinstance(e, dict) and e.get("order") is not None
    }


def _follow_daemon(watch: DaemonWatch, sock: str) -> bool:
    """Make ``watch`` wake when the daemon on ``sock`` ends; False when it cannot."""
    try:
        pid = int(rc(sock, "core/pid")["pid"])
    except (OSError, RcError, KeyError, ValueError, TypeError):
        return False
    return watch.follow_pid(pid)


def cmd_refresher(d: str) -> int:
    """The daemon of DIR ``d``'s companion, one per daemon (a lock; a second one waits up to
    5 s for a first that is ending): it keeps the order of the ordered mounts registered in
    ``d`` (``keep_listing``), refreshes their listings, each every max(its ``every``,
    COST_FACTOR x its last refresh's duration) at the first moment its mount has no upload
    pending, notes when the cache disk is full, and ends when the daemon is gone. It sleeps
    until something happens (``events.DaemonWatch``): rclone logs an upload event, a hold
    ends, the registry changes, a listing is due or ends, the daemon's process ends."""
    sock = os.path.join(d, "rc.sock")
    lock = open(os.path.join(d, "refresher.lock"), "w")  # noqa: SIM115 (held for life)
    deadline = time.monotonic() + 5
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                return 0
            time.sleep(0.1)
    pidfile = os.path.join(d, "refresher.pid")

    def claim() -> None:
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)

    claim()
    watch = DaemonWatch(d)
    notes = CacheFullNotes(d)
    followed = _follow_daemon(watch, sock)
    next_check = time.monotonic() + DAEMON_CHECK_S
    rounds = ListingRounds(d, sock, watch)
    keepers = DaemonKeepers(d, lambda m: _log(d, m))
    woken = Woken(registry=True)
    while True:
        now = time.monotonic()
        if woken.gone or (not followed and now >= next_check):
            next_check = now + DAEMON_CHECK_S
            if woken.gone or not answers(sock):
                # Ending: a mount batch that starts a new daemon now sees no refresher and
                # starts one, or this one sees the new daemon and goes on.
                with contextlib.suppress(OSError):
                    os.unlink(pidfile)
                if answers(sock):
                    claim()
                    followed = _follow_daemon(watch, sock)
                    woken.registry = True
                else:
                    _log(d, "the daemon is gone; the refresher ends")
                    watch.close()
                    return 0
        try:
            if woken.no_space:
                notes.note(woken.no_space, list(rounds.live.values()))
            if woken.registry or rounds.due_now(now) or not watch.evented:
                rounds.run()
                keepers.match(rounds.ordered, rounds.uploaders())
            keepers.handle(woken, watch.evented)
        except Exception as e:  # keep going whatever one round met
            _log(d, f"refresher error: {type(e).__name__}: {e}")
        wake_at = keepers.wake_at() + rounds.wake_at()
        if not followed:
            wake_at.append(next_check)
        if not watch.evented:
            wake_at.append(time.monotonic() + REFRESHER_TICK_S)
        timeout = max(0.0, min(wake_at) - time.monotonic()) if wake_at else None
        woken = watch.wait(timeout)


class ListingRounds:
    """The background listings of the daemon of folder ``d``: which mounts are live and
    ordered, when each mount's next listing is due, the listings under way (each in a
    thread: a listing the store holds must not stop the order keepers, nor this mount's:
    nothing uploads while it lists)."""

    def __init__(self, d: str, sock: str, watch: DaemonWatch) -> None:
        self.d, self.sock, self.watch = d, sock, watch
        self.due: dict[str, float] = {}
        self.state: dict[str, str] = {}  # last refresh's outcome
        self.running: dict[str, threading.Thread] = {}
        self.results: dict[str, tuple[str, float]] = {}
        self.live: dict[str, str] = {}  # mount point -> VFS name
        self.ordered: dict[str, float] = {}  # VFS name -> hold-back s
        self._uploads: dict[str, bool] = {}  # VFS name -> may upload (asked once)

    def due_now(self, now: float) -> bool:
        return any(t <= now for fs, t in self.due.items() if fs not in self.running)

    def wake_at(self) -> list[float]:
        return [t for fs, t in self.due.items() if fs not in self.running]

    def uploaders(self) -> set[str]:
        """The live mounts that may upload: a writable cache (rc ``vfs/stats``)."""
        out = set()
        for fs in self.live.values():
            if fs not in self._uploads:
                try:
                    stats = rc(self.sock, "vfs/stats", {"fs": fs})
                except (OSError, RcError):
                    out.add(fs)  # unknown: counted as one
                    continue
                opt = stats.get("opt") or {}
                self._uploads[fs] = "diskCache" in stats and not opt.get("ReadOnly")
            if self._uploads[fs]:
                out.add(fs)
        return out

    def run(self) -> None:
        """Match the live mounts, take the ended listings' results and start those due."""
        mounts = rc(self.sock, "mount/listmounts").get("mountPoints") or []
        self.live = {m["MountPoint"]: m["Fs"] for m in mounts}
        vfs = set(self.live.values())
        self.ordered = {fs: b for fs, b in ordered_mounts(self.d).items() if fs in vfs}
        for fs in [fs for fs in self.due if fs not in vfs]:
            del self.due[fs]
        entries = [e for p, e in _registry(self.d).items() if self.live.get(p) == e.get("fs")]
        for e in entries:
            fs, period = e["fs"], float(e.get("every") or 0)
            if fs in self.running and not self.running[fs].is_alive():
                del self.running[fs]
                self._took(fs, period)
            if fs in self.running:
                continue
            if period <= 0 and self.state.get(fs) == "ok":  # listed once, as asked
                self.due.pop(fs, None)
                continue
            now = time.monotonic()
            # a mount whose whole tree is not listed yet: at the first quiet moment
            if self.due.setdefault(fs, now + (period if e.get("listed", True) else 0)) > now:
                continue
            self.running[fs] = threading.Thread(target=self._refresh, args=(fs,), daemon=True)
            self.running[fs].start()

    def _refresh(self, fs: str) -> None:
        try:
            self.results[fs] = refresh_until_clean(self.sock, fs)
        finally:
            self.watch.poke()  # the refresher takes the result at once

    def _took(self, fs: str, period: float) -> None:
        """Schedule the next listing of ``fs`` after the one that ended; log what changed."""
        d = self.d
        outcome, took = self.results.pop(fs, ("failed: no result", 0.0))
        if outcome == "busy":  # again at the next quiet moment
            self.due[fs] = time.monotonic() + REFRESHER_TICK_S
            return
        delay = max(period, COST_FACTOR * took, 1.0)
        self.due[fs] = time.monotonic() + delay
        if delay > max(period, 1.0):  # a slow listing spaces the refreshes
            _log(d, f"refreshing {fs}: {outcome} in {took:.1f} s; the next "
                    f"in {delay:.0f} s ({COST_FACTOR:g}x that)")  # fmt: skip
        was = self.state.get(fs, "ok")
        if outcome != "ok" and (outcome != was or outcome == "raced"):
            _log(d, f"refreshing {fs}: {outcome}")
        elif outcome == "ok" and was != "ok":
            _log(d, f"refreshing {fs}: ok again ({took:.2f} s)")
        self.state[fs] = outcome
