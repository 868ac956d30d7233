"""skycore's mount helper on a node (python3 standard library only; streamed to the node).

One ``rclone rcd`` per node serves every mount of that node (one per distinct ``--transfers``
setting, since that option is global to a daemon). Each daemon has a folder
``BASE/rcd-t<N>`` holding its unix rc socket, log and VFS cache. This program talks HTTP to
those sockets; nothing else on the node needs rclone's command line.

    python3 - daemon RCLONE CONFIG DIR TRANSFERS [FLAG...]  start DIR's daemon unless it answers
    python3 - mount SOCK FS DST VFS_JSON MOUNT_JSON [CONFIG_JSON]
                                                     mount FS at DST through that daemon
    python3 - up RCLONE CONFIG DIR TRANSFERS FS DST VFS_JSON MOUNT_JSON [FLAG...]
                                                     daemon + mount, until DST answers
    python3 - up-many SPECS_JSON [--copies COPIES_JSON] INDEX...
                                                     the same for several mounts at once, and
                                                     the COPY snapshots through a daemon of
                                                     their own that quits after them
    python3 - copy-many COPIES_JSON                  only the COPY snapshots
    python3 - live BASE DST...                       print "SKYCORE_LIVE <dst>" per live mount
    python3 - drain BASE TIMEOUT DST...              wait until every DST is durable
    python3 - unmount BASE TIMEOUT DST...            drain, then unmount (never with uploads
                                                     pending)
    python3 FILE refresher DIR                       refresh the listings of DIR's daemon's
                                                     mounts that keep theirs (up-many starts
                                                     it; it ends with the daemon)

drain and unmount exit 0 when done, 1 when uploads were still pending at the timeout and 2
when a mount's rclone does not answer.

The drain rule (the only one skycore has): a cached mount is durable when rclone's VFS has
nothing queued or uploading (``vfs/stats``) *after* the kernel has handed rclone every FUSE
request of that mount (the connection's ``waiting`` count in fusectl is 0). FUSE sends
RELEASE, which queues a closed file for upload, asynchronously after close(); reading
``waiting`` first and the queue second means no file closed before the drain began can be
missed. One confirming poll follows. Where fusectl cannot be read the rule falls back to the
queue being empty for STABLE_POLLS polls in a row. While it waits, a drain lets the uploads
that only wait for the write-back delay go at once (``hurry``), so a flush never pays it.

A mount whose spec has ``refresh`` (a writable MOUNT_CACHED mount, which keeps its directory
listing for its life so that a writer never waits for the store) gets its whole tree listed
when it is mounted and again every ``refresh`` seconds by the daemon's refresher (see
``refresh_listing``: rc ``vfs/refresh`` recursive, which lists without holding the
directories' locks and keeps the old listing when it fails).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

POLL_S = 0.05
CONFIRM_POLLS = 2  # clean polls in a row when the FUSE connection's queue is visible
STABLE_POLLS = 5  # clean polls in a row when it is not
BUSY_FUSE_POLLS = 40  # after this many polls with FUSE requests in flight, ignore them
RC_TIMEOUT_S = 15.0
RCLONE_GONE = "is not answering"  # what drain says of a mount whose daemon is gone


class RcError(Exception):
    """The daemon answered with an error."""


def say(msg: str) -> None:
    print(msg, flush=True)


def warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rc(sock: str, method: str, params: dict[str, Any] | None = None, timeout: float = 0) -> Any:
    """POST ``method`` to the rc unix socket ``sock``; the JSON answer. OSError when nothing
    answers, RcError when rclone answers with an error."""
    body = json.dumps(params or {}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout or RC_TIMEOUT_S)
    chunks = []
    try:
        s.connect(sock)
        s.sendall(
            b"POST /%s HTTP/1.0\r\nHost: rc\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (method.encode(), len(body)) + body
        )
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        s.close()
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2:
        raise OSError(f"no HTTP answer on {sock}")
    try:
        out = json.loads(payload or b"{}")
    except ValueError:
        out = {"error": payload[:300].decode("utf-8", "replace")}
    if status[1] != b"200":
        raise RcError(out.get("error", out) if isinstance(out, dict) else out)
    return out


def answers(sock: str) -> bool:
    """True when a daemon answers on ``sock``."""
    if not os.path.exists(sock):
        return False
    try:
        rc(sock, "core/pid", timeout=5)
    except (OSError, RcError):
        return False
    return True


def norm(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def mountinfo() -> dict[str, tuple[str, str]]:
    """{mount point: (major:minor, fs type)} of this mount namespace."""
    out = {}
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split()
            if b" - " not in line or len(fields) < 5:
                continue
            fstype = line.split(b" - ", 1)[1].split()[0].decode("utf-8", "replace")
            point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
            out[os.fsdecode(point)] = (fields[2].decode(), fstype)
    return out


def daemon_sockets(base: str) -> list[str]:
    return sorted(glob.glob(os.path.join(base, "rcd-*", "rc.sock")))


def served(base: str) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """({mount point: (socket, fs)} of every answering daemon under ``base``, [sockets that
    exist but do not answer])."""
    table: dict[str, tuple[str, str]] = {}
    silent = []
    for sock in daemon_sockets(base):
        try:
            mounts = rc(sock, "mount/listmounts").get("mountPoints") or []
        except (OSError, RcError):
            silent.append(sock)
            continue
        for m in mounts:
            table[m["MountPoint"]] = (sock, m["Fs"])
    return table, silent


# --- daemon / mount ---------------------------------------------------------------------------


def cmd_daemon(rclone: str, config: str, d: str, transfers: str, *extra: str) -> int:
    """Start the daemon of folder ``d`` unless one answers there (under a lock, so mounts
    started side by side share one daemon)."""
    return 1 if start_daemon(rclone, config, d, transfers, *extra) is None else 0


def start_daemon(rclone: str, config: str, d: str, transfers: str, *extra: str) -> bool | None:
    """``cmd_daemon``: True when this call started the daemon, False when one answered
    already, None when it did not start."""
    sock, log = os.path.join(d, "rc.sock"), os.path.join(d, "rclone.log")
    os.makedirs(os.path.join(d, "cache"), mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    with open(os.path.join(d, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if answers(sock):
            return False
        if os.path.exists(sock):
            os.unlink(sock)
        with open(log, "ab") as out:
            # Output goes to the log file: a daemon holding a `docker exec`'s streams stalls
            # the engine on that exec and the next.
            proc = subprocess.Popen(
                [rclone, "rcd", "--config", config, "--rc-addr", "unix://" + sock,
                 "--rc-no-auth", "--cache-dir", os.path.join(d, "cache"),
                 "--transfers", transfers, "--retries", "3", "--low-level-retries", "10",
                 "--log-file", log, "--log-level", "INFO", *extra],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if answers(sock):
                say(f"skycore: rclone daemon {d} started (pid {proc.pid})")
                return True
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.poll()
        warn(f"skycore: rclone daemon {d} did not start (exit {proc.returncode}); last lines:")
        with open(log, errors="replace") as f:
            warn("".join(f.readlines()[-20:]))
        return None


def cmd_mount(
    sock: str, fs: str, dst: str, vfs_opt: str, mount_opt: str, rc_config: str = "{}"
) -> int:
    """Mount ``fs`` at ``dst`` through the daemon on ``sock``; ``rc_config`` (JSON) is rclone
    global options for this mount alone (``_config``)."""
    params: dict[str, Any] = {
        "fs": fs,
        "mountPoint": norm(dst),
        "vfsOpt": json.loads(vfs_opt),
        "mountOpt": json.loads(mount_opt),
    }
    if json.loads(rc_config):
        params["_config"] = json.loads(rc_config)
    try:
        rc(sock, "mount/mount", params, timeout=120)
    except (OSError, RcError) as e:
        warn(f"skycore: rclone failed to mount {dst}: {e}")
        return 1
    return 0


def wait_mounted(dst: str, timeout: float = 10) -> bool:
    """True once ``dst`` is in the mount table and answers a stat."""
    p = norm(dst)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p in mountinfo():
            try:
                os.stat(p)
                return True
            except OSError:
                pass
        time.sleep(0.02)
    warn(f"skycore: rclone did not mount {dst}")
    return False


def cmd_up(
    rclone: str, config: str, d: str, transfers: str, fs: str, dst: str, vfs_opt: str,
    mount_opt: str, *extra: str,
) -> int:  # fmt: skip
    """Start the daemon if needed, mount, and wait until the mount point answers."""
    rc_ = cmd_daemon(rclone, config, d, transfers, *extra)
    if rc_ != 0:
        return rc_
    rc_ = cmd_mount(os.path.join(d, "rc.sock"), fs, dst, vfs_opt, mount_opt)
    if rc_ != 0:
        return rc_
    return 0 if wait_mounted(dst) else 1


def cmd_up_many(specs_json: str, *args: str) -> int:
    """Mount the requests ``INDEX...`` of ``specs_json`` (a JSON list of {rclone, config, dir,
    transfers, extra, fs, dst, vfs, mount}) and make the COPY snapshots of ``--copies
    COPIES_JSON`` (see ``copy_many``): each daemon started once, every mount/mount call and
    copy issued at once, then wait until every mount point answers (one process for all
    the mounts and copies of a node: python's and rclone's start-ups were most of a node's
    mounting CPU)."""
    copies: list[dict[str, Any]] = []
    indices = list(args)
    if indices[:1] == ["--copies"]:
        copies = json.loads(indices[1])
        indices = indices[2:]
    specs = json.loads(specs_json)
    todo = [specs[int(i)] for i in indices]
    daemons: dict[str, dict[str, Any]] = {}
    for s in [*todo, *copies]:
        daemons.setdefault(s["dir"], s)
    for d, s in daemons.items():
        if start_daemon(s["rclone"], s["config"], d, s["transfers"], *s["extra"]) is None:
            return 1
    failed: list[dict[str, Any]] = []
    copy_failed: list[dict[str, Any]] = []

    refreshed: set[str] = set()

    def one(s: dict[str, Any]) -> None:
        sock = os.path.join(s["dir"], "rc.sock")
        vfs, mnt = json.dumps(s["vfs"]), json.dumps(s["mount"])
        config = json.dumps(s.get("rc_config") or {})
        if cmd_mount(sock, s["fs"], s["dst"], vfs, mnt, config) != 0 or not wait_mounted(s["dst"]):
            failed.append(s)
            return
        if s.get("refresh") is None:
            return
        try:
            if keep_listing(s["dir"], s["dst"], float(s["refresh"])):
                refreshed.add(s["dir"])
        except (OSError, RcError) as e:
            warn(f"skycore: warning: {s['dst']} is mounted but not listed ({e})")

    def copy(c: dict[str, Any]) -> None:
        if not copy_one(os.path.join(c["dir"], "rc.sock"), c["sources"], c["dst"]):
            copy_failed.append(c)

    threads = [threading.Thread(target=one, args=(s,)) for s in todo]
    threads += [threading.Thread(target=copy, args=(c,)) for c in copies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in failed:
        log = os.path.join(s["dir"], "rclone.log")
        warn(f"skycore: rclone failed to mount {s['dst']}; last lines of {log}:")
        try:
            with open(log, errors="replace") as f:
                warn("".join(f.readlines()[-20:]))
        except OSError:
            pass
    for d in refreshed:
        spawn_refresher(d)
    # The copies' daemon serves no mount: it quits now, giving its memory back.
    for d in {c["dir"] for c in copies}:
        if not any(s["dir"] == d for s in todo):
            retire(os.path.join(d, "rc.sock"))
    return 1 if failed or copy_failed else 0


def cmd_copy_many(copies_json: str) -> int:
    """The COPY snapshots of ``copies_json`` alone (``up-many`` with no mount)."""
    return cmd_up_many("[]", "--copies", copies_json)


def remote_colon(path: str) -> int:
    """Index of the ':' that ends the remote part of an rclone path (``remote:path`` or a
    connection string ``:type,k="v":path``, whose quoted values may hold ':'); -1 if none."""
    quote = ""
    for j in range(1 if path.startswith(":") else 0, len(path)):
        c = path[j]
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == ":":
            return j
    return -1


def split_remote(path: str) -> tuple[str, str]:
    """(parent, leaf) of an rclone path ``remote:bucket/a/b`` (leaf '' for a bucket or a
    remote root); a connection string's quoted values may hold ':' and '/'."""
    colon = remote_colon(path)
    rest = path[colon + 1 :].strip("/")
    if "/" not in rest:
        return path, ""
    parent, leaf = rest.rsplit("/", 1)
    return path[: colon + 1] + parent, leaf


