"""Programs that run ON a node, kept as real files: bash (shellcheck-clean) or python3 with its
standard library only (checked by ruff and mypy). A node needs no copy of skycore.

- ``health.sh``: the health check (FUSE, fusermount, CAP_SYS_ADMIN).
- ``batch.sh``: one exec per node for many steps and files (a tar on stdin).
- ``job_start.sh``, ``job_wrap.sh``, ``job_follow.sh``, ``job_exit.sh``, ``job_cancel.sh``,
  ``job_reserve.sh``: a job part in the node's job table (arguments in the environment).
- ``probe.sh``: the listing probe of re-mounted mount points (arguments in the environment).
- ``mountd/``: everything that talks to the node's rclone daemons over their unix rc sockets
  (start a daemon, mount, the live-mount probe, COPY snapshots, the drain rule, unmount, the
  refresher and order keeper). It reaches a node as ONE text (``mountd_program``, also
  ``program("mounts.py")``): a bootstrap serving each module's source under its import name.
  Its commands take one JSON request in the environment variable ``SKYCORE_REQUEST``.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from functools import cache
from importlib import resources

_EOF = "SKYCORE_NODE_PROGRAM"
MOUNTD_MODULES = (
    "rc", "daemon", "copying", "order", "keeper", "refresher", "drain", "up", "mount", "cli",
)  # fmt: skip
REQUEST_ENV = "SKYCORE_REQUEST"
"""The environment variable that carries a mountd command's JSON request."""

_BOOTSTRAP = """\
import importlib.abc
import importlib.util
import marshal
import os
import sys
import tempfile
import types

_HOME = os.path.expanduser("~")
_CACHE = os.path.join(_HOME, ".cache", "skycore-mountd") if os.path.isabs(_HOME) else None


def _code(name):
    # Compiled once per module version and Python: later runs load the code object.
    key = "%s-%s-%s.bin" % (name, _HASHES[name], importlib.util.MAGIC_NUMBER.hex())
    path = os.path.join(_CACHE, key) if _CACHE else None
    if path:
        try:
            with open(path, "rb") as f:
                code = marshal.load(f)
            if isinstance(code, types.CodeType):
                return code
        except (OSError, EOFError, ValueError, TypeError):
            pass
    code = compile(_SOURCES[name], "<skycore " + name + ">", "exec")
    if path:
        tmp = None
        try:
            os.makedirs(_CACHE, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=_CACHE, prefix=key + ".")
            with os.fdopen(fd, "wb") as f:
                marshal.dump(code, f)
            os.replace(tmp, path)
        except OSError:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    return code


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(_code(module.__name__), module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in _SOURCES:
            return None
        return importlib.util.spec_from_loader(name, _Loader(), is_package=name in _PACKAGES)


sys.meta_path.insert(0, _Finder())
if __name__ == "__main__":
    from skycore.node.mountd.cli import main

    sys.exit(main(sys.argv[1:]))
"""


@cache
def program(name: str) -> str:
    """The text of node program ``name`` (a file of this package; ``mounts.py``: the mount
    program, ``mountd_program``)."""
    if name == "mounts.py":
        return mountd_program()
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@cache
def mountd_program() -> str:
    """The mount program (skycore/node/mountd/) as one python3 text: each module's source is
    served under its import name (parents as empty packages), then ``cli.main`` runs. Each
    module is compiled once per version of its source and Python, into ~/.cache/skycore-mountd
    on the node (marshal): a node runs the program for every mount batch, drain and probe,
    and compiling its 67 KB cost about 0.1 s of CPU each time."""
    root = resources.files(__package__)
    sources = {"skycore": "", "skycore.node": ""}
    sources["skycore.node.mountd"] = root.joinpath("mountd/__init__.py").read_text("utf-8")
    for mod in MOUNTD_MODULES:
        text = root.joinpath(f"mountd/{mod}.py").read_text(encoding="utf-8")
        sources[f"skycore.node.mountd.{mod}"] = text
    packages = ("skycore", "skycore.node", "skycore.node.mountd")
    table = "".join(f"    {k!r}: {v!r},\n" for k, v in sources.items())
    hashes = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in sources.items()}
    return (
        "# skycore's mount program on a node (generated from skycore/node/mountd/; python3 "
        "standard library only)\n"
        f"_SOURCES = {{\n{table}}}\n_PACKAGES = {packages!r}\n_HASHES = {hashes!r}\n" + _BOOTSTRAP
    )


def python_function(fn: str, name: str = "mounts.py") -> str:
    """A bash function ``fn`` running node program ``name`` with python3 (arguments pass
    through; the program arrives on a here-document, so it cannot read the caller's stdin)."""
    text = program(name)
    assert _EOF not in text
    return f"{fn}() {{\npython3 - \"$@\" <<'{_EOF}'\n{text}{_EOF}\n}}\n"


def request_env(request: object) -> str:
    """``SKYCORE_REQUEST=<the request as JSON, quoted>``: the one argument of a mountd command,
    as an environment assignment to put before its command."""
    return f"{REQUEST_ENV}={shlex.quote(json.dumps(request, sort_keys=True))}"
