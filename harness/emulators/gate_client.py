"""The harness's side of a gate's admin API (harness.gate.admin): bucket ownership, write
events and injected faults, over HTTP with the admin token."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from harness.accounts import OWNERS, USER
from harness.emulators.records import EmulatorError, EmulatorRecord, WriteEvent
from harness.processes import LOOPBACK

TOKEN_HEADER = "X-Gate-Token"


def gate_token(home: Path) -> str:
    """The token of the gates' admin API: ``$HARNESS_HOME/gate-token`` (mode 0600), made
    once. Only the harness reads it; nodes never receive it."""
    path = home / "gate-token"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    # A unique temporary file (mode 0600): emulators start side by side in threads of one
    # process, so a name made of the pid alone was shared, and one thread's cleanup removed
    # the file another was about to link.
    fd, tmp_name = tempfile.mkstemp(prefix=".gate-token.", dir=home)
    tmp = Path(tmp_name)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    with contextlib.suppress(FileExistsError):
        os.link(tmp, path)  # the first writer wins; everyone reads the same token
    tmp.unlink(missing_ok=True)
    return path.read_text().strip()


class GateClient:
    """The admin API of one emulator's gate (a base class of RunningEmulator)."""

    store: ClassVar[str]
    records_events: ClassVar[bool]
    home: Path
    record: EmulatorRecord

    target_endpoint: str | None = None
    """The endpoint of an emulator attached to a target file (None: the store's default)."""

    @property
    def endpoint(self) -> str:
        """The gate's URL: the endpoint clients use."""
        if getattr(self, "target", None) is not None:
            return self.target_endpoint  # type: ignore[return-value]
        return f"http://{LOOPBACK}:{self.record.gate_port}"

    def _admin(self, method: str, route: str, body: Any = None, timeout: float = 30.0) -> Any:
        if getattr(self, "target", None) is not None:
            raise EmulatorError(
                f"The {self.store} gate's admin API ({route.split('?')[0]}) exists only in the "
                "local cloud; a run against a target file uses the store's public API alone."
            )
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.endpoint}/__gate__/{route}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **self.admin_headers()},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise EmulatorError(
                f"The {self.store} access gate refused {method} /__gate__/{route}: {e.code} "
                f"{detail}"
            ) from e
        except (urllib.error.URLError, OSError) as e:
            raise EmulatorError(
                f"The {self.store} access gate at {self.endpoint} does not answer ({e}). "
                f"See {self.record.gate_log}; restart the local cloud with 'harness up'."
            ) from e

    def admin_headers(self) -> dict[str, str]:
        """The header that opens the gate's admin API (the token in the harness home)."""
        return {TOKEN_HEADER: gate_token(self.home)}

    # --- injected faults (harness.gate.faults) -------------------------------------------

    def add_fault(self, kind: str, **options: Any) -> dict[str, Any]:
        """Start a fault in this store's gate (outage, errors, latency, bandwidth,
        stream-bandwidth, reset, deny, corrupt; options seconds, max_hits, rate, status, ms,
        mibps, bucket, method; until cleared unless seconds or max_hits end it). Returns the
        fault as the gate shows it (its ``id`` clears it)."""
        body = {"kind": kind, **{k: v for k, v in options.items() if v is not None}}
        return dict(self._admin("POST", "faults", body))

    def clear_faults(self, fault_id: int | None = None, bucket: str | None = None) -> list[Any]:
        """End every fault (or one, or those scoped to ``bucket``); the faults ended."""
        query = urlencode(
            {k: v for k, v in (("id", fault_id), ("bucket", bucket)) if v is not None}
        )
        return list(self._admin("DELETE", f"faults?{query}" if query else "faults"))

    def fault(self, fault_id: int) -> dict[str, Any]:
        """One fault as the gate shows it now, active or ended (``hits``, ``ended``)."""
        return dict(self._admin("GET", f"faults/state?id={int(fault_id)}"))

    def faults(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The faults active now (EmulatorError if the gate does not answer in ``timeout``
        seconds)."""
        return list(self._admin("GET", "faults", timeout=timeout))

    def fault_log(self, bucket: str | None = None) -> list[dict[str, Any]]:
        """Every fault start and end (``phase``, ``t_ns``, the fault's fields), oldest first;
        with ``bucket``: the faults on that bucket and those on every bucket."""
        route = f"faults/log?bucket={quote(bucket)}" if bucket else "faults/log"
        return list(self._admin("GET", route))

    def set_bucket_access(self, name: str, owner: str = USER, public: bool = False) -> None:
        """Tell the gate who owns bucket ``name`` and whether it is public."""
        if owner not in OWNERS:
            raise ValueError(f"owner must be one of {OWNERS}, not {owner!r}")
        self._admin("POST", "buckets", {"bucket": name, "owner": owner, "public": public})

    def bucket_owner(self, name: str) -> str | None:
        """The owner of ``name`` as recorded by the gate (None if unknown)."""
        info = self._admin("GET", "buckets").get(name)
        return info["owner"] if info else None

    def events(self, bucket: str) -> list[WriteEvent]:
        """Completed writes to ``bucket`` recorded by the gate, in completion order. Raises
        EmulatorError if this emulator does not record events (never an empty list)."""
        if not self.records_events:
            raise EmulatorError(
                f"The {self.store} emulator does not record write events (capability "
                "records_events); a test that needs them must require that capability."
            )
        rows = self._admin("GET", f"events?bucket={quote(bucket)}")
        return [WriteEvent(**row) for row in rows]
