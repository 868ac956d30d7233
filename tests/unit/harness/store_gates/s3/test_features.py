"""The S3 gate enforces only the access mechanisms its store declares, without a cloud:
the calls of a missing mechanism get the store's error, ACL headers are refused or
narrowed, a new bucket has only the settings the store has, objects of a canned-ACL store
have their bucket's ACL, and the declaration reaches the gate's version."""

from __future__ import annotations

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.launcher import gate_version
from harness.emulators.r2 import R2_FEATURES, R2Emulator
from harness.emulators.s3 import S3Emulator
from harness.gate.access_features import S3_FEATURES, AccessFeatures
from harness.store_gates.s3.access import DEFAULT_BLOCK, ENFORCED, NO_BLOCK, authorize
from harness.store_gates.s3.acl import canned_acl, private_acl
from harness.store_gates.s3.features import new_bucket, object_acl_of, unsupported

CANNED = AccessFeatures(
    frozenset(("canned_acls",)), code="NotImplemented", message="This API call is not supported."
)
"""A store with bucket-level canned ACLs only, as B2."""
S3_CALLS = (
    "PutBucketPolicy",
    "GetBucketPolicy",
    "DeleteBucketPolicy",
    "GetBucketPolicyStatus",
    "PutPublicAccessBlock",
    "GetPublicAccessBlock",
    "DeletePublicAccessBlock",
    "PutBucketOwnershipControls",
    "GetBucketOwnershipControls",
    "DeleteBucketOwnershipControls",
)


@pytest.mark.parametrize("op", (*S3_CALLS, "PutBucketAcl", "GetBucketAcl", "GetObjectAcl"))
def test_s3_takes_every_access_call(op: str) -> None:
    assert unsupported(S3_FEATURES, op, {"x-amz-grant-read": 'uri="x"'}) is None


@pytest.mark.parametrize("op", (*S3_CALLS, "PutBucketAcl", "GetBucketAcl", "PutObjectAcl"))
def test_r2_answers_what_it_lacks_501_not_implemented(op: str) -> None:
    verdict = unsupported(R2_FEATURES, op, {})
    assert verdict is not None and not verdict.allowed
    assert (verdict.status, verdict.code, verdict.message) == (
        501,
        "NotImplemented",
        f"{op} not implemented",
    )


@pytest.mark.parametrize("op", ("CreateBucket", "PutObject", "CopyObject"))
def test_without_acls_only_a_private_canned_acl_is_taken(op: str) -> None:
    assert unsupported(R2_FEATURES, op, {}) is None
    assert unsupported(R2_FEATURES, op, {"x-amz-acl": "private"}) is None
    refused = unsupported(R2_FEATURES, op, {"x-amz-acl": "public-read"})
    assert refused is not None and refused.status == 501
    assert refused.message == "Header 'x-amz-acl' with value 'public-read' not implemented"
    grant = unsupported(R2_FEATURES, op, {"x-amz-grant-read": 'uri="x"'})
    assert grant is not None and "x-amz-grant-read" in grant.message


def test_canned_acls_are_private_or_public_read_by_header() -> None:
    for value in ("private", "public-read"):
        assert unsupported(CANNED, "PutBucketAcl", {"x-amz-acl": value}) is None
        assert unsupported(CANNED, "CreateBucket", {"x-amz-acl": value}) is None
    other = unsupported(CANNED, "PutBucketAcl", {"x-amz-acl": "authenticated-read"})
    assert other is not None
    assert (other.status, other.code) == (400, "InvalidArgument")
    assert other.message == "Unsupported value for canned acl 'authenticated-read'"
    body = unsupported(CANNED, "PutBucketAcl", {})  # an AccessControlPolicy document
    assert body is not None and (body.status, body.message) == (
        501,
        "This API call is not supported.",
    )
    assert unsupported(CANNED, "PutBucketPolicy", {}) is not None
    assert unsupported(CANNED, "PutPublicAccessBlock", {}) is not None
    assert unsupported(CANNED, "GetBucketAcl", {}) is None


def test_a_new_bucket_has_only_what_the_store_has() -> None:
    s3 = new_bucket(S3_FEATURES, USER, {})
    assert (s3.block, s3.ownership) == (DEFAULT_BLOCK, ENFORCED)  # AWS's defaults
    r2 = new_bucket(R2_FEATURES, USER, {"x-amz-object-ownership": "ObjectWriter"})
    assert (r2.block, r2.ownership, r2.acl) == (NO_BLOCK, ENFORCED, private_acl(USER))
    b2 = new_bucket(CANNED, USER, {"x-amz-acl": "public-read"})
    assert b2.block == NO_BLOCK and b2.acls_enabled()
    assert b2.acl == canned_acl("public-read", USER, USER)


def test_without_block_public_access_the_public_setting_opens_the_bucket() -> None:
    s3, r2 = new_bucket(S3_FEATURES, USER), new_bucket(R2_FEATURES, USER)
    for action, key in (("s3:ListBucket", None), ("s3:GetObject", "k")):
        assert not authorize(s3, None, action, key, public_flag=True).allowed  # S3: blocked
        assert authorize(r2, None, action, key, public_flag=True).allowed
        assert not authorize(r2, None, action, key).allowed  # private until switched on


def test_objects_of_a_canned_acl_store_have_their_buckets_acl() -> None:
    public = new_bucket(CANNED, USER, {"x-amz-acl": "public-read"})
    own = canned_acl("private", OTHER, USER)  # an object ACL the store does not keep
    acl = object_acl_of(CANNED, public, own)
    assert acl is not None and acl.owner == USER and acl.grants == public.acl.grants
    assert authorize(public, None, "s3:GetObject", "k", acl).allowed
    private = new_bucket(CANNED, USER)
    assert not authorize(
        private, None, "s3:GetObject", "k", object_acl_of(CANNED, private, None)
    ).allowed
    assert object_acl_of(S3_FEATURES, public, own) is own


def test_the_declaration_is_checked() -> None:
    with pytest.raises(ValueError, match="Unknown access mechanism"):
        AccessFeatures(frozenset(("bucket_acls",)))
    with pytest.raises(ValueError, match="either 'acls'"):
        AccessFeatures(frozenset(("acls", "canned_acls")))


def test_the_features_are_the_gates_configuration() -> None:
    assert S3Emulator.gate_protocol().features == S3_FEATURES
    assert R2Emulator.gate_protocol().features == R2_FEATURES

    class Fewer(S3Emulator):
        access_features = CANNED

    assert gate_version(Fewer) != gate_version(S3Emulator)  # a gate with others restarts
