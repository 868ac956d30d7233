"""The GCS gate protocol (runs inside the gate): JSON API (and XML-style) requests
classified into accesses, bearer tokens as identities, denials as GCS JSON errors, bucket
ownership, resumable uploads and write events recorded from responses."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from harness.gate.protocol import Exchange, GateProtocol, Success
from harness.gate.rules import ANONYMOUS, INVALID, Access, Kind, Verdict, header, split_path

_GCS_API_ROOTS = ("storage", "upload", "download", "batch", "_internal")
_GCS_REASONS = ("authError", "forbidden", "conflict", "backendError", "rateLimitExceeded")


def classify_gcs(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify a GCS JSON API request (or an XML-style ``/bucket/object`` request)."""
    raw_path, query = split_path(path)
    segs = [unquote(s) for s in raw_path.strip("/").split("/")] if raw_path.strip("/") else []
    method = method.upper()
    reading = method in ("GET", "HEAD")
    if segs[:2] == ["batch", "storage"]:
        return Access(Kind.WRITE, needs_body=True)
    if segs[:1] == ["download"]:
        segs = segs[1:]
        if segs[:3] == ["storage", "v1", "b"] and len(segs) >= 4 and reading:
            return Access(Kind.READ, segs[3], "/".join(segs[5:]) or None)
        return Access(Kind.DENY)
    if segs[:1] == ["upload"]:
        if segs[:3] != ["upload", "storage", "v1"] or len(segs) < 5 or segs[3] != "b":
            return Access(Kind.DENY)
        bucket = segs[4]
        upload_type = query.get("uploadType", [""])[0]
        if method in ("PUT", "POST") and "upload_id" in query:
            # a chunk of a resumable upload (rclone POSTs them, the Python SDK PUTs them):
            # the object is written when the last chunk (one with the total size) completes
            span = (header(headers, "content-range") or "").strip()
            last = not span.endswith("/*") and not span.startswith("bytes */")
            name = query.get("name", [None])[0]
            return Access(Kind.WRITE, bucket, name, event="resumable" if last else None)
        if method == "POST" and upload_type == "resumable":
            return Access(Kind.WRITE, bucket)
        if method == "POST":
            return Access(Kind.WRITE, bucket, query.get("name", [None])[0], event="put")
        return Access(Kind.WRITE, bucket)
    if segs[:1] == ["_internal"]:
        return Access(Kind.DENY)
    if segs[:1] == ["storage"]:
        if segs[:3] != ["storage", "v1", "b"]:
            return Access(Kind.DENY)
        return _classify_gcs_json(method, segs[3:])
    # XML-style paths served by fake-gcs-server: /bucket/object
    if not segs:
        return Access(Kind.LIST_BUCKETS if reading else Kind.DENY)
    bucket, key = segs[0], "/".join(segs[1:]) or None
    if reading:
        return Access(Kind.READ, bucket, key)
    if key is None:
        return Access(Kind.WRITE, bucket)
    event = {"PUT": "put", "DELETE": "delete"}.get(method)
    return Access(Kind.WRITE, bucket, key, event=event)


def _classify_gcs_json(method: str, rest: list[str]) -> Access:
    """Classify ``/storage/v1/b/<rest...>`` (rest already percent-decoded per segment)."""
    reading = method in ("GET", "HEAD")
    if not rest:
        if reading:
            return Access(Kind.LIST_BUCKETS)
        if method == "POST":
            return Access(Kind.CREATE_BUCKET, needs_body=True)
        return Access(Kind.DENY)
    bucket = rest[0]
    if len(rest) == 1:
        if reading:
            return Access(Kind.READ, bucket)
        return Access(Kind.WRITE, bucket, deletes_bucket=method == "DELETE")
    if rest[1] != "o":
        return Access(Kind.READ if reading else Kind.WRITE, bucket)
    if len(rest) == 2:
        if reading:
            return Access(Kind.READ, bucket)
        return Access(Kind.WRITE, bucket, event="put" if method == "POST" else None)
    obj = rest[2]
    tail = rest[3:]
    if tail[:1] in (["rewriteTo"], ["copyTo"]) and len(tail) >= 5:
        dest_bucket, dest_key = tail[2], "/".join(tail[4:])
        event = "rewrite" if tail[0] == "rewriteTo" else "copy"
        return Access(Kind.WRITE, dest_bucket, dest_key, sources=(bucket,), event=event)
    if tail == ["compose"]:
        return Access(Kind.WRITE, bucket, obj, sources=(bucket,), event="compose")
    if reading:
        return Access(Kind.READ, bucket, obj)
    if not tail and method == "DELETE":
        return Access(Kind.WRITE, bucket, obj, event="delete")
    return Access(Kind.WRITE, bucket, obj)


_BATCH_LINE = re.compile(rb"^(GET|HEAD|POST|PUT|PATCH|DELETE) (\S+) HTTP/1\.[01]\r?$", re.M)


