"""The access gate's rules, free of any networking: who is calling, what a request does, and
whether it is allowed.

A request is first *classified* into an :class:`Access` (which bucket it touches, whether
it reads or writes, which write event it produces), then *decided* against the bucket table
(owner and public flag of every bucket the gate knows). The gate process (harness.gate)
applies the verdict and forwards allowed requests to the emulator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import parse_qs, unquote, urlsplit

from harness.accounts import owner_of_gcs_token, owner_of_s3_key

ANONYMOUS: str | None = None
"""Identity of a request that carries no credentials."""
INVALID = "<invalid>"
"""Identity of a request whose credentials name no known account."""


class Kind(Enum):
    """What a request does, as far as access control is concerned."""

    LIST_BUCKETS = "list_buckets"
    CREATE_BUCKET = "create_bucket"
    READ = "read"
    WRITE = "write"
    DENY = "deny"  # never forwarded (emulator internals, unknown API paths)
    PASS = "pass"  # forwarded unchecked (Azure: Azurite enforces access itself)


@dataclass
class Access:
    """The classification of one request."""

    kind: Kind
    bucket: str | None = None
    key: str | None = None
    sources: tuple[str, ...] = ()
    """Buckets the request reads from besides ``bucket`` (copy / rewrite sources)."""
    event: str | None = None
    """Write event recorded on success: put, copy, multipart, resumable, rewrite, compose,
    commit or delete."""
    deletes_bucket: bool = False
    needs_body: bool = False
    """The bucket name is in the (small) request body: GCS bucket insert."""
    sub: list[Access] = field(default_factory=list)
    """Parts of a GCS batch request, each decided separately."""


@dataclass(frozen=True)
class Bucket:
    """A bucket known to the gate."""

    owner: str
    public: bool = False


@dataclass(frozen=True)
class Verdict:
    """Allow, or deny with an HTTP status, an API error code and a message."""

    allowed: bool
    status: int = 200
    code: str = ""
    message: str = ""


ALLOW = Verdict(True)


def _deny(message: str, code: str = "AccessDenied", status: int = 403) -> Verdict:
    return Verdict(False, status, code, message)


def _who(identity: str | None) -> str:
    return "anonymous caller" if identity is ANONYMOUS else f"account '{identity}'"


def decide(access: Access, identity: str | None, buckets: Mapping[str, Bucket]) -> Verdict:
    """Apply the access rules of the local cloud to a classified request.

    Owner: everything. Another signed account: read/list of a public bucket. Anonymous:
    read/list of a public bucket. Unknown credentials: nothing. Buckets the gate does not
    know are passed through for reads (the emulator answers 404) and for signed writes.
    """
    if access.kind is Kind.PASS:
        return ALLOW
    if access.kind is Kind.DENY:
        return _deny("This endpoint is not available through the access gate.")
    if identity == INVALID:
        return _deny(
            "The credentials are not known to this storage service (unknown access key or token).",
            code="InvalidAccessKeyId",
        )
    if access.sub:
        for part in access.sub:
            verdict = decide(part, identity, buckets)
            if not verdict.allowed:
                return verdict
        return ALLOW
    if access.kind is Kind.LIST_BUCKETS:
        if identity is ANONYMOUS:
            return _deny("Anonymous callers cannot list buckets.")
        return ALLOW
    if access.kind is Kind.CREATE_BUCKET:
        if identity is ANONYMOUS:
            return _deny("Anonymous callers cannot create buckets.")
        known = buckets.get(access.bucket or "")
        if known is not None and known.owner != identity:
            return _deny(
                f"The bucket name '{access.bucket}' is already taken by another account. "
                "Choose another name.",
                code="BucketAlreadyExists",
                status=409,
            )
        return ALLOW
    for source in access.sources:
        verdict = _check(source, Kind.READ, identity, buckets)
        if not verdict.allowed:
            return verdict
    return _check(access.bucket, access.kind, identity, buckets)


def _check(
    bucket: str | None, kind: Kind, identity: str | None, buckets: Mapping[str, Bucket]
) -> Verdict:
    known = buckets.get(bucket or "")
    if known is None:
        if kind is Kind.WRITE and identity is ANONYMOUS:
            return _deny(f"Anonymous callers cannot write to bucket '{bucket}'.")
        return ALLOW  # the emulator answers (usually 404 no such bucket)
    if known.owner == identity:
        return ALLOW
    if kind is Kind.READ:
        if known.public:
            return ALLOW
        return _deny(f"{_who(identity).capitalize()} may not read private bucket '{bucket}'.")
    return _deny(f"{_who(identity).capitalize()} may not write to bucket '{bucket}'.")


def _split(path: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(path)
    return parts.path, parse_qs(parts.query, keep_blank_values=True)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Header lookup in a mapping with lower-cased names (or any casing as a fallback)."""
    value = headers.get(name.lower())
    return headers.get(name) if value is None else value


