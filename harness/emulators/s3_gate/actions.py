"""S3 requests as IAM actions: a path-style REST request classified by method and
sub-resource into the gate's :class:`~harness.gate.rules.Access` (bucket, key, kind, write
event) with its S3 operation name and the IAM action S3 authorizes it as. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from harness.emulators.s3_gate.post import PostUpload
from harness.gate.rules import Access, Kind, Verdict, header, split_path

_SIGNING = frozenset(("awsaccesskeyid", "signature", "expires"))

# bucket sub-resource -> (operation suffix, GET action, PUT action, DELETE action)
_BUCKET_SUBS: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "acl": ("BucketAcl", "s3:GetBucketAcl", "s3:PutBucketAcl", None),
    "policy": ("BucketPolicy", "s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"),
    "policyStatus": ("BucketPolicyStatus", "s3:GetBucketPolicyStatus", None, None),
    "cors": ("BucketCors", "s3:GetBucketCORS", "s3:PutBucketCORS", "s3:PutBucketCORS"),
    "ownershipControls": (
        "BucketOwnershipControls",
        "s3:GetBucketOwnershipControls",
        "s3:PutBucketOwnershipControls",
        "s3:PutBucketOwnershipControls",
    ),
    "publicAccessBlock": (
        "PublicAccessBlock",
        "s3:GetBucketPublicAccessBlock",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutBucketPublicAccessBlock",
    ),
    "versioning": ("BucketVersioning", "s3:GetBucketVersioning", "s3:PutBucketVersioning", None),
    "tagging": (
        "BucketTagging",
        "s3:GetBucketTagging",
        "s3:PutBucketTagging",
        "s3:PutBucketTagging",
    ),
    "lifecycle": (
        "BucketLifecycleConfiguration",
        "s3:GetLifecycleConfiguration",
        "s3:PutLifecycleConfiguration",
        "s3:PutLifecycleConfiguration",
    ),
    "website": (
        "BucketWebsite",
        "s3:GetBucketWebsite",
        "s3:PutBucketWebsite",
        "s3:DeleteBucketWebsite",
    ),
    "logging": ("BucketLogging", "s3:GetBucketLogging", "s3:PutBucketLogging", None),
    "notification": (
        "BucketNotificationConfiguration",
        "s3:GetBucketNotification",
        "s3:PutBucketNotification",
        None,
    ),
    "encryption": (
        "BucketEncryption",
        "s3:GetEncryptionConfiguration",
        "s3:PutEncryptionConfiguration",
        "s3:PutEncryptionConfiguration",
    ),
    "replication": (
        "BucketReplication",
        "s3:GetReplicationConfiguration",
        "s3:PutReplicationConfiguration",
        "s3:PutReplicationConfiguration",
    ),
    "object-lock": (
        "ObjectLockConfiguration",
        "s3:GetBucketObjectLockConfiguration",
        "s3:PutBucketObjectLockConfiguration",
        None,
    ),
    "requestPayment": (
        "BucketRequestPayment",
        "s3:GetBucketRequestPayment",
        "s3:PutBucketRequestPayment",
        None,
    ),
    "accelerate": (
        "BucketAccelerateConfiguration",
        "s3:GetAccelerateConfiguration",
        "s3:PutAccelerateConfiguration",
        None,
    ),
    **{
        sub: (
            f"Bucket{name}Configuration",
            f"s3:Get{name}Configuration",
            f"s3:Put{name}Configuration",
            f"s3:Put{name}Configuration",
        )
        for sub, name in (
            ("analytics", "Analytics"),
            ("inventory", "Inventory"),
            ("metrics", "Metrics"),
            ("intelligent-tiering", "IntelligentTiering"),
        )
    },
    "location": ("BucketLocation", "s3:GetBucketLocation", None, None),
    "versions": ("ObjectVersions", "s3:ListBucketVersions", None, None),
    "uploads": ("MultipartUploads", "s3:ListBucketMultipartUploads", None, None),
}
MIRRORED = frozenset(
    (
        "PutBucketAcl",
        "PutObjectAcl",
        "GetObjectAcl",
        "PutBucketOwnershipControls",
        "DeleteBucketOwnershipControls",
        "PutPublicAccessBlock",
        "DeletePublicAccessBlock",
        "PutBucketCors",
        "DeleteBucketCors",
    )
)
"""Operations whose success the gate mirrors into its state (or whose answer it rewrites)."""
_OBJECT_SUBS = frozenset(
    (
        "acl",
        "tagging",
        "uploadId",
        "uploads",
        "partNumber",
        "versionId",
        "retention",
        "legal-hold",
        "attributes",
        "restore",
        "select",
        "torrent",
    )
)


@dataclass
class S3Detail:
    """What the S3 protocol carries from classification to decision and bookkeeping."""

    op: str
    """The S3 API operation (``GetObject``, ``PutBucketAcl``, ...)."""
    source: tuple[str, str] | None = None
    """Copy source (bucket, key) of CopyObject / UploadPartCopy."""
    config: Any = None
    """The parsed body or headers of a configuration request (an ACL, a policy, ...)."""
    error: Verdict | None = None
    """What S3 says about a malformed configuration (given after authorization)."""
    meta: dict[str, Any] | None = None
    """Object access metadata a write leaves (None: the defaults)."""
    keys: tuple[str, ...] = ()
    """Keys named in a DeleteObjects body."""


def operation(access: Access) -> str:
    """The S3 operation of a classified request (``PostObject`` for a form upload)."""
    detail = access.detail
    if isinstance(detail, S3Detail):
        return detail.op
    return "PostObject" if isinstance(detail, PostUpload) else ""


def refusal(error: Exception) -> Verdict:
    """The denial an AclError, PolicyError or CorsError stands for."""
    status = int(getattr(error, "status", 400))
    code = str(getattr(error, "code", "MalformedXML"))
    return Verdict(False, status, code, str(getattr(error, "message", error)))


def subresources(query: Mapping[str, list[str]]) -> set[str]:
    """Query keys that select a sub-resource or operation (not signing parameters)."""
    return {k for k in query if not k.lower().startswith("x-") and k.lower() not in _SIGNING}


def copy_source(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """The (bucket, key) of an ``x-amz-copy-source`` header, None without one."""
    value = header(headers, "x-amz-copy-source")
    if not value:
        return None
    src = unquote(value.split("?", 1)[0]).lstrip("/")
    bucket, _, key = src.partition("/")
    return bucket, key


def classify_s3(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an S3 REST request (path-style addressing); ``detail`` is an
    :class:`S3Detail` naming the operation."""
    raw_path, query = split_path(path)
    bucket, _, key_raw = raw_path.lstrip("/").partition("/")
    bucket = unquote(bucket)
    method = method.upper()
    sub = subresources(query)
    if not bucket:
        if method in ("GET", "HEAD"):
            return Access(
                Kind.LIST_BUCKETS, action="s3:ListAllMyBuckets", detail=S3Detail("ListBuckets")
            )
        return Access(Kind.DENY)
    if bucket == "moto-api":
        return Access(Kind.DENY)
    if method == "OPTIONS":
        key = unquote(key_raw) if key_raw else None
        return Access(Kind.READ, bucket, key, detail=S3Detail("Preflight"))
    if not key_raw:
        return _bucket_request(method, bucket, sub)
    return _object_request(method, bucket, unquote(key_raw), sub, headers)


