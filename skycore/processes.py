"""Processes on this machine."""

from __future__ import annotations

import os


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
