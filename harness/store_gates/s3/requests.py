"""S3 requests as IAM actions: a path-style REST request classified by method and
sub-resource into the gate's :class:`~harness.gate.rules.Access` (bucket, key, kind, write
event) with its S3 operation name and the IAM action S3 authorizes it as. The
classification is two tables, :data:`BUCKET_ROUTES` and :data:`OBJECT_ROUTES`, and one
look-up, :func:`route`. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from harness.gate.rules import Access, Kind, Verdict, header, split_path
from harness.store_gates.s3.post import PostUpload

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


@dataclass(frozen=True)
class Route:
    """What a request of one shape is: its kind, S3 operation, IAM action, write event."""

    kind: Kind
    op: str
    action: str | None = None
    event: str | None = None
    deletes_bucket: bool = False
    copy: tuple[str, str | None] | None = None
    """(operation, event) of the request when it carries ``x-amz-copy-source``; a route
    with one reads that source (its bucket joins the request's ``sources``)."""


ANY = "*"
"""A row's method or marker that every request matches."""
NONE = ""
"""A row's marker that a request naming no sub-resource matches."""

Table = Sequence[tuple[str, str, Route]]
"""Rows of (method, marker, route), the first match wins: the marker is a sub-resource
the request names, NONE or ANY."""


def route(table: Table, method: str, markers: set[str]) -> Route | None:
    """The route of the first row of ``table`` matching ``method`` and ``markers``."""
    for want, marker, found in table:
        if want not in (method, ANY):
            continue
        if marker == ANY or marker in markers or (marker == NONE and not markers):
            return found
    return None


_R, _W = Kind.READ, Kind.WRITE


def _bucket_sub_rows(sub: str) -> list[tuple[str, str, Route]]:
    """The rows of one bucket sub-resource of :data:`_BUCKET_SUBS`."""
    suffix, get, put, delete = _BUCKET_SUBS[sub]
    verbs = {"GET": ("Get", get), "HEAD": ("Get", get), "PUT": ("Put", put)}
    verbs |= {"DELETE": ("Delete", delete), ANY: ("Post", None)}
    listed = {"versions": "List", "uploads": "List", "location": "Get"}
    rows = []
    for method, (verb, action) in verbs.items():
        kind = _R if method in ("GET", "HEAD") else _W
        rows.append((method, sub, Route(kind, listed.get(sub, verb) + suffix, action or "s3:*")))
    return rows


BUCKET_ROUTES: Table = (
    *(row for sub in _BUCKET_SUBS for row in _bucket_sub_rows(sub)),
    ("HEAD", ANY, Route(_R, "HeadBucket", "s3:ListBucket")),
    ("GET", ANY, Route(_R, "ListObjects", "s3:ListBucket")),
    ("PUT", NONE, Route(Kind.CREATE_BUCKET, "CreateBucket", "s3:CreateBucket")),
    ("DELETE", NONE, Route(_W, "DeleteBucket", "s3:DeleteBucket", deletes_bucket=True)),
    ("DELETE", ANY, Route(_W, "DeleteBucket", "s3:DeleteBucket")),
    ("POST", "delete", Route(_W, "DeleteObjects", "s3:DeleteObject", "delete")),
    ("POST", NONE, Route(_W, "PostObject", "s3:PutObject", "put")),
)
"""A request on a bucket (no key): its sub-resource's row (the first of
:data:`_BUCKET_SUBS` it names), else by method; anything else is ``<Method>Bucket``."""

OBJECT_ROUTES: Table = (
    *(
        (method, sub, Route(_R, op, action))
        for method in ("GET", "HEAD")
        for sub, op, action in (
            ("acl", "GetObjectAcl", "s3:GetObjectAcl"),
            ("tagging", "GetObjectTagging", "s3:GetObjectTagging"),
            ("uploadId", "ListParts", "s3:ListMultipartUploadParts"),
            ("attributes", "GetObjectAttributes", "s3:GetObjectAttributes"),
            ("retention", "GetObjectRetention", "s3:GetObjectRetention"),
            ("legal-hold", "GetObjectLegalHold", "s3:GetObjectLegalHold"),
        )
    ),
    ("GET", "versionId", Route(_R, "GetObject", "s3:GetObjectVersion")),
    ("HEAD", "versionId", Route(_R, "HeadObject", "s3:GetObjectVersion")),
    ("GET", ANY, Route(_R, "GetObject", "s3:GetObject")),
    ("HEAD", ANY, Route(_R, "HeadObject", "s3:GetObject")),
    ("POST", "select", Route(_R, "SelectObjectContent", "s3:GetObject")),
    ("PUT", "acl", Route(_W, "PutObjectAcl", "s3:PutObjectAcl")),
    ("PUT", "tagging", Route(_W, "PutObjectTagging", "s3:PutObjectTagging")),
    ("PUT", "retention", Route(_W, "PutObjectRetention", "s3:PutObjectRetention")),
    ("PUT", "legal-hold", Route(_W, "PutObjectLegalHold", "s3:PutObjectLegalHold")),
    *(
        ("PUT", sub, Route(_W, "UploadPart", "s3:PutObject", copy=("UploadPartCopy", None)))
        for sub in ("partNumber", "uploadId")
    ),
    ("PUT", ANY, Route(_W, "PutObject", "s3:PutObject", "put", copy=("CopyObject", "copy"))),
    ("POST", "uploads", Route(_W, "CreateMultipartUpload", "s3:PutObject")),
    ("POST", "uploadId", Route(_W, "CompleteMultipartUpload", "s3:PutObject", "multipart")),
    ("POST", "restore", Route(_W, "RestoreObject", "s3:RestoreObject")),
    ("POST", ANY, Route(_W, "PostObjectKey", "s3:PutObject")),
    ("DELETE", "tagging", Route(_W, "DeleteObjectTagging", "s3:DeleteObjectTagging")),
    ("DELETE", "uploadId", Route(_W, "AbortMultipartUpload", "s3:AbortMultipartUpload")),
    ("DELETE", "versionId", Route(_W, "DeleteObject", "s3:DeleteObjectVersion", "delete")),
    ("DELETE", ANY, Route(_W, "DeleteObject", "s3:DeleteObject", "delete")),
)
"""A request on an object: by method and the sub-resources it names (others are ignored);
anything else is ``<Method>Object``."""


def operation(access: Access) -> str:
    """The S3 operation of a classified request (``PostObject`` for a form upload)."""
    detail = access.detail
    if isinstance(detail, S3Detail):
        return detail.op
    return "PostObject" if isinstance(detail, PostUpload) else ""


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


def classify_s3(
    method: str,
    path: str,
    headers: Mapping[str, str],
    tables: tuple[Table, Table] = (BUCKET_ROUTES, OBJECT_ROUTES),
) -> Access:
    """Classify an S3 REST request (path-style addressing) by ``tables`` (the bucket and
    the object routes); ``detail`` is an :class:`S3Detail` naming the operation."""
    raw_path, query = split_path(path)
    bucket, _, key_raw = raw_path.lstrip("/").partition("/")
    bucket = unquote(bucket)
    method = method.upper()
    if not bucket:
        if method in ("GET", "HEAD"):
            return Access(
                Kind.LIST_BUCKETS, action="s3:ListAllMyBuckets", detail=S3Detail("ListBuckets")
            )
        return Access(Kind.DENY)
    if bucket == "moto-api":
        return Access(Kind.DENY)
    sub = subresources(query)
    key = unquote(key_raw) if key_raw else None
    if key is None:
        found = route(tables[0], method, sub)
        fallback = f"{method.title()}Bucket"
    else:
        found = route(tables[1], method, sub)
        fallback = f"{method.title()}Object"
    found = found or Route(_W, fallback, "s3:*")
    source = copy_source(headers) if found.copy else None
    op, event = found.copy if source and found.copy else (found.op, found.event)
    return Access(
        found.kind,
        bucket,
        key,
        sources=(source[0],) if source else (),
        event=event,
        deletes_bucket=found.deletes_bucket,
        action=found.action,
        detail=S3Detail(op, source=source),
    )