def copy_one(sock: str, sources: list[str], dst: str, attempts: int = 3) -> bool:
    """Copy the first of ``sources`` (rclone paths, tried in turn: the user's credentials,
    then anonymous) that works to ``dst`` through the daemon on ``sock``: a folder (bucket
    or prefix) into the folder ``dst``, a single object to the file ``dst`` (``rclone
    copyto``). Each source gets ``attempts`` tries (``--retries``); progress is printed
    every 10 s of a long copy."""
    target = norm(dst)
    errors: list[str] = []
    for n, src in enumerate(sources):
        tries = attempts if n == len(sources) - 1 else 1
        for _ in range(tries):
            try:
                copy_through(sock, src, target)
            except (OSError, RcError) as e:
                errors.append(f"{src}: {e}")
                continue
            say(f"skycore: copied {src} to {dst}")
            return True
    warn(f"skycore: copying to {dst} failed: " + "; ".join(errors[-3:]))
    return False


COPY_CONFIG = {"Transfers": 4, "Checkers": 8}


def copy_through(sock: str, src: str, target: str) -> None:
    """One try of ``copy_one``: ``sync/copy`` for a folder, ``operations/copyfile`` when the
    source is a single object; RcError on failure."""
    try:
        run_job(sock, "sync/copy", {"srcFs": src, "dstFs": target}, target)
        os.makedirs(target, exist_ok=True)  # an empty bucket is an empty folder
        return
    except RcError as e:
        if "is a file not a directory" not in str(e):
            raise
    parent, leaf = split_remote(src)
    params = {
        "srcFs": parent, "srcRemote": leaf,
        "dstFs": os.path.dirname(target) or "/", "dstRemote": os.path.basename(target),
    }  # fmt: skip
    run_job(sock, "operations/copyfile", params, target)