def classify_gcs_batch(body: bytes) -> Access:
    """Classify a GCS batch request by the sub-requests in its multipart body."""
    parts = [
        classify_gcs(m.group(1).decode(), _strip_origin(m.group(2).decode()), {})
        for m in _BATCH_LINE.finditer(body)
    ]
    if not parts:
        return Access(Kind.DENY)
    return Access(Kind.WRITE, sub=parts)


def _strip_origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme:
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return url


def gcs_bucket_from_insert(body: bytes) -> str | None:
    """The bucket name in a GCS bucket-insert body (JSON ``{"name": ...}``)."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data or b"{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


class GcsGateProtocol(GateProtocol):
    """The GCS JSON API as fake-gcs-server serves it, with bearer tokens as identities.
    A resumable upload's id is its credential, as in GCS."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.tokens = dict(tokens)
        """owner -> bearer token"""

    def identity(self, headers: Mapping[str, str]) -> str | None:
        """The account behind a request (``Authorization: Bearer``), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        if not auth:
            return ANONYMOUS
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer":
            return INVALID
        return next((o for o, t in self.tokens.items() if t == token.strip()), INVALID)

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        access = classify_gcs(ex.method, ex.path, ex.headers)
        identity = self.identity(ex.headers)
        if access.needs_body:
            body = ex.read_body()
            if access.kind is Kind.CREATE_BUCKET:
                access.bucket = gcs_bucket_from_insert(body)
            else:
                access = classify_gcs_batch(body)
        upload_id = ex.query.get("upload_id", [None])[0]
        started = ex.state.upload(upload_id) if upload_id else None
        if started is not None and started[0] == access.bucket:
            identity = started[1]
        return access, identity

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """An unknown or malformed bearer token is 401 Invalid Credentials, as in GCS."""
        if identity == INVALID:
            return Verdict(False, 401, "authError", "Invalid Credentials")
        return None

    def fault_verdict(self, status: int) -> Verdict:
        reasons = {
            503: ("backendError", "We encountered an internal error. Please try again."),
            500: ("backendError", "We encountered an internal error. Please try again."),
            429: ("rateLimitExceeded", "The rate of change requests to the bucket is too high."),
            403: ("forbidden", "The caller does not have storage access to the bucket."),
        }
        reason, message = reasons.get(status, ("backendError", "Backend Error"))
        return Verdict(False, status, reason, message)

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        reasons = {401: "authError", 403: "forbidden", 409: "conflict"}
        reason = verdict.code if verdict.code in _GCS_REASONS else None
        reason = reason or reasons.get(verdict.status, "backendError")
        err: dict[str, Any] = {"domain": "global", "reason": reason, "message": verdict.message}
        if verdict.status == 401:
            err.update(locationType="header", location="Authorization")
        data = {"error": {"code": verdict.status, "message": verdict.message, "errors": [err]}}
        return "application/json", json.dumps(data).encode()

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        if verdict.status == 401:
            return {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'}
        return {}

    def wants_whole_response(self, ex: Exchange, access: Access) -> bool:
        return "uploadType=resumable" in ex.path

    def on_success(self, done: Success) -> bytes:
        ex, access, identity, up, data = done.ex, done.access, done.identity, done.up, done.data
        state = ex.state
        obj = _json_object(data)
        if access.kind is Kind.CREATE_BUCKET and identity:
            name = obj.get("name") or access.bucket
            if isinstance(name, str) and name not in state.buckets():
                state.set_bucket(name, identity, public=False)
            return data
        if access.kind is Kind.LIST_BUCKETS and identity and isinstance(obj.get("items"), list):
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            obj["items"] = [i for i in obj["items"] if i.get("name") in mine]
            return json.dumps(obj).encode()
        if access.deletes_bucket:
            state.drop_bucket(access.bucket or "")
            return data
        if access.event is None and "uploadType=resumable" in ex.path and ex.method == "POST":
            location = up.header("Location") or ""
            upload_id = parse_qs(urlsplit(location).query).get("upload_id", [None])[0]
            if upload_id and access.bucket:
                state.add_upload(upload_id, access.bucket, identity)
            return data
        if access.event == "delete":
            state.record(access.bucket or "", access.key or "", 0, "delete")
            return data
        if access.event is None:
            return data
        if access.event == "rewrite":
            if not obj.get("done"):
                return data
            obj = obj.get("resource") or {}
        name = obj.get("name")
        if not isinstance(name, str):
            if access.event == "put" and access.key and not obj:  # XML-style PUT /bucket/key
                state.record(access.bucket or "", access.key, ex.content_length(), "put")
            return data
        try:
            size = int(obj.get("size", -1))
        except (TypeError, ValueError):
            size = -1
        state.record(str(obj.get("bucket") or access.bucket), name, size, access.event)
        if access.event == "resumable":
            state.finish_upload(ex.query.get("upload_id", [""])[0])
        return data
