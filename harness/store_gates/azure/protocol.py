"""The Azure Blob gate protocol (runs inside the gate): the hooks the gate calls, wiring the
package's roles.

Azurite enforces SAS permissions and container public access, but it serves a public
container to wrong keys and expired or altered SAS, accepts user-delegation SAS minted with a
key written in its source, and answers in its own terms. The gate therefore:

- classifies each request into its Blob REST operation (``requests``);
- verifies every Shared Key header and SAS against the key of the storage account the
  request addresses (``signatures``) and refuses forgeries with Azure's 403
  AuthenticationFailed; user-delegation SAS is always refused (no Entra ID here, so no
  delegation key exists);
- learns each container's owner (the storage account of the path) and public access level
  (off, blob, container) from the real Create Container and Set Container ACL requests it
  forwards (``bookkeeping``), and decides anonymous requests by that level (``access``:
  :data:`ANONYMOUS_OPERATIONS`), refusing with Azure's 404 ResourceNotFound (Azurite: 403
  AuthorizationFailure);
- records blob writes (``bookkeeping``) and answers injected faults as Azure's XML errors.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from harness.gate.corrupt import wrong_headers
from harness.gate.protocol import Corrupted, Exchange, GateProtocol, UpstreamResponse
from harness.gate.rules import ALLOW, Access, Verdict
from harness.store_gates.azure.access import (
    ANONYMOUS_OPERATIONS,
    HIDDEN,
    LEVELS,
    anonymous_allowed,
    decide_anonymous,
    public_level,
)
from harness.store_gates.azure.bookkeeping import (
    ACCOUNTS,
    AzureBookkeeping,
    StorageAccount,
    account_key,
    account_owner,
    path_account,
)
from harness.store_gates.azure.requests import classify_azure, operation
from harness.store_gates.azure.signatures import (
    AUTHENTICATION_FAILED,
    authentication_verdict,
    is_anonymous,
)

__all__ = [
    "ACCOUNTS",
    "ANONYMOUS_OPERATIONS",
    "HIDDEN",
    "LEVELS",
    "AzureGateProtocol",
    "StorageAccount",
    "account_key",
    "account_owner",
    "anonymous_allowed",
    "classify_azure",
    "operation",
    "path_account",
    "public_level",
]


INVALID_RANGE = "The range specified is invalid for the current size of the resource."
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def content_range_bytes(content_range: str) -> tuple[int | None, int | None]:
    """(first, last) byte of a ``Content-Range: bytes first-last/size`` header; (None,
    None) when it is not one."""
    m = _CONTENT_RANGE.fullmatch(content_range.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


class AzureGateProtocol(AzureBookkeeping, GateProtocol):
    """Azure Blob: the gate verifies Shared Key and SAS signatures (Azurite then checks SAS
    permissions), decides anonymous access by the container's public level, and records blob
    writes and the containers' owners and levels."""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_azure(ex.method, ex.path, ex.headers), None

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """Verify the request's Shared Key header or SAS the way Azure does, against the key
        of the storage account it addresses (Azurite alone serves a public container to
        wrong keys and expired or altered SAS, and accepts user-delegation SAS minted with
        a key written in its source)."""
        return authentication_verdict(ex, datetime.now(UTC))

    def decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        """Credentialed requests go to Azurite, which checks them. Anonymous ones on a
        container the gate knows are allowed only for the operations its public level opens
        (Azurite alone would also serve Get Container ACL at level container)."""
        if access.bucket is None or not is_anonymous(ex):
            return ALLOW
        return decide_anonymous(self.container_level(ex, access.bucket), access.action)

    def corrupt_answer(
        self, ex: Exchange, access: Access, up: UpstreamResponse, body: bytes | None
    ) -> Corrupted | None:
        """rclone reads an uploaded blob's MD5 from the Content-MD5 of the Get Blob
        Properties (HEAD) after the upload, which the mark of the write makes wrong; the
        write's own answer has its transactional Content-MD5 / x-ms-content-crc64 wrong.
        The ETag is an opaque version, not a checksum."""
        headers = wrong_headers(
            up.header, digests=("Content-MD5", "x-ms-blob-content-md5", "x-ms-content-crc64")
        )
        return Corrupted(headers) if headers else None

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        message, _, detail = verdict.message.partition("\n")
        extra = f"<AuthenticationErrorDetail>{escape(detail)}</AuthenticationErrorDetail>"
        xml = (
            '<?xml version="1.0" encoding="utf-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{escape(message)}</Message>"
            f"{extra if detail else ''}</Error>"
        )
        return "application/xml", xml.encode()

    def refuse_answer(
        self, ex: Exchange, access: Access, status: int, headers: dict[str, str]
    ) -> Verdict | None:
        """A range that starts at or past a blob's end: Azure answers 416 InvalidRange;
        Azurite answers 206 with an impossible Content-Range (``bytes 1000-999/1000``), which
        rclone reads as a blob of size 0 and truncates its cached copy: a file whose size is
        a multiple of rclone's read chunk (128 MiB) read back short through a cached mount."""
        if ex.method != "GET" or status != 206:
            return None
        first, last = content_range_bytes(headers.get("Content-Range", ""))
        if first is None or last is None or first <= last:
            return None
        return Verdict(False, 416, "InvalidRange", INVALID_RANGE)

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
            403: ("AuthenticationFailed", AUTHENTICATION_FAILED),
        }
        code, message = codes.get(status, ("ServerBusy", "The server is busy."))
        return Verdict(False, status, code, message)

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        return {"x-ms-error-code": verdict.code}
