"""What a store's fault did, read from its gate, so that a scenario ends its fault on an
event instead of a timer: how many requests the fault hit (its ``hits``, from the admin
API), whether it still lasts, and which uploads it refused (the gate's request log).

One place for these waits, so that they can become the fault API's own later
(``StoreFaults.wait_hits``) without touching the scenarios.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from harness.emulators import fleet
from tests.polling import wait_for

UPLOAD_METHODS = ("PUT", "POST", "PATCH")
# One line per request, written when it ends (harness.gate.server._logged):
# ``HH:MM:SS METHOD PATH?QUERY -> STATUS (...)``.
_REQUEST_LINE = re.compile(r"^\d\d:\d\d:\d\d ([A-Z]+) (\S+) -> (\S+) \(")


def hits(store: str, fault: Mapping[str, Any]) -> int:
    """How many requests ``fault`` (as ``StoreFaults.start`` returned it) has hit so far,
    whether it still lasts or ended."""
    emulator = fleet.get(store)
    fault_id = int(fault["id"])
    rows = [e for e in emulator.fault_log(fault.get("bucket")) if e["id"] == fault_id]
    rows += [f for f in emulator.faults() if f["id"] == fault_id]
    return max((int(r["hits"]) for r in rows), default=0)


def wait_hits(store: str, fault: Mapping[str, Any], n: int, timeout: float) -> int:
    """Wait until ``fault`` has hit ``n`` requests (AssertionError after ``timeout`` s, a
    hang guard); its hits then."""
    found: int = wait_for(
        f"fault #{fault['id']} ({fault['kind']}) to hit {n} request(s)",
        lambda: h if (h := hits(store, fault)) >= n else 0,
        timeout,
        poll=0.1,
    )
    return found


def lasts(store: str, fault: Mapping[str, Any]) -> bool:
    """True while ``fault`` is active in its gate (it has not ended)."""
    return any(f["id"] == fault["id"] for f in fleet.get(store).faults())


def log_offset(store: str) -> int:
    """The size of the store's gate log now: pass it to :func:`refused_keys`."""
    return Path(fleet.get(store).record.gate_log).stat().st_size


def _key(target: str, bucket: str) -> str | None:
    """The object key a logged request on ``bucket`` names (None: another bucket's): in the
    path after the bucket (S3, Azure) or in the ``name`` query (GCS uploads)."""
    parts = urlsplit(target)
    segments = [unquote(s) for s in parts.path.split("/")]
    if bucket not in segments:
        return None
    named = parse_qs(parts.query).get("name")
    return named[0] if named else "/".join(segments[segments.index(bucket) + 1 :])


def refused_keys(store: str, bucket: str, since: int, status: int = 403) -> list[str]:
    """The key of each upload request (PUT, POST, PATCH) on ``bucket`` that the store's gate
    answered ``status`` after byte ``since`` of its log, oldest first (a key refused twice
    is there twice)."""
    with open(fleet.get(store).record.gate_log, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        m = _REQUEST_LINE.match(line)
        if m is None or m.group(1) not in UPLOAD_METHODS or m.group(3) != str(status):
            continue
        key = _key(m.group(2), bucket)
        if key:
            found.append(key)
    return found


def wait_refused(
    store: str,
    bucket: str,
    since: int,
    timeout: float,
    *,
    prefix: str = "",
    times: int = 1,
    status: int = 403,
) -> list[str]:
    """Wait until the gate has refused (``status``) the upload of one key under
    ``prefix`` of ``bucket`` ``times`` times, e.g. twice: a retry of it was refused as
    well; the refused keys then (:func:`refused_keys`)."""

    def refused() -> list[str]:
        keys = [k for k in refused_keys(store, bucket, since, status) if k.startswith(prefix)]
        return keys if any(keys.count(k) >= times for k in keys) else []

    what = f"an upload under {bucket}/{prefix} answered {status} {times} time(s)"
    found: list[str] = wait_for(what, refused, timeout, poll=0.1)
    return found
