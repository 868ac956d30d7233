"""Start a node's rclone daemon, mount through it, and stop it once it serves no mount."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from typing import Any

from skycore.node.mountd.rc import RcError, answers, mountinfo, norm, rc, say, warn

LOG_FILE_MAX = "16M"
"""rclone's log is rotated at this size (one old file kept): it logs every upload and, every
cache poll interval, one line per cached mount, for as long as the node runs."""


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
                 "--log-file", log, "--log-level", "INFO",
                 "--log-file-max-size", LOG_FILE_MAX, "--log-file-max-backups", "1", *extra],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if answers(sock):
                with open(os.path.join(d, "rclone.pid.tmp"), "w") as f:
                    f.write(str(proc.pid))
                os.replace(os.path.join(d, "rclone.pid.tmp"), os.path.join(d, "rclone.pid"))
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
