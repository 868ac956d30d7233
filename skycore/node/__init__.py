"""Programs that run ON a node, kept as real files (checked by ruff and mypy, or bash -n).

They are streamed to the node inside the bash a CommandRunner runs (``python3 -`` with the
program on a here-document), so a node needs no copy of skycore: only bash and python3's
standard library.

- ``health.sh``: the health check (FUSE, fusermount, CAP_SYS_ADMIN).
- ``mounts.py``: everything that talks to the node's rclone daemons over their unix rc
  sockets: start a daemon, mount through it, the live-mount probe, the drain (the one drain
  rule) and unmount.
"""

from __future__ import annotations

import shlex
from functools import cache
from importlib import resources

_EOF = "SKYCORE_NODE_PROGRAM"


@cache
def program(name: str) -> str:
    """The text of node program ``name`` (a file of this package)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def python_function(fn: str, name: str = "mounts.py") -> str:
    """A bash function ``fn`` running node program ``name`` with python3 (arguments pass
    through; the program arrives on a here-document, so it cannot read the caller's stdin)."""
    text = program(name)
    assert _EOF not in text
    return f"{fn}() {{\npython3 - \"$@\" <<'{_EOF}'\n{text}{_EOF}\n}}\n"


def python_command(args: list[str], name: str = "mounts.py") -> str:
    """Bash running node program ``name`` with ``args`` (each quoted)."""
    text = program(name)
    assert _EOF not in text
    return f"python3 - {shlex.join(args)} <<'{_EOF}'\n{text}{_EOF}\n"
