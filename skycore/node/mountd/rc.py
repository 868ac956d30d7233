"""The rc client of the node's rclone daemons (HTTP over their unix sockets), the mount
table and the shared constants of the node's mount program."""

from __future__ import annotations

import glob
import http.client
import json
import os
import re
import socket
import sys
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


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, sock: str) -> None:
        super().__init__("rc", timeout=RC_TIMEOUT_S)
        self.sock_path = sock

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.sock_path)
        self.sock = s


class RcClient:
    """One kept-alive connection to the rc socket ``sock`` (a new connection per call cost
    about 0.2 ms of an order keeper's hand-off). Only for calls that may be sent twice: a
    connection the daemon closed is opened again and the call sent once more."""

    def __init__(self, sock: str) -> None:
        self.sock = sock
        self._conn: _UnixConnection | None = None

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Like ``rc``: the JSON answer; OSError when nothing answers, RcError on an error."""
        body = json.dumps(params or {}).encode()
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = _UnixConnection(self.sock)
            try:
                self._conn.request("POST", "/" + method, body, {"Content-Type": "application/json"})
                answer = self._conn.getresponse()
                status, payload = answer.status, answer.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt == 2:
                    raise OSError(f"rc {method} on {self.sock}: {e}") from e
        try:
            out = json.loads(payload or b"{}")
        except ValueError:
            out = {"error": payload[:300].decode("utf-8", "replace")}
        if status != 200:
            raise RcError(out.get("error", out) if isinstance(out, dict) else out)
        return out

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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
            mounts = live_mounts(sock)
        except (OSError, RcError):
            silent.append(sock)
            continue
        table.update({p: (sock, fs) for p, fs in mounts.items()})
    return table, silent


def live_mounts(sock: str) -> dict[str, str]:
    """The mounts of the daemon on ``sock``: mount point -> VFS name."""
    mounts = rc(sock, "mount/listmounts").get("mountPoints") or []
    return {m["MountPoint"]: m["Fs"] for m in mounts}