def run_job(sock: str, method: str, params: dict[str, Any], what: str) -> None:
    """Run rc ``method`` as a background job of the daemon and wait for it, printing its
    progress every 10 s; RcError with rclone's message if it failed."""
    job = rc(sock, method, {**params, "_async": True, "_config": COPY_CONFIG})["jobid"]
    last = time.monotonic()
    while True:
        st = rc(sock, "job/status", {"jobid": job})
        if st.get("finished"):
            if st.get("success"):
                return
            raise RcError(st.get("error") or "failed")
        time.sleep(0.05)
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            stats = rc(sock, "core/stats", {"group": f"job/{job}"})
            say(
                f"skycore: copying to {what}: {stats.get('transfers', 0)} file(s), "
                f"{stats.get('bytes', 0) / 2**20:.1f} MiB so far"
            )


def cmd_live(base: str, dsts: list[str]) -> int:
    """Print ``SKYCORE_LIVE <dst>`` for each ``dst`` mounted and served by an answering
    daemon."""
    table, _ = served(base)
    mounted = mountinfo()
    for dst in dsts:
        p = norm(dst)
        if p in table and p in mounted:
            try:
                os.stat(p)
            except OSError:
                continue
            say("SKYCORE_LIVE " + dst)
    return 0


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
    upload ended, ahead of the held ones (seen in CI at a 0.1 s write-back: a loaded
    machine spaced polls further apart). So the write-back delay (1 s) is the time the keeper
    has to see a new upload, and held uploads are let go ahead of every one it has not held.
    While no upload has failed, those it sees go at once (``hurry``): the delay is only paid
    by a file closed while the keeper is idle (its tick, 1 s) or behind a failure."""

    def __init__(self, sock: str, fs: str, log: Callable[[str], None] = lambda _: None) -> None:
        self.sock, self.fs, self.log = sock, fs, log
        self.held: set[int] = set()
        self.head: tuple[int, float] | None = None  # (id, since)
        self.uploading: dict[int, float] = {}  # id -> first seen under way
        self.given_up: set[int] = set()

    def _set(self, item_id: int, expiry: float, relative: bool = False) -> bool:
        params = {"fs": self.fs, "id": item_id, "expiry": expiry, "relative": relative}
        try:
            rc(self.sock, "vfs/queue-set-expiry", params)
        except (OSError, RcError):
            return False
        return True

    def poll(self) -> tuple[bool, bool]:
        """One look at the queue: (holding uploads back, uploads queued or under way)."""
        with queue_lock(self.sock):
            return self._poll()

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


_registry_lock = threading.Lock()


def keep_listing(d: str, dst: str, every: float) -> bool:
    """For a mount that keeps its listing, just mounted through DIR ``d``'s daemon: list it
    (a failure is a warning: the refresher tries again) and register it with the daemon's
    refresher (which lists it again every ``every`` s and keeps its uploads in order).
    True when registered."""
    sock, p = os.path.join(d, "rc.sock"), norm(dst)
    try:
        live = {m["MountPoint"]: m["Fs"] for m in rc(sock, "mount/listmounts")["mountPoints"]}
        fs = live[p]
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
        while time.monotonic() < deadline:
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
        table = _registry(d)
        table = {k: v for k, v in table.items() if live.get(k) == v.get("fs")}
        table[p] = {"fs": fs, "every": every, "listed": whole}
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
    me = os.path.abspath(globals().get("__file__") or "")
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


def cmd_refresher(d: str) -> int:
    """Refresh the listings registered in DIR ``d`` (``keep_listing``), each every
    max(its ``every``, COST_FACTOR x its last refresh's duration), at the first moment its
    mount has no upload pending; end when the daemon is gone. One per daemon (a lock; a
    second one waits up to 5 s for a first that is ending)."""
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
    due: dict[str, float] = {}
    state: dict[str, str] = {}  # last refresh's outcome
    keepers: dict[str, OrderKeeper] = {}
    running: dict[str, threading.Thread] = {}  # refreshes under way
    results: dict[str, tuple[str, float]] = {}
    silent = 0
    tick = REFRESHER_TICK_S
    while True:
        time.sleep(tick)
        tick = REFRESHER_TICK_S
        try:
            mounts = rc(sock, "mount/listmounts").get("mountPoints") or []
        except (OSError, RcError):
            silent += 1
            if silent < REFRESHER_GONE_TICKS:
                continue
            # Ending: a mount batch that starts a new daemon now sees no refresher and
            # starts one, or this one sees the new daemon and goes on.
            with contextlib.suppress(OSError):
                os.unlink(pidfile)
            if answers(sock):
                claim()
                silent = 0
                continue
            _log(d, "the daemon is gone; the refresher ends")
            return 0
        silent = 0
        try:
            live = {m["MountPoint"]: m["Fs"] for m in mounts}
            entries = [e for p, e in _registry(d).items() if live.get(p) == e.get("fs")]
            for e in entries:
                fs, period = e["fs"], float(e.get("every") or 0)
                if fs in running and not running[fs].is_alive():
                    del running[fs]
                    outcome, took = results.pop(fs, ("failed: no result", 0.0))
                    if outcome == "busy":  # again at the next quiet moment
                        due[fs] = time.monotonic() + REFRESHER_TICK_S
                    else:
                        delay = max(period, COST_FACTOR * took, 1.0)
                        due[fs] = time.monotonic() + delay
                        if delay > max(period, 1.0):  # a slow listing spaces the refreshes
                            _log(d, f"refreshing {fs}: {outcome} in {took:.1f} s; the next "
                                    f"in {delay:.0f} s ({COST_FACTOR:g}x that)")  # fmt: skip
                        was = state.get(fs, "ok")
                        if outcome != "ok" and (outcome != was or outcome == "raced"):
                            _log(d, f"refreshing {fs}: {outcome}")
                        elif outcome == "ok" and was != "ok":
                            _log(d, f"refreshing {fs}: ok again ({took:.2f} s)")
                        state[fs] = outcome
                keeper = keepers.setdefault(fs, OrderKeeper(sock, fs, lambda m: _log(d, m)))
                holding, queued = keeper.poll()
                if holding or queued:
                    tick = min(tick, KEEP_HOLD_POLL_S if holding else KEEP_POLL_S)
                if holding or fs in running or (period <= 0 and state.get(fs) == "ok"):
                    continue
                now = time.monotonic()
                # a mount whose whole tree is not listed yet: at the first quiet moment
                if due.setdefault(fs, now + (period if e.get("listed", True) else 0)) > now:
                    continue
                # In a thread: a listing the store holds must not stop the other mounts'
                # order keepers (nor this one's: nothing uploads while it lists).
                running[fs] = threading.Thread(
                    target=lambda fs=fs: results.__setitem__(fs, refresh_until_clean(sock, fs)),
                    daemon=True,
                )
                running[fs].start()
        except Exception as e:  # keep refreshing whatever one round met
            _log(d, f"refresher error: {type(e).__name__}: {e}")


# --- drain / unmount --------------------------------------------------------------------------


def fuse_waiting(majmin: str | None) -> int | None:
    """FUSE requests of the connection ``majmin`` not yet answered (None: unknown)."""
    if not majmin:
        return None
    try:
        with open(f"/sys/fs/fuse/connections/{majmin.split(':')[1]}/waiting") as f:
            return int(f.read().strip())
    except (OSError, ValueError, IndexError):
        return None


def drain(base: str, timeout: float, dsts: list[str]) -> int:
    """The drain rule (see the module docstring) for every ``dst``; 0, 1 or 2."""
    table, _ = served(base)
    mounted = mountinfo()
    targets: dict[str, tuple[str, str, str | None]] = {}
    for dst in dsts:
        p = norm(dst)
        if p in table:
            sock, fs = table[p]
            targets[dst] = (sock, fs, mounted.get(p, ("", ""))[0] or None)
        elif p in mounted and mounted[p][1] == "fuse.rclone":
            warn(f"skycore: rclone serving {dst} {RCLONE_GONE}")
            return 2
        else:
            say(f"skycore: no rclone serving {dst}; nothing to drain")
    deadline = time.monotonic() + timeout
    clean = dict.fromkeys(targets, 0)
    busy_fuse = dict.fromkeys(targets, 0)
    last_print: dict[str, int] = {}
    pending: dict[str, tuple[int, int]] = {}
    while targets:
        for dst, (sock, fs, majmin) in list(targets.items()):
            waiting = fuse_waiting(majmin)  # first the kernel's queue, then rclone's
            try:
                stats = rc(sock, "vfs/stats", {"fs": fs})
            except OSError as e:
                warn(f"skycore: rclone serving {dst} {RCLONE_GONE}: {e}")
                return 2
            except RcError as e:
                warn(f"skycore: unexpected vfs/stats for {dst}: {e}")
                return 2
            cache = stats.get("diskCache")
            q, up = (cache["uploadsQueued"], cache["uploadsInProgress"]) if cache else (0, 0)
            pending[dst] = (q, up)
            if waiting:
                busy_fuse[dst] += 1
            if q or up:
                clean[dst] = 0
                if q:  # those that only wait for the write-back delay go now
                    hurry(sock, fs)
                now = int(time.monotonic())
                if last_print.get(dst) != now:
                    last_print[dst] = now
                    left = int(deadline - time.monotonic())
                    say(f"skycore: draining {dst}: {q} queued, {up} uploading ({left}s left)")
            elif not waiting or busy_fuse[dst] > BUSY_FUSE_POLLS:
                clean[dst] += 1
            need = STABLE_POLLS if waiting is None else CONFIRM_POLLS
            if clean[dst] >= need:
                say(f"skycore: {dst} drained")
                del targets[dst]
        if targets and time.monotonic() > deadline:
            for dst in targets:
                q, up = pending.get(dst, (0, 0))
                warn(f"skycore: timed out draining {dst}: {q} queued, {up} uploading")
            return 1
        if targets:
            time.sleep(POLL_S)
    return 0


def lazy_unmount(path: str) -> None:
    for cmd in (["fusermount3", "-uz", path], ["fusermount", "-uz", path], ["umount", "-l", path]):
        try:
            if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
                return
        except OSError:
            continue


def cmd_unmount(base: str, timeout: float, dsts: list[str]) -> int:
    """Drain each ``dst``, then unmount it; refuse (1) with uploads pending. A mount whose
    rclone is gone is unmounted lazily (its cache stays on disk for the next mount). A daemon
    left without mounts quits (its cache index is then saved)."""
    status = 0
    for dst in dsts:
        p = norm(dst)
        if p not in mountinfo():
            say(f"skycore: {dst} is not mounted")
            continue
        rc_ = drain(base, timeout, [dst])
        if rc_ == 1:
            warn(f"skycore: not unmounting {dst}: uploads are still pending")
            status = 1
            continue
        if rc_ == 2:
            warn(f"skycore: rclone for {dst} is gone; unmounting the stale mount lazily")
            lazy_unmount(p)
            continue
        sock = served(base)[0].get(p, ("", ""))[0]
        try:
            rc(sock, "mount/unmount", {"mountPoint": p}, timeout=60)
        except (OSError, RcError) as e:
            warn(f"skycore: rclone could not unmount {dst} ({e}); unmounting it directly")
            for cmd in (["fusermount3", "-u", p], ["umount", p]):
                if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
                    break
        say(f"skycore: unmounted {dst}")
        quit_if_idle(sock)
    return status


def retire(sock: str) -> None:
    """Stop the daemon on ``sock`` unless it serves a mount. SIGTERM, not ``core/quit``
    (after which rclone lingers 1.5 s): it exits within ~20 ms and removes its socket."""
    with open(os.path.join(os.path.dirname(sock), "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if rc(sock, "mount/listmounts").get("mountPoints"):
                return
            os.kill(int(rc(sock, "core/pid")["pid"]), signal.SIGTERM)
        except (OSError, RcError, KeyError, ValueError):
            pass
        deadline = time.monotonic() + 2
        while os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            os.unlink(sock)


def quit_if_idle(sock: str) -> None:
    """Stop the daemon on ``sock`` when it serves no mount any more."""
    if not sock:
        return
    with open(os.path.join(os.path.dirname(sock), "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if rc(sock, "mount/listmounts").get("mountPoints"):
                return
            rc(sock, "core/quit")
        except (OSError, RcError):
            return
        for _ in range(100):
            if not answers(sock):
                return
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    if not argv:
        warn(__doc__ or "")
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "daemon":
        return cmd_daemon(*args)
    if cmd == "mount":
        return cmd_mount(*args)
    if cmd == "up":
        return cmd_up(*args)
    if cmd == "up-many":
        return cmd_up_many(*args)
    if cmd == "copy-many":
        return cmd_copy_many(*args)
    if cmd == "live":
        return cmd_live(args[0], args[1:])
    if cmd == "drain":
        return drain(args[0], float(args[1]), args[2:])
    if cmd == "unmount":
        return cmd_unmount(args[0], float(args[1]), args[2:])
    if cmd == "refresher":
        return cmd_refresher(args[0])
    warn(f"skycore: unknown node command {cmd!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
