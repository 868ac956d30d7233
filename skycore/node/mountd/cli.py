"""skycore's mount helper on a node, its command line (python3 standard library only).

One ``rclone rcd`` per node serves every mount of that node (one per distinct ``--transfers``
setting, since that option is global to a daemon). Each daemon has a folder
``BASE/rcd-t<N>`` holding its unix rc socket, log and VFS cache. This program talks HTTP to
those sockets; nothing else on the node needs rclone's command line.

    SKYCORE_REQUEST=JSON python3 - COMMAND          the commands skycore runs, one JSON request
                                                     each (in the environment):
      up-many    {base, mounts, copies}             make the mount points ready, mount the
                                                     requests not live yet, make the COPY
                                                     snapshots (mountd.mount)
      copy-many  {copies}                            only the COPY snapshots
      live       {base, dsts}                        print "SKYCORE_LIVE <dst>" per live mount
      drain      {base, timeout, dsts}               wait until every dst is durable
      unmount    {base, timeout, dsts}               drain, then unmount (never with uploads
                                                     pending)
    python3 FILE refresher DIR                       refresh the listings of DIR's daemon's
                                                     mounts that keep theirs (up-many starts
                                                     it; it ends with the daemon)
    python3 - daemon|mount|up|up-many|copy-many|live|drain|unmount ARGS...
                                                     the same and the single steps with
                                                     arguments on the command line

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

import json
import os
import sys
from typing import Any

from skycore.node.mountd.daemon import cmd_daemon, cmd_mount, cmd_up
from skycore.node.mountd.drain import cmd_unmount, drain
from skycore.node.mountd.mount import daemon_specs, expand, mount_many
from skycore.node.mountd.rc import warn
from skycore.node.mountd.refresher import cmd_refresher
from skycore.node.mountd.up import cmd_copy_many, cmd_live, cmd_up_many

REQUEST_ENV = "SKYCORE_REQUEST"


def request_main(cmd: str, req: dict[str, Any]) -> int:
    """Run ``cmd`` with its JSON request (see the module docstring)."""
    if cmd == "up-many":
        return mount_many(req)
    if cmd == "copy-many":
        return cmd_copy_many(json.dumps(daemon_specs(req["copies"])))
    dsts = [expand(d) for d in req.get("dsts") or []]
    if cmd == "live":
        return cmd_live(req["base"], dsts)
    if cmd == "drain":
        return drain(req["base"], float(req["timeout"]), dsts)
    if cmd == "unmount":
        return cmd_unmount(req["base"], float(req["timeout"]), dsts)
    warn(f"skycore: unknown node command {cmd!r}")
    return 2


def main(argv: list[str]) -> int:
    if not argv:
        warn(__doc__ or "")
        return 2
    cmd, args = argv[0], argv[1:]
    request = os.environ.pop(REQUEST_ENV, None)  # not for the daemons this run starts
    if request is not None and not args:
        return request_main(cmd, json.loads(request))
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
