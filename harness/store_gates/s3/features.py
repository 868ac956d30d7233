"""The S3 gate applies only the access mechanisms its store declares
(harness.gate.access_features): a call of a mechanism the store lacks gets the store's
own error, a new bucket has only the settings the store has, and with bucket-level canned
ACLs (B2) an object has its bucket's ACL. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from harness.gate.access_features import AccessFeatures
from harness.gate.rules import Verdict
from harness.store_gates.s3.access import (
    DEFAULT_BLOCK,
    ENFORCED,
    NO_BLOCK,
    BucketAccess,
)
from harness.store_gates.s3.acl import GRANT_HEADERS, Acl

OPERATIONS = {
    "bucket_policies": frozenset(
        ("PutBucketPolicy", "GetBucketPolicy", "DeleteBucketPolicy", "GetBucketPolicyStatus")
    ),
    "block_public_access": frozenset(
        ("PutPublicAccessBlock", "GetPublicAccessBlock", "DeletePublicAccessBlock")
    ),
    "object_ownership": frozenset(
        (
            "PutBucketOwnershipControls",
            "GetBucketOwnershipControls",
            "DeleteBucketOwnershipControls",
        )
    ),
}
"""The operations of each mechanism (the ACL calls: :data:`ACL_OPERATIONS`)."""
ACL_OPERATIONS = frozenset(("PutBucketAcl", "GetBucketAcl", "PutObjectAcl", "GetObjectAcl"))
ACL_WRITES = frozenset(("CreateBucket", "PutObject", "CopyObject", "CreateMultipartUpload"))
"""Operations that may carry ACL headers."""
CANNED_BUCKET_ACLS = ("private", "public-read")
"""The only ACLs of a store with canned ACLs (B2)."""
OWNERSHIP_HEADER = "x-amz-object-ownership"


def unsupported(features: AccessFeatures, op: str, headers: Mapping[str, str]) -> Verdict | None:
    """The store's refusal of operation ``op`` (its headers lower-case) when it needs a
    mechanism the store lacks, or when it sets an ACL the store cannot have; None when the
    store takes it."""
    for mechanism, ops in OPERATIONS.items():
        if op in ops and not features.has(mechanism):
            return features.lacking(op)
    if op in ACL_OPERATIONS and not features.any_acls:
        return features.lacking(op)
    if features.has("acls"):
        return None
    if op in ACL_WRITES or op in ("PutBucketAcl", "PutObjectAcl"):
        return _acl_headers(features, op, headers)
    return None


def _acl_headers(features: AccessFeatures, op: str, headers: Mapping[str, str]) -> Verdict | None:
    """Without S3's ACLs: grant headers are refused; so is any canned ACL without ACLs at
    all (but 'private', the default), and one other than private and public-read with
    canned ACLs (a B2 PutBucketAcl or PutObjectAcl must name one by header)."""
    for name in GRANT_HEADERS:
        if headers.get(name) is not None:
            return features.lacking(f"Header '{name}' with value '{headers[name]}'")
    canned = headers.get("x-amz-acl")
    if canned is None:
        if op in ("PutBucketAcl", "PutObjectAcl"):
            return features.lacking(f"{op} with an AccessControlPolicy body")
        return None
    value = canned.strip()
    if not features.has("canned_acls"):
        if value == "private":
            return None
        return features.lacking(f"Header 'x-amz-acl' with value '{value}'")
    if value not in CANNED_BUCKET_ACLS:
        return Verdict(False, 400, "InvalidArgument", f"Unsupported value for canned acl '{value}'")
    return None


def new_bucket(
    features: AccessFeatures, owner: str, headers: Mapping[str, str] | None = None
) -> BucketAccess:
    """A new bucket's settings (from its CreateBucket headers): S3's defaults where the
    store has S3's mechanisms; without Block Public Access none is configured; without
    Object Ownership the header is ignored and ACLs are on where the store has them (the
    bucket owner's otherwise). Raises AclError as S3 refuses the headers."""
    headers = dict(headers or {})
    block = DEFAULT_BLOCK if features.has("block_public_access") else NO_BLOCK
    if not features.has("object_ownership"):
        headers[OWNERSHIP_HEADER] = "ObjectWriter" if features.any_acls else ENFORCED
    if not features.any_acls:
        headers.pop("x-amz-acl", None)  # 'private' at most (unsupported() refuses the rest)
    return BucketAccess.new(owner, headers, block=block)


def object_acl_of(features: AccessFeatures, bucket: BucketAccess, stored: Acl | None) -> Acl | None:
    """The ACL that decides access to an object: its own (``stored``; None: private to the
    bucket owner), or with canned ACLs its bucket's, owned by the bucket owner."""
    if features.has("canned_acls"):
        return Acl(bucket.owner, bucket.acl.grants)
    return stored
