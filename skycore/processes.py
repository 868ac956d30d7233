"""Processes on this machine."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO


def pid_alive(pid: int | None) -> bool:
    """True if a local process with ``pid`` exists (one of another user's counts too)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_detached(
    argv: Sequence[str],
    output: IO[bytes],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own (a terminal's Ctrl-C or hang-up never reaches
    it), stdin from /dev/null, stdout and stderr into ``output``; ``env`` is its whole
    environment (default: this process's) and ``pass_fds`` stay open in it."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
