"""The names the host side uses from the node's mount program (skycore/node/mountd/), under
their old import path: ``from skycore.node import mounts``."""

from __future__ import annotations

from skycore.node.mountd.cli import main
from skycore.node.mountd.copying import remote_colon, split_remote
from skycore.node.mountd.rc import RCLONE_GONE, RcError, answers, mountinfo, norm, rc, served

__all__ = [
    "RCLONE_GONE",
    "RcError",
    "answers",
    "main",
    "mountinfo",
    "norm",
    "rc",
    "remote_colon",
    "served",
    "split_remote",
]
