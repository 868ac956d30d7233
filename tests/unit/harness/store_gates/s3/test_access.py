"""The S3 access model (harness.store_gates.s3.access): one decision table per "Why" bullet of
issue 22 about ACLs, policies, Block Public Access and Object Ownership, plus the settings'
XML (as botocore writes and reads it) and JSON forms."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore import parsers, serialize
from hypothesis import given
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.store_gates.s3.access import (
    DEFAULT_BLOCK,
    NO_BLOCK,
    OWNERSHIP_MODES,
    BucketAccess,
    PublicAccessBlock,
    authorize,
    check_acl_change,
    check_ownership_change,
    check_policy_change,
    is_public_bucket,
    object_acl_for_put,
    object_owner,
    ownership_from_xml,
    ownership_to_xml,
)
from harness.store_gates.s3.acl import (
    ALL_USERS,
    ANONYMOUS_OWNER,
    S3_ACCOUNTS,
    Acl,
    AclError,
    Grant,
    canned_acl,
    private_acl,
)
from harness.store_gates.s3.policy import BucketPolicy
from tests.unit.harness.store_gates.s3.decisions import allowed, with_policy

B = "bk"
OTHER_ID = S3_ACCOUNTS[OTHER].account_id
S3_MODEL = botocore.session.get_session().get_service_model("s3")
LIST, GET, PUT, DELETE = "s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"


def acl_bucket(
    ownership: str = "ObjectWriter", block: PublicAccessBlock = NO_BLOCK
) -> BucketAccess:
    """A bucket of USER with ACLs enabled and (by default) no Block Public Access."""
    return BucketAccess.new(USER, {"x-amz-object-ownership": ownership}).with_block(block)


def allow(principal: Any, action: Any, resource: Any, effect: str = "Allow") -> dict[str, Any]:
    return {"Effect": effect, "Principal": principal, "Action": action, "Resource": resource}


def test_new_buckets_are_as_aws_makes_them() -> None:
    bucket = BucketAccess.new(USER, {})
    assert bucket.ownership == "BucketOwnerEnforced" and not bucket.acls_enabled()
    assert bucket.block == DEFAULT_BLOCK and DEFAULT_BLOCK.flags() == (True, True, True, True)
    assert bucket.acl == private_acl(USER) and bucket.policy is None
    assert not is_public_bucket(bucket)
    for caller in (OTHER, None):
        for action, key in ((LIST, None), (GET, "k"), (PUT, "k"), ("s3:GetBucketAcl", None)):
            assert not allowed(bucket, caller, action, key)
    for action, key in ((LIST, None), (GET, "k"), (PUT, "k"), ("s3:PutBucketPolicy", None)):
        assert allowed(bucket, USER, action, key)


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"x-amz-object-ownership": "Whoever"}, "InvalidArgument"),
        ({"x-amz-acl": "public-read"}, "InvalidBucketAclWithObjectOwnership"),
        ({"x-amz-acl": "log-delivery-write"}, "InvalidBucketAclWithObjectOwnership"),
        (
            {"x-amz-acl": "public-read", "x-amz-object-ownership": "ObjectWriter"},
            "InvalidBucketAclWithBlockPublicAccessError",
        ),
        ({"x-amz-acl": "private", "x-amz-grant-read": f'uri="{ALL_USERS}"'}, "InvalidRequest"),
    ],
)
def test_create_bucket_errors(headers: dict[str, str], code: str) -> None:
    with pytest.raises(AclError) as err:
        BucketAccess.new(USER, headers)
    assert (err.value.status, err.value.code) == (400, code)


def test_create_bucket_with_accepted_acls() -> None:
    assert BucketAccess.new(USER, {"x-amz-acl": "private"}).acl == private_acl(USER)
    writer = BucketAccess.new(
        USER, {"x-amz-acl": "log-delivery-write", "x-amz-object-ownership": "BucketOwnerPreferred"}
    )
    assert writer.ownership == "BucketOwnerPreferred" and len(writer.acl.grants) == 3


def test_anonymous_read_of_a_private_object_in_a_public_bucket_is_denied() -> None:
    bucket = acl_bucket().with_acl(canned_acl("public-read", USER, USER))
    assert is_public_bucket(bucket)
    assert allowed(bucket, None, LIST)
    assert not allowed(bucket, None, GET, "private-object")  # default ACL
    assert not allowed(bucket, None, GET, "private-object", private_acl(USER))
    assert allowed(bucket, None, GET, "open", canned_acl("public-read", USER, USER))
    assert not allowed(bucket, None, PUT, "new")


def test_put_bucket_acl_public_read_after_creation() -> None:
    enforced = BucketAccess.new(USER, {})
    public = canned_acl("public-read", USER, USER)
    refusal = check_acl_change(enforced, public)
    assert refusal is not None and (refusal.status, refusal.code) == (
        400,
        "AccessControlListNotSupported",
    )
    assert refusal.message == "The bucket does not allow ACLs"
    blocked = acl_bucket(block=DEFAULT_BLOCK)
    refusal = check_acl_change(blocked, public)
    assert refusal is not None and (refusal.status, refusal.code) == (403, "AccessDenied")
    bucket = acl_bucket()
    assert check_acl_change(bucket, public) is None
    bucket = bucket.with_acl(public)
    assert allowed(bucket, None, LIST) and allowed(bucket, OTHER, "s3:ListBucketVersions")
    assert not allowed(bucket, None, "s3:GetBucketAcl")  # READ is not READ_ACP
    assert not allowed(bucket, OTHER, PUT, "k")


def test_object_acl_public_read() -> None:
    bucket = acl_bucket()
    acl = canned_acl("public-read", USER, USER)
    assert check_acl_change(bucket, acl) is None
    assert allowed(bucket, None, GET, "k", acl) and allowed(
        bucket, OTHER, "s3:GetObjectVersion", "k", acl
    )
    assert not allowed(bucket, None, "s3:GetObjectAcl", "k", acl)
    assert not allowed(bucket, None, "s3:PutObjectAcl", "k", acl)
    assert not allowed(bucket, None, "s3:GetObjectTagging", "k", acl)  # not granted by READ
    assert not allowed(bucket, None, LIST)  # the bucket stays private
    assert not allowed(
        bucket.with_block(PublicAccessBlock(ignore_public_acls=True)), None, GET, "k", acl
    )


def test_public_read_write_bucket_allows_writes_and_deletes() -> None:
    bucket = acl_bucket().with_acl(canned_acl("public-read-write", USER, USER))
    for action in (PUT, DELETE, "s3:AbortMultipartUpload"):
        assert allowed(bucket, None, action, "k") and allowed(bucket, OTHER, action, "k")
    assert allowed(bucket, None, LIST)
    assert not allowed(bucket, None, "s3:PutBucketAcl")
    assert not allowed(bucket, OTHER, "s3:DeleteObjectVersion", "k")
    ignored = bucket.with_block(PublicAccessBlock(ignore_public_acls=True))
    assert not allowed(ignored, None, PUT, "k") and not allowed(ignored, None, LIST)


def test_grants_to_the_other_account() -> None:
    full = acl_bucket().with_acl(
        Acl(USER, (Grant(USER, "FULL_CONTROL"), Grant(OTHER, "FULL_CONTROL")))
    )
    for action, key in (
        (LIST, None),
        (PUT, "k"),
        (DELETE, "k"),
        ("s3:GetBucketAcl", None),
        ("s3:PutBucketAcl", None),
    ):
        assert allowed(full, OTHER, action, key)
        assert not allowed(full, None, action, key)
    assert not allowed(full, OTHER, "s3:PutBucketPolicy")  # not an ACL permission
    assert not allowed(full, OTHER, GET, "k")  # bucket grants do not reach objects
    read = acl_bucket().with_acl(Acl(USER, (Grant(USER, "FULL_CONTROL"), Grant(OTHER, "READ"))))
    assert allowed(read, OTHER, LIST) and not allowed(read, OTHER, PUT, "k")
    obj_read = Acl(USER, (Grant(USER, "FULL_CONTROL"), Grant(OTHER, "READ")))
    assert allowed(read, OTHER, GET, "k", obj_read)
    assert not allowed(read, OTHER, "s3:GetObjectAcl", "k", obj_read)
    obj_full = Acl(USER, (Grant(OTHER, "FULL_CONTROL"),))
    for action in (GET, "s3:GetObjectAcl", "s3:PutObjectAcl"):
        assert allowed(read, OTHER, action, "k", obj_full)
    assert not allowed(read, OTHER, "s3:PutObjectTagging", "k", obj_full)  # owner or policy only


def test_copy_with_a_canned_acl() -> None:
    source_acl = canned_acl("public-read", USER, USER)
    target = acl_bucket().with_acl(Acl(USER, (Grant(USER, "FULL_CONTROL"), Grant(OTHER, "WRITE"))))
    # CopyObject = GetObject on the source + PutObject on the target + the ACL headers
    assert allowed(acl_bucket(), OTHER, GET, "src", source_acl)
    assert allowed(target, OTHER, PUT, "dst")
    acl = object_acl_for_put(target, OTHER, {"x-amz-acl": "public-read"})
    assert acl == canned_acl("public-read", OTHER, USER)
    assert allowed(target, None, GET, "dst", acl)
    assert allowed(target, USER, GET, "dst", acl)  # through AllUsers READ
    assert not allowed(target, USER, GET, "dst", private_acl(OTHER))
    assert object_acl_for_put(target, OTHER, {}) == private_acl(OTHER)
    with pytest.raises(AclError) as err:
        object_acl_for_put(BucketAccess.new(USER, {}), USER, {"x-amz-acl": "public-read"})
    assert (err.value.status, err.value.code) == (400, "AccessControlListNotSupported")
    with pytest.raises(AclError) as err:
        object_acl_for_put(acl_bucket(block=DEFAULT_BLOCK), USER, {"x-amz-acl": "public-read"})
    assert (err.value.status, err.value.code) == (403, "AccessDenied")


@pytest.mark.parametrize(
    ("action", "key", "resource"),
    [
        (GET, "k", f"arn:aws:s3:::{B}/*"),
        (PUT, "k", f"arn:aws:s3:::{B}/*"),
        (DELETE, "k", f"arn:aws:s3:::{B}/*"),
        (LIST, None, f"arn:aws:s3:::{B}"),
        ("s3:GetObjectTagging", "k", f"arn:aws:s3:::{B}/*"),
        ("s3:PutObjectTagging", "k", f"arn:aws:s3:::{B}/*"),
        ("s3:DeleteObjectTagging", "k", f"arn:aws:s3:::{B}/*"),
        ("s3:GetBucketTagging", None, f"arn:aws:s3:::{B}"),
    ],
)
@pytest.mark.parametrize("principal", [{"AWS": OTHER_ID}, "*"])
def test_policy_allows_other_and_everyone(
    action: str, key: str | None, resource: str, principal: Any
) -> None:
    base = BucketAccess.new(USER, {}).with_block(NO_BLOCK)
    assert not allowed(base, OTHER, action, key)
    bucket = with_policy(base, allow(principal, action, resource))
    assert allowed(bucket, OTHER, action, key)
    assert allowed(bucket, None, action, key) is (principal == "*")
    unrelated = "s3:GetBucketAcl" if key is None else "s3:GetObjectAcl"
    assert not allowed(bucket, OTHER, unrelated, key)


def test_policy_cannot_open_objects_the_bucket_owner_does_not_own() -> None:
    bucket = with_policy(acl_bucket(), allow("*", GET, f"arn:aws:s3:::{B}/*"))
    others_object = private_acl(OTHER)
    assert not allowed(bucket, None, GET, "k", others_object)
    assert not allowed(bucket, USER, GET, "k", others_object)  # nor to the bucket owner
    assert allowed(bucket, OTHER, GET, "k", others_object)  # its owner reads it
    assert allowed(bucket, USER, DELETE, "k", others_object)  # deleting is the bucket's
    enforced = with_policy(
        BucketAccess.new(USER, {}).with_block(NO_BLOCK), allow("*", GET, f"arn:aws:s3:::{B}/*")
    )
    assert allowed(enforced, None, GET, "k", others_object)  # enforced: the bucket owner owns it


def test_explicit_deny_wins() -> None:
    public = acl_bucket().with_acl(canned_acl("public-read-write", USER, USER))
    bucket = with_policy(
        public,
        allow({"AWS": OTHER_ID}, "s3:*", [f"arn:aws:s3:::{B}", f"arn:aws:s3:::{B}/*"]),
        allow(
            "*",
            ["s3:PutObject", "s3:GetObject", "s3:PutBucketPolicy"],
            f"arn:aws:s3:::{B}/*",
            effect="Deny",
        )
        | {"Resource": [f"arn:aws:s3:::{B}", f"arn:aws:s3:::{B}/*"]},
    )
    assert allowed(bucket, OTHER, LIST) and allowed(bucket, None, LIST)
    for caller in (USER, OTHER, None):
        assert not allowed(bucket, caller, PUT, "k")
        assert not allowed(bucket, caller, GET, "k", canned_acl("public-read", USER, USER))
    assert allowed(bucket, USER, "s3:PutBucketPolicy")  # the owner cannot lock itself out
    assert allowed(bucket, USER, "s3:DeleteBucketPolicy")


def test_deny_by_condition_context() -> None:
    bucket = with_policy(
        BucketAccess.new(USER, {}),
        allow("*", "s3:*", f"arn:aws:s3:::{B}/*", effect="Deny")
        | {"Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    )
    assert not allowed(bucket, USER, GET, "k", context={"aws:SecureTransport": "false"})
    assert allowed(bucket, USER, GET, "k", context={"aws:SecureTransport": "true"})


def test_bucket_policy_actions_are_the_owner_accounts_only() -> None:
    bucket = with_policy(
        BucketAccess.new(USER, {}),
        allow({"AWS": OTHER_ID}, ["s3:GetBucketPolicy", "s3:PutBucketPolicy"], f"arn:aws:s3:::{B}"),
    )
    verdict = authorize(bucket, OTHER, "s3:GetBucketPolicy")
    assert (verdict.allowed, verdict.status, verdict.code) == (False, 405, "MethodNotAllowed")
    verdict = authorize(BucketAccess.new(USER, {}), OTHER, "s3:GetBucketPolicy")
    assert (verdict.allowed, verdict.status, verdict.code) == (False, 403, "AccessDenied")


def test_block_public_access_defaults_block_it_all() -> None:
    bucket = acl_bucket(block=DEFAULT_BLOCK)
    public_policy = BucketPolicy.parse(
        json.dumps({"Statement": allow("*", GET, f"arn:aws:s3:::{B}/*")}), B
    )
    refusal = check_policy_change(bucket, public_policy)
    assert refusal is not None and (refusal.status, refusal.code) == (403, "AccessDenied")
    acl_refusal = check_acl_change(bucket, canned_acl("authenticated-read", USER, USER))
    assert acl_refusal is not None and acl_refusal.status == 403
    # settings made before the block was switched on are ignored, not removed
    stale = bucket.with_acl(canned_acl("public-read", USER, USER)).with_policy(public_policy)
    assert not is_public_bucket(stale)
    assert not allowed(stale, None, LIST) and not allowed(stale, None, GET, "k")
    assert not allowed(stale, OTHER, GET, "k", canned_acl("public-read", USER, USER))
    assert allowed(stale, USER, GET, "k")
    assert check_policy_change(bucket.with_block(NO_BLOCK), public_policy) is None


def test_restrict_public_buckets_blocks_even_named_accounts_in_a_public_policy() -> None:
    rpb = BucketAccess.new(USER, {}).with_block(PublicAccessBlock(restrict_public_buckets=True))
    named = allow({"AWS": OTHER_ID}, GET, f"arn:aws:s3:::{B}/*")
    assert allowed(with_policy(rpb, named), OTHER, GET, "k")  # not public: RPB does not apply
    mixed = with_policy(rpb, named, allow("*", LIST, f"arn:aws:s3:::{B}"))
    assert not allowed(mixed, OTHER, GET, "k") and not allowed(mixed, None, LIST)
    assert allowed(mixed, USER, GET, "k")


def test_bucket_owner_enforced_disables_acls() -> None:
    granted = Acl(
        USER, (Grant(USER, "FULL_CONTROL"), Grant(OTHER, "FULL_CONTROL"), Grant(ALL_USERS, "READ"))
    )
    enforced = BucketAccess.new(USER, {}).with_block(NO_BLOCK).with_acl(granted)
    assert not allowed(enforced, OTHER, LIST) and not allowed(enforced, None, LIST)
    assert not allowed(enforced, None, GET, "k", canned_acl("public-read", USER, USER))
    assert allowed(enforced, USER, GET, "k", private_acl(OTHER))  # the bucket owner owns all
    assert not allowed(enforced, OTHER, GET, "k", private_acl(OTHER))
    assert check_acl_change(enforced, private_acl(USER)) is None
    assert check_acl_change(enforced, canned_acl("bucket-owner-full-control", OTHER, USER)) is None
    assert object_acl_for_put(
        enforced, OTHER, {"x-amz-acl": "bucket-owner-full-control"}
    ) == private_acl(USER)
    refusal = check_ownership_change(acl_bucket().with_acl(granted), "BucketOwnerEnforced")
    assert refusal is not None and (refusal.status, refusal.code) == (
        400,
        "InvalidBucketAclWithObjectOwnership",
    )
    assert check_ownership_change(acl_bucket(), "BucketOwnerEnforced") is None
    assert check_ownership_change(acl_bucket().with_acl(granted), "BucketOwnerPreferred") is None


def test_object_ownership_of_written_objects() -> None:
    writer = acl_bucket("ObjectWriter")
    preferred = acl_bucket("BucketOwnerPreferred")
    full = canned_acl("bucket-owner-full-control", OTHER, USER)
    assert object_owner(writer, OTHER, full) == OTHER
    assert object_owner(preferred, OTHER, full) == USER
    assert object_owner(preferred, OTHER, None) == OTHER
    assert object_owner(BucketAccess.new(USER, {}), OTHER, None) == USER
    assert object_owner(writer, None, None) == ANONYMOUS_OWNER
    assert (
        object_acl_for_put(preferred, OTHER, {"x-amz-acl": "bucket-owner-full-control"}).owner
        == USER
    )
    anonymous = object_acl_for_put(
        writer.with_acl(canned_acl("public-read-write", USER, USER)), None, {}
    )
    assert anonymous == private_acl(ANONYMOUS_OWNER)
    assert not allowed(writer, USER, GET, "k", anonymous)  # S3's classic trap, modelled
    deleted = writer.with_ownership(None)
    assert deleted.ownership == "ObjectWriter" and not deleted.ownership_set


def test_ownership_controls_xml() -> None:
    serializer = serialize.create_serializer("rest-xml")
    for mode in OWNERSHIP_MODES:
        params = {"Bucket": B, "OwnershipControls": {"Rules": [{"ObjectOwnership": mode}]}}
        body = serializer.serialize_to_request(
            params, S3_MODEL.operation_model("PutBucketOwnershipControls")
        )["body"]
        assert ownership_from_xml(body) == mode
        parsed = _parse("GetBucketOwnershipControls", ownership_to_xml(mode))
        assert parsed["OwnershipControls"]["Rules"] == [{"ObjectOwnership": mode}]
    for bad in (
        b"<OwnershipControls/>",
        b"junk",
        b"<OwnershipControls><Rule><ObjectOwnership>Mine</ObjectOwnership></Rule></OwnershipControls>",
    ):
        with pytest.raises(AclError) as err:
            ownership_from_xml(bad)
        assert (err.value.status, err.value.code) == (400, "MalformedXML")


def _parse(operation: str, body: bytes) -> dict[str, Any]:
    shape = S3_MODEL.operation_model(operation).output_shape
    parsed: dict[str, Any] = parsers.create_parser("rest-xml").parse(
        {"body": body, "headers": {}, "status_code": 200}, shape
    )
    return parsed


flags = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans())


@given(flags)
def test_public_access_block_xml_and_json_round_trip(values: tuple[bool, bool, bool, bool]) -> None:
    block = PublicAccessBlock(*values)
    names = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")
    params = {"Bucket": B, "PublicAccessBlockConfiguration": dict(zip(names, values, strict=True))}
    serializer = serialize.create_serializer("rest-xml")
    body = serializer.serialize_to_request(
        params, S3_MODEL.operation_model("PutPublicAccessBlock")
    )["body"]
    assert PublicAccessBlock.from_xml(body) == block
    assert _parse("GetPublicAccessBlock", block.to_xml())["PublicAccessBlockConfiguration"] == dict(
        zip(names, values, strict=True)
    )
    assert PublicAccessBlock.from_json(json.loads(json.dumps(block.to_json()))) == block


def test_public_access_block_xml_errors_and_absent_flags() -> None:
    assert PublicAccessBlock.from_xml(b"<PublicAccessBlockConfiguration/>") == PublicAccessBlock()
    for bad in (
        b"<PublicAccessBlockConfiguration><BlockPublicAcls>yes</BlockPublicAcls></PublicAccessBlockConfiguration>",
        b"<Other/>",
        b"<",
    ):
        with pytest.raises(AclError) as err:
            PublicAccessBlock.from_xml(bad)
        assert err.value.code == "MalformedXML"
    assert not NO_BLOCK.configured and PublicAccessBlock.from_json(NO_BLOCK.to_json()) == NO_BLOCK


@pytest.mark.parametrize("ownership", OWNERSHIP_MODES)
def test_bucket_access_json_round_trip(ownership: str) -> None:
    bucket = with_policy(
        BucketAccess.new(USER, {"x-amz-object-ownership": ownership}).with_block(
            PublicAccessBlock(True, False, True, False)
        ),
        allow({"AWS": OTHER_ID}, GET, f"arn:aws:s3:::{B}/*"),
    ).with_acl(Acl(USER, (Grant(OTHER, "READ"),)))
    data = json.loads(json.dumps(bucket.to_json()))
    assert bucket.policy is not None and data["policy"] == bucket.policy.text
    assert BucketAccess.from_json(data) == bucket
    plain = BucketAccess.new(USER, {}).with_ownership(None)
    assert BucketAccess.from_json(json.loads(json.dumps(plain.to_json()))) == plain
