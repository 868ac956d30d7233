"""COPY snapshots through a daemon: the first source that works, a folder or one object."""

from __future__ import annotations

import os
import time
from typing import Any

from skycore.node.mountd.rc import RcError, norm, rc, say, warn


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
