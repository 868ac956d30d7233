"""Programs that run ON a node, kept as real files: bash (shellcheck-clean) or python3 with its
standard library only (checked by ruff and mypy). A node needs no copy of skycore. Their
arguments are data: environment variables, or shell variables set by quoted assignments
before a program's text (``script``), never code spliced into it.

- ``health.sh``: the health check (FUSE, fusermount, CAP_SYS_ADMIN).
- ``batch.sh``: one exec per node for many steps and files (a tar on stdin).
- ``job_start.sh``, ``job_follow.sh``, ``job_exit.sh``, ``job_cancel.sh``,
  ``job_reserve.sh``: a job part in the node's job table (arguments in the environment).
- ``probe.sh``: the listing probe of re-mounted mount points (arguments in the environment).
- ``mountd.sh``: starts one command of the mount program (python3 check, the program's file
  or its text, the request).
- ``mountd/``: everything that talks to the node's rclone daemons over their unix rc sockets
  (start a daemon, mount, the live-mount probe, COPY snapshots, the drain rule, unmount, the
  refresher and order keeper). It reaches a node as ONE text (``mountd_program``, also
  ``program("mounts.py")``): its modules' sources as data, then ``bootstrap.py``, which
  serves each module under its import name with a code cache on the node. Its commands take
  one JSON request in the environment variable ``SKYCORE_REQUEST``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from functools import cache
from importlib import resources

MOUNTD_MODULES = (
    "rc", "daemon", "copying", "order", "journal", "events", "cachefull", "keeper", "keepers",
    "refresher", "drain", "up", "mount", "cli",
)  # fmt: skip
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REQUEST_ENV = "SKYCORE_REQUEST"
"""The environment variable that carries a mountd command's JSON request."""


@cache
def program(name: str) -> str:
    """The text of node program ``name`` (a file of this package; ``mounts.py``: the mount
    program, ``mountd_program``)."""
    if name == "mounts.py":
        return mountd_program()
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@cache
def mountd_program() -> str:
    """The mount program (skycore/node/mountd/) as one python3 text: the line ``MODULES =
    {import name: source}`` (parents of the modules as empty packages), then the bootstrap
    (``bootstrap.py``: it serves each module under its import name, compiled once per version
    into the node's ~/.cache/skycore-mountd, and runs ``cli.main``)."""
    root = resources.files(__package__)
    modules = {"skycore": "", "skycore.node": ""}
    modules["skycore.node.mountd"] = root.joinpath("mountd/__init__.py").read_text("utf-8")
    for mod in MOUNTD_MODULES:
        text = root.joinpath(f"mountd/{mod}.py").read_text(encoding="utf-8")
        modules[f"skycore.node.mountd.{mod}"] = text
    return f"MODULES = {modules!r}\n" + program("bootstrap.py")


def assignment(name: str, value: str) -> str:
    """``name=<value, quoted for bash>``: how an argument reaches a node program (data, never
    code; the name must be a shell variable's)."""
    if not _SHELL_NAME.fullmatch(name):
        raise ValueError(f"not a shell variable name: {name!r}")
    return f"{name}={shlex.quote(value)}"


def script(name: str, arguments: Mapping[str, str]) -> str:
    """Bash running node program ``name`` (a .sh file of this package, verbatim) with
    ``arguments`` ({shell variable: value}): one ``assignment`` a line, then the program."""
    return "".join(assignment(k, v) + "\n" for k, v in arguments.items()) + program(name)


def request_env(request: object) -> str:
    """``SKYCORE_REQUEST=<the request as JSON, quoted>``: the one argument of a mountd command,
    as an environment assignment to put before its command."""
    return assignment(REQUEST_ENV, json.dumps(request, sort_keys=True))
