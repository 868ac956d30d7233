"""Times as people read them in tables."""

from __future__ import annotations

import time


def ago(ts: float | None) -> str:
    """How long ago ``ts`` (epoch seconds) was, e.g. '5m ago'; '-' when there is none."""
    if not ts:
        return "-"
    secs = max(0, int(time.time() - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"