def _bucket_request(method: str, bucket: str, sub: set[str]) -> Access:
    named = next((s for s in _BUCKET_SUBS if s in sub), None)
    if named is not None:
        suffix, get, put, delete = _BUCKET_SUBS[named]
        verb, action = {"GET": ("Get", get), "HEAD": ("Get", get), "PUT": ("Put", put)}.get(
            method, ("Delete", delete) if method == "DELETE" else ("Post", None)
        )
        if named in ("versions", "uploads", "location"):
            verb = "List" if named != "location" else "Get"
        kind = Kind.READ if method in ("GET", "HEAD") else Kind.WRITE
        return Access(kind, bucket, action=action or "s3:*", detail=S3Detail(verb + suffix))
    if method in ("GET", "HEAD"):
        op = "HeadBucket" if method == "HEAD" else "ListObjects"
        return Access(Kind.READ, bucket, action="s3:ListBucket", detail=S3Detail(op))
    if method == "PUT" and not sub:
        return Access(
            Kind.CREATE_BUCKET, bucket, action="s3:CreateBucket", detail=S3Detail("CreateBucket")
        )
    if method == "DELETE":
        return Access(
            Kind.WRITE,
            bucket,
            deletes_bucket=not sub,
            action="s3:DeleteBucket",
            detail=S3Detail("DeleteBucket"),
        )
    if method == "POST" and "delete" in sub:
        return Access(
            Kind.WRITE,
            bucket,
            event="delete",
            action="s3:DeleteObject",
            detail=S3Detail("DeleteObjects"),
        )
    if method == "POST" and not sub:
        return Access(
            Kind.WRITE, bucket, event="put", action="s3:PutObject", detail=S3Detail("PostObject")
        )
    return Access(Kind.WRITE, bucket, action="s3:*", detail=S3Detail(f"{method.title()}Bucket"))


