"""The Azure Blob gate protocol (runs inside the gate): Azurite checks accounts, keys and
public access itself, so every request passes; the gate records blob writes (sizes read with
the storage account's key) and answers injected faults as Azure's XML errors."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

from harness.accounts import OTHER, USER
from harness.gate.protocol import Exchange, GateProtocol, Success
from harness.gate.rules import Access, Kind, Verdict, header, split_path


@dataclass(frozen=True)
class StorageAccount:
    """An Azure storage account and its key."""

    name: str
    key: str


def account_key(seed: str) -> str:
    """A storage account key (base64 of 64 bytes) made from ``seed``."""
    return base64.b64encode((seed * 8).encode()[:64]).decode()


ACCOUNTS: dict[str, StorageAccount] = {
    USER: StorageAccount("skyuser", account_key("skycore-user-")),
    OTHER: StorageAccount("skyother", account_key("skycore-other")),
}
"""owner -> storage account; the ``unknown`` caller signs with a key of no account."""


def classify_azure(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an Azure Blob request (``/<account>/<container>/<blob>``) for event
    recording only: Azurite enforces access itself, so every request passes."""
    raw_path, query = split_path(path)
    segs = raw_path.lstrip("/").split("/", 2)
    if len(segs) < 3 or not segs[2]:
        container = unquote(segs[1]) if len(segs) > 1 and segs[1] else None
        restype = query.get("restype", [""])[0].lower()
        deletes = method.upper() == "DELETE" and restype == "container" and container is not None
        return Access(Kind.PASS, container, deletes_bucket=deletes)
    container, blob = unquote(segs[1]), unquote(segs[2])
    comp = query.get("comp", [""])[0].lower()
    method = method.upper()
    event: str | None = None
    if method == "PUT":
        if not comp:
            event = "copy" if header(headers, "x-ms-copy-source") else "put"
        elif comp == "blocklist":
            event = "commit"
    elif method == "DELETE" and not comp:
        event = "delete"
    return Access(Kind.PASS, container, blob, event=event)


class AzureGateProtocol(GateProtocol):
    """Azure Blob: every request passes (Azurite checks keys and public access); the gate
    records blob writes."""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_azure(ex.method, ex.path, ex.headers), None

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        xml = (
            '<?xml version="1.0" encoding="utf-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{escape(verdict.message)}</Message>"
            "</Error>"
        )
        return "application/xml", xml.encode()

    def fault_verdict(self, status: int) -> Verdict:
        codes = {
            503: (
                "ServerBusy",
                "The server is currently unable to receive requests. Please retry your request.",
            ),
            500: (
                "InternalError",
                "The server encountered an internal error. Please retry the request.",
            ),
            403: (
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure "
                "the value of the Authorization header is formed correctly including the "
                "signature.",
            ),
        }
        code, message = codes.get(status, ("ServerBusy", "The server is busy."))
        return Verdict(False, status, code, message)

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        return {"x-ms-error-code": verdict.code}

    def on_success(self, done: Success) -> bytes:
        ex, access, data = done.ex, done.access, done.data
        if access.deletes_bucket and access.bucket:
            ex.state.drop_bucket(access.bucket)
            return data
        if access.event is None or access.bucket is None or access.key is None:
            return data
        size = 0
        if access.event == "put":
            size = ex.content_length()
        elif access.event != "delete":
            size = _blob_size(ex)
        ex.state.record(access.bucket, access.key, size, access.event)
        return data


def _blob_size(ex: Exchange) -> int:
    """Blob size via the SDK, signed with the storage account's key."""
    segs = urlsplit(ex.path).path.lstrip("/").split("/", 2)
    account = next((a for a in ACCOUNTS.values() if a.name == segs[0]), None)
    if account is None or len(segs) < 3:
        return -1
    from azure.storage.blob import BlobClient

    host, port = ex.upstream
    blob = BlobClient(
        f"http://{host}:{port}/{account.name}",
        container_name=unquote(segs[1]),
        blob_name=unquote(segs[2]),
        credential={"account_name": account.name, "account_key": account.key},
        retry_total=0,
    )
    try:
        return int(blob.get_blob_properties().size)
    except Exception:
        return -1
