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

drain and unmount exit 0 when done, 1 when uploads were still pending at the timeout and 2
when a mount's rclone does not answer.

The drain rule (the only one skycore has): a cached mount is durable when rclone's VFS has
nothing queued or uploading (``vfs/stats``) *after* the kernel has handed rclone every FUSE
request of that mount (the connection's ``waiting`` count in fusectl is 0). FUSE sends
RELEASE, which queues a closed file for upload, asynchronously after close(); reading
``waiting`` first and the queue second means no file closed before the drain began can be
missed. One confirming poll follows. Where fusectl cannot be read the rule falls back to the
queue being empty for STABLE_POLLS polls in a row.
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
import time
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
    import threading

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

    def one(s: dict[str, Any]) -> None:
        sock = os.path.join(s["dir"], "rc.sock")
        vfs, mnt = json.dumps(s["vfs"]), json.dumps(s["mount"])
        config = json.dumps(s.get("rc_config") or {})
        if cmd_mount(sock, s["fs"], s["dst"], vfs, mnt, config) != 0 or not wait_mounted(s["dst"]):
            failed.append(s)

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
    warn(f"skycore: unknown node command {cmd!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