def _object_request(
    method: str, bucket: str, key: str, sub: set[str], headers: Mapping[str, str]
) -> Access:
    known = sub & _OBJECT_SUBS
    if method in ("GET", "HEAD"):
        if "acl" in known:
            return Access(
                Kind.READ, bucket, key, action="s3:GetObjectAcl", detail=S3Detail("GetObjectAcl")
            )
        if "tagging" in known:
            return Access(
                Kind.READ,
                bucket,
                key,
                action="s3:GetObjectTagging",
                detail=S3Detail("GetObjectTagging"),
            )
        if "uploadId" in known:
            return Access(
                Kind.READ,
                bucket,
                key,
                action="s3:ListMultipartUploadParts",
                detail=S3Detail("ListParts"),
            )
        if "attributes" in known:
            return Access(
                Kind.READ,
                bucket,
                key,
                action="s3:GetObjectAttributes",
                detail=S3Detail("GetObjectAttributes"),
            )
        for name, action in (
            ("retention", "s3:GetObjectRetention"),
            ("legal-hold", "s3:GetObjectLegalHold"),
        ):
            if name in known:
                return Access(Kind.READ, bucket, key, action=action, detail=S3Detail(action[3:]))
        action = "s3:GetObjectVersion" if "versionId" in known else "s3:GetObject"
        op = "HeadObject" if method == "HEAD" else "GetObject"
        return Access(Kind.READ, bucket, key, action=action, detail=S3Detail(op))
    if method == "POST" and "select" in known:
        return Access(
            Kind.READ, bucket, key, action="s3:GetObject", detail=S3Detail("SelectObjectContent")
        )
    source = copy_source(headers)
    sources = (source[0],) if source else ()
    if method == "PUT":
        if "acl" in known:
            return Access(
                Kind.WRITE, bucket, key, action="s3:PutObjectAcl", detail=S3Detail("PutObjectAcl")
            )
        if "tagging" in known:
            return Access(
                Kind.WRITE,
                bucket,
                key,
                action="s3:PutObjectTagging",
                detail=S3Detail("PutObjectTagging"),
            )
        for name, action in (
            ("retention", "s3:PutObjectRetention"),
            ("legal-hold", "s3:PutObjectLegalHold"),
        ):
            if name in known:
                return Access(Kind.WRITE, bucket, key, action=action, detail=S3Detail(action[3:]))
        if "partNumber" in known or "uploadId" in known:
            op = "UploadPartCopy" if source else "UploadPart"
            return Access(
                Kind.WRITE,
                bucket,
                key,
                sources=sources,
                action="s3:PutObject",
                detail=S3Detail(op, source=source),
            )
        event, op = ("copy", "CopyObject") if source else ("put", "PutObject")
        return Access(
            Kind.WRITE,
            bucket,
            key,
            sources=sources,
            event=event,
            action="s3:PutObject",
            detail=S3Detail(op, source=source),
        )
    if method == "POST":
        if "uploads" in known:
            return Access(
                Kind.WRITE,
                bucket,
                key,
                action="s3:PutObject",
                detail=S3Detail("CreateMultipartUpload"),
            )
        if "uploadId" in known:
            return Access(
                Kind.WRITE,
                bucket,
                key,
                event="multipart",
                action="s3:PutObject",
                detail=S3Detail("CompleteMultipartUpload"),
            )
        if "restore" in known:
            return Access(
                Kind.WRITE, bucket, key, action="s3:RestoreObject", detail=S3Detail("RestoreObject")
            )
        return Access(
            Kind.WRITE, bucket, key, action="s3:PutObject", detail=S3Detail("PostObjectKey")
        )
    if method == "DELETE":
        if "tagging" in known:
            return Access(
                Kind.WRITE,
                bucket,
                key,
                action="s3:DeleteObjectTagging",
                detail=S3Detail("DeleteObjectTagging"),
            )
        if "uploadId" in known:
            return Access(
                Kind.WRITE,
                bucket,
                key,
                action="s3:AbortMultipartUpload",
                detail=S3Detail("AbortMultipartUpload"),
            )
        action = "s3:DeleteObjectVersion" if "versionId" in known else "s3:DeleteObject"
        return Access(
            Kind.WRITE, bucket, key, event="delete", action=action, detail=S3Detail("DeleteObject")
        )
    return Access(
        Kind.WRITE, bucket, key, action="s3:*", detail=S3Detail(f"{method.title()}Object")
    )
