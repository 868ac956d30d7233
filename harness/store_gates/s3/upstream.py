"""How the S3 gate talks to moto beyond streaming: the gate's own signature on forwarded
requests that carry none (anonymous callers, POST forms), object sizes read by a signed
HEAD, and the policy condition keys of a request."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from harness.gate.protocol import Exchange
from harness.store_gates.s3.keys import AccessKey

GATE_KEY = AccessKey("AKIASKYCOREGATE00000", "skycore-gate-service-key-not-an-account0")
"""The key the gate signs forwarded anonymous requests with: neither account's key (moto
checks ACLs on unsigned requests itself; the gate has decided already)."""
UPSTREAM_REGION = "us-east-1"
"""The region moto is told about (it refuses bucket creation without a location
constraint in any other region)."""


def quoted_key(path: str) -> str:
    """The (still quoted) key part of a path-style request path."""
    return urlsplit(path).path.lstrip("/").partition("/")[2]


def policy_context(ex: Exchange, identity: str | None) -> dict[str, str]:
    """Policy condition keys of a request."""
    context = {"aws:SecureTransport": "false"}
    for name in ("prefix", "delimiter", "max-keys"):
        values = ex.query.get(name)
        if values:
            context[f"s3:{name}"] = values[0]
    for name, key in (
        ("referer", "aws:Referer"),
        ("user-agent", "aws:UserAgent"),
        ("x-amz-acl", "s3:x-amz-acl"),
        ("x-amz-copy-source", "s3:x-amz-copy-source"),
        ("x-amz-content-sha256", "s3:x-amz-content-sha256"),
        ("x-amz-storage-class", "s3:x-amz-storage-class"),
        ("x-amz-server-side-encryption", "s3:x-amz-server-side-encryption"),
        ("x-amz-metadata-directive", "s3:x-amz-metadata-directive"),
    ):
        value = ex.headers.get(name)
        if value is not None:
            context[key] = value
    auth = ex.headers.get("authorization") or ""
    if auth:
        context["s3:authType"] = "REST-HEADER"
        context["s3:signatureversion"] = "AWS" if auth.startswith("AWS ") else "AWS4-HMAC-SHA256"
    elif identity is not None:
        context["s3:authType"] = "REST-QUERY-STRING"
    return context


GATE_SIGNED_HEADERS = ("authorization", "x-amz-date", "x-amz-content-sha256")
"""The headers :func:`gate_signature` sets (the client's values of them are replaced)."""


def gate_signature(
    method: str, host: str, path: str, headers: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Headers that sign a forwarded request with :data:`GATE_KEY` (SigV4 for the upstream
    region, UNSIGNED-PAYLOAD): who the gate is, never an account. The client's other
    ``x-amz-*`` headers (``headers``) are signed too, as a server that checks signatures
    requires (``rclone serve s3`` refuses an unsigned ``x-amz-*`` header)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class _Unsigned(S3SigV4Auth):  # type: ignore[misc]
        def _should_sha256_sign_payload(self, request: Any) -> bool:
            return False

    signed = {
        name: value
        for name, value in (headers or {}).items()
        if name.lower().startswith("x-amz-") and name.lower() not in GATE_SIGNED_HEADERS
    }
    # The canonical URI as SigV4 defines it (every byte but unreserved ones and '/'
    # percent-encoded once), however the client spelled the path: a server computes it so.
    parts = urlsplit(path)
    canonical = quote(unquote(parts.path), safe="/~")
    query = f"?{parts.query}" if parts.query else ""
    request = AWSRequest(
        method=method, url=f"http://{host}{canonical}{query}", headers={"Host": host, **signed}
    )
    signer = _Unsigned(
        Credentials(GATE_KEY.access_key_id, GATE_KEY.secret_access_key),
        "s3",
        UPSTREAM_REGION,
    )
    signer.add_auth(request)
    return {
        "Authorization": request.headers["Authorization"],
        "X-Amz-Date": request.headers["X-Amz-Date"],
        "X-Amz-Content-SHA256": request.headers["X-Amz-Content-SHA256"],
    }


def upstream_size(ex: Exchange, path: str) -> int:
    """Object size from a HEAD to the emulator, signed with the gate's key."""
    host, port = ex.upstream
    conn = http.client.HTTPConnection(host, port, timeout=30)
    host_header = ex.header("host") or host
    try:
        conn.request(
            "HEAD", path, headers={"Host": host_header, **gate_signature("HEAD", host_header, path)}
        )
        resp = conn.getresponse()
        resp.read()
        return int(resp.getheader("Content-Length") or -1) if resp.status == 200 else -1
    except (OSError, ValueError):
        return -1
    finally:
        conn.close()