# --- S3 ------------------------------------------------------------------------------------

_SIGV4 = re.compile(r"Credential=([^/,\s]+)/")
_SIGV2 = re.compile(r"^AWS ([^:\s]+):")


def s3_identity(headers: Mapping[str, str], query: Mapping[str, list[str]]) -> str | None:
    """The account behind an S3 request (header or presigned URL), ANONYMOUS or INVALID."""
    auth = _header(headers, "Authorization")
    key: str | None = None
    if auth:
        match = _SIGV4.search(auth) or _SIGV2.match(auth)
        if not match:
            return INVALID
        key = match.group(1)
    else:
        lowered = {k.lower(): v for k, v in query.items()}
        if "x-amz-credential" in lowered:
            key = lowered["x-amz-credential"][0].split("/", 1)[0]
        elif "awsaccesskeyid" in lowered:
            key = lowered["awsaccesskeyid"][0]
    if key is None:
        return ANONYMOUS
    return owner_of_s3_key(key) or INVALID


def _s3_subresources(query: Mapping[str, list[str]]) -> set[str]:
    """Query keys that select a sub-resource or operation (not signing parameters)."""
    return {
        k
        for k in query
        if not k.lower().startswith("x-")
        and k.lower() not in ("awsaccesskeyid", "signature", "expires")
    }


def classify_s3(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an S3 REST request (path-style addressing)."""
    raw_path, query = _split(path)
    bucket, _, key_raw = raw_path.lstrip("/").partition("/")
    bucket = unquote(bucket)
    key = unquote(key_raw)
    sub = _s3_subresources(query)
    method = method.upper()
    if not bucket:
        return Access(Kind.LIST_BUCKETS if method in ("GET", "HEAD") else Kind.DENY)
    if bucket == "moto-api":
        return Access(Kind.DENY)
    if not key_raw:
        if method in ("GET", "HEAD"):
            return Access(Kind.READ, bucket)
        if method == "PUT" and not sub:
            return Access(Kind.CREATE_BUCKET, bucket)
        if method == "DELETE":
            return Access(Kind.WRITE, bucket, deletes_bucket=not sub)
        if method == "POST" and "delete" in sub:
            return Access(Kind.WRITE, bucket, event="delete")
        return Access(Kind.WRITE, bucket)
    if method in ("GET", "HEAD"):
        return Access(Kind.READ, bucket, key)
    if method == "POST" and "select" in sub:
        return Access(Kind.READ, bucket, key)
    sources: tuple[str, ...] = ()
    copy_source = _header(headers, "x-amz-copy-source")
    if copy_source:
        src = unquote(copy_source.split("?", 1)[0]).lstrip("/")
        sources = (src.split("/", 1)[0],)
    event: str | None = None
    if method == "PUT" and not sub:
        event = "copy" if copy_source else "put"
    elif method == "POST" and "uploadId" in sub:
        event = "multipart"
    elif method == "DELETE" and sub <= {"versionId"}:
        event = "delete"
    return Access(Kind.WRITE, bucket, key, sources=sources, event=event)


# --- GCS -----------------------------------------------------------------------------------


def gcs_identity(headers: Mapping[str, str]) -> str | None:
    """The account behind a GCS request (``Authorization: Bearer``), ANONYMOUS or INVALID."""
    auth = _header(headers, "Authorization")
    if not auth:
        return ANONYMOUS
    scheme, _, token = auth.strip().partition(" ")
    if scheme.lower() != "bearer":
        return INVALID
    return owner_of_gcs_token(token.strip()) or INVALID


_GCS_API_ROOTS = ("storage", "upload", "download", "batch", "_internal")


def classify_gcs(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify a GCS JSON API request (or an XML-style ``/bucket/object`` request)."""
    raw_path, query = _split(path)
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
        if method == "POST" and upload_type == "resumable":
            return Access(Kind.WRITE, bucket)
        if method == "PUT" and "upload_id" in query:
            return Access(Kind.WRITE, bucket, event="resumable")
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


# --- Azure ---------------------------------------------------------------------------------


def classify_azure(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an Azure Blob request (``/<account>/<container>/<blob>``) for event
    recording only: Azurite enforces access itself, so every request passes."""
    raw_path, query = _split(path)
    segs = raw_path.lstrip("/").split("/", 2)
    if len(segs) < 3 or not segs[2]:
        return Access(Kind.PASS, unquote(segs[1]) if len(segs) > 1 else None)
    container, blob = unquote(segs[1]), unquote(segs[2])
    comp = query.get("comp", [""])[0].lower()
    method = method.upper()
    event: str | None = None
    if method == "PUT":
        if not comp:
            event = "copy" if _header(headers, "x-ms-copy-source") else "put"
        elif comp == "blocklist":
            event = "commit"
    elif method == "DELETE" and not comp:
        event = "delete"
    return Access(Kind.PASS, container, blob, event=event)
