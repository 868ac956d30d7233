"""Creation-ordered uploads for MOUNT_CACHED mounts.

rclone queues a cached file for upload when the kernel *releases* it, and FUSE releases are
asynchronous: two files closed a few microseconds apart can be queued in either order, so
even with ``--transfers 1`` a burst of small files sometimes reaches the store out of order
(seen here: file 14 of 50 before file 13). The order guard is a small node-side process,
one per ordered mount, that watches rclone's upload queue over the mount's rc socket and
re-times queued items (``vfs/queue-set-expiry``) so they leave in the order their data was
written (file mtime, then queue id). It only ever delays an item by milliseconds, never
drops or reorders anything already uploading, and exits when the mount goes away.
"""

from __future__ import annotations

import shlex

# Runs on the node with the node's python3 (stdlib only). argv: rc socket, mount point.
GUARD_SCRIPT = r"""
import http.client, json, os, socket, sys, time

SOCK, DST = sys.argv[1], sys.argv[2]
GAP = 0.002  # seconds between consecutive items' expiries


class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(SOCK)


def rc(command, **params):
    conn = UnixConnection("localhost")
    try:
        conn.request("POST", "/" + command, json.dumps(params),
                     {"Content-Type": "application/json"})
        body = conn.getresponse().read()
    finally:
        conn.close()
    return json.loads(body or b"{}")


def written_at(name):
    try:
        return os.stat(os.path.join(DST, name)).st_mtime_ns
    except OSError:
        return None


def reorder():
    queue = rc("vfs/queue").get("queue") or []
    waiting = [item for item in queue if not item.get("uploading")]
    if len(waiting) < 2:
        return len(waiting)
    keyed = []
    for item in waiting:
        mtime = written_at(item["name"])
        if mtime is None:
            return len(waiting)  # renamed or deleted meanwhile: look again next round
        keyed.append((mtime, item["id"], item))
    keyed.sort(key=lambda k: (k[0], k[1]))
    by_expiry = sorted(waiting, key=lambda i: (i["expiry"], i["id"]))
    if [k[2]["id"] for k in keyed] == [i["id"] for i in by_expiry]:
        return len(waiting)
    previous = None
    for _mtime, _id, item in keyed:
        want = item["expiry"] if previous is None else max(item["expiry"], previous + GAP)
        rc("vfs/queue-set-expiry", id=item["id"], expiry=want, relative=False)
        previous = want
    print(time.strftime("%H:%M:%S"), "reordered", len(keyed), "queued uploads", flush=True)
    return len(waiting)


while os.path.exists(SOCK):
    try:
        waiting = reorder()
    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
        print("order guard:", e, flush=True)
        waiting = 0
        time.sleep(0.5)
    time.sleep(0.02 if waiting else 0.1)
"""


def order_guard_command(dst_var: str, sock_var: str, script_path: str, log_path: str) -> str:
    """Bash that (re)starts the order guard for a mounted MOUNT_CACHED destination.

    ``dst_var`` and ``sock_var`` are shell expressions (e.g. ``"$DST"``) for the mount point
    and the rclone rc socket; the script and its log live in the mount's private folder.
    """
    script = shlex.quote(script_path)
    log = shlex.quote(log_path)
    return (
        f"cat > {script} <<'SKYCORE_ORDER_GUARD'\n{GUARD_SCRIPT.strip()}\nSKYCORE_ORDER_GUARD\n"
        f"pkill -f {shlex.quote('order_guard.py ' + '')}{sock_var} 2>/dev/null || true\n"
        f"setsid nohup python3 {script} {sock_var} {dst_var} >> {log} 2>&1 < /dev/null &\n"
    )
