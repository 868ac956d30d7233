"""S3's bucket policies and AWS's defaults through the real gate and moto, on every store
that declares S3's access mechanisms (R2 does not: test_r2_access.py beside this module):
policies for another account and for everyone, explicit Deny, malformed policies; then ACLs
disabled and Block Public Access on until switched."""

from __future__ import annotations

import json

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.s3 import S3Emulator
from harness.store_gates.s3.acl import S3_ACCOUNTS
from tests.integration.harness.store_gates.s3 import access_helpers as access
from tests.integration.helpers import stores_with_s3_access

pytestmark = pytest.mark.parametrize("store_name", stores_with_s3_access(S3Emulator))


# --- bucket policies -----------------------------------------------------------------------


def test_policy_allowing_the_other_account(s3: S3Emulator, make: access.Maker) -> None:
    name = make()
    user, other = s3.client(USER), s3.client(OTHER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    user.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    for call in (
        lambda: other.get_object(Bucket=name, Key="k"),
        lambda: other.list_objects_v2(Bucket=name),
        lambda: other.put_object(Bucket=name, Key="o", Body=b"o"),
        lambda: other.get_object_tagging(Bucket=name, Key="k"),
    ):
        assert access.error_of(call)[0] == 403
    user.put_bucket_policy(
        Bucket=name,
        Policy=access.policy_doc(
            {
                "Effect": "Allow",
                "Principal": access.account_principal(OTHER),
                "Action": ["s3:GetObject", "s3:PutObject", "s3:*ObjectTagging"],
                "Resource": f"arn:aws:s3:::{name}/*",
            },
            {
                "Effect": "Allow",
                "Principal": {"AWS": S3_ACCOUNTS[OTHER].account_id},
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{name}",
            },
        ),
    )
    assert access.read_body(other, name, "k") == b"v"
    assert other.list_objects_v2(Bucket=name)["KeyCount"] == 1
    other.put_object(Bucket=name, Key="o", Body=b"o", ACL="bucket-owner-full-control")
    assert other.get_object_tagging(Bucket=name, Key="k")["TagSet"] == [{"Key": "a", "Value": "b"}]
    other.put_object_tagging(
        Bucket=name, Key="k", Tagging={"TagSet": [{"Key": "by", "Value": "other"}]}
    )
    assert access.error_of(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    assert access.error_of(lambda: other.delete_object(Bucket=name, Key="k"))[0] == 403
    batch = {"Objects": [{"Key": "k"}, {"Key": "o"}], "Quiet": True}
    assert access.error_of(lambda: other.delete_objects(Bucket=name, Delete=batch))[0] == 403  # (1)
    assert access.read_body(user, name, "k") == b"v"
    # (1) S3 answers 200 with an AccessDenied error per key; the gate refuses the batch.
    got = json.loads(user.get_bucket_policy(Bucket=name)["Policy"])
    assert got["Statement"][1]["Action"] == "s3:ListBucket"


def test_policy_allowing_everyone(s3: S3Emulator, make: access.Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    user.put_bucket_policy(
        Bucket=name,
        Policy=access.policy_doc(
            access.everyone_may(["s3:GetObject", "s3:PutObject"], name),
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{name}",
            },
        ),
    )
    anonymous = s3.client(None)
    assert access.read_body(anonymous, name, "k") == b"v"
    anonymous.put_object(Bucket=name, Key="anon", Body=b"a")
    assert sorted(o["Key"] for o in anonymous.list_objects_v2(Bucket=name)["Contents"]) == [
        "anon",
        "k",
    ]
    assert access.read_body(user, name, "anon") == b"a"  # BucketOwnerEnforced: the bucket owner's
    user.delete_bucket_policy(Bucket=name)
    assert access.error_of(lambda: anonymous.get_object(Bucket=name, Key="k"))[0] == 403
    assert access.error_of(lambda: user.get_bucket_policy(Bucket=name)) == (
        404,
        "NoSuchBucketPolicy",
    )


def test_explicit_deny_wins(s3: S3Emulator, make: access.Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    for key in ("open/a", "secret/b"):
        user.put_object(Bucket=name, Key=key, Body=b"v")
    user.put_bucket_policy(
        Bucket=name,
        Policy=access.policy_doc(
            access.everyone_may("s3:GetObject", name),
            {
                "Effect": "Deny",
                "Principal": access.account_principal(OTHER),
                "Action": "s3:Get*",
                "Resource": f"arn:aws:s3:::{name}/secret/*",
            },
        ),
    )
    other = s3.client(OTHER)
    assert access.read_body(other, name, "open/a") == b"v"
    assert access.error_of(lambda: other.get_object(Bucket=name, Key="secret/b")) == (
        403,
        "AccessDenied",
    )
    assert access.read_body(s3.client(None), name, "secret/b") == b"v"
    assert access.read_body(user, name, "secret/b") == b"v"


def test_malformed_policy_is_refused(s3: S3Emulator, make: access.Maker) -> None:
    name = make()
    user = s3.client(USER)
    bad = access.policy_doc(
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::another-bucket/*",
        }
    )
    assert access.error_of(lambda: user.put_bucket_policy(Bucket=name, Policy=bad)) == (
        400,
        "MalformedPolicy",
    )
    assert access.error_of(lambda: user.put_bucket_policy(Bucket=name, Policy="{not json")) == (
        400,
        "MalformedPolicy",
    )
    ok = access.policy_doc(
        {
            "Effect": "Allow",
            "Principal": access.account_principal(OTHER),
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{name}/*",
        }
    )
    assert access.error_of(lambda: s3.client(OTHER).put_bucket_policy(Bucket=name, Policy=ok))[
        0
    ] in (
        403,
        405,
    )


# --- AWS's defaults: ACLs disabled, Block Public Access on ---------------------------------


def test_defaults_refuse_acls_and_public_policies_until_switched(
    s3: S3Emulator, make: access.Maker
) -> None:
    name = make()
    user = s3.client(USER)
    ownership = user.get_bucket_ownership_controls(Bucket=name)["OwnershipControls"]
    assert ownership["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    block = user.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    assert set(block.values()) == {True} and len(block) == 4
    assert access.error_of(lambda: user.put_bucket_acl(Bucket=name, ACL="public-read")) == (
        400,
        "AccessControlListNotSupported",
    )
    assert access.error_of(
        lambda: user.put_object(Bucket=name, Key="k", Body=b"v", ACL="public-read")
    ) == (
        400,
        "AccessControlListNotSupported",
    )
    user.put_object(Bucket=name, Key="k", Body=b"v", ACL="bucket-owner-full-control")
    public = access.policy_doc(access.everyone_may("s3:GetObject", name))
    assert access.error_of(lambda: user.put_bucket_policy(Bucket=name, Policy=public)) == (
        403,
        "AccessDenied",
    )
    user.put_bucket_ownership_controls(
        Bucket=name, OwnershipControls={"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    )
    assert access.error_of(lambda: user.put_bucket_acl(Bucket=name, ACL="public-read")) == (
        403,
        "AccessDenied",
    )  # ACLs enabled now, but BlockPublicAcls
    user.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": False,
            "IgnorePublicAcls": False,
            "BlockPublicPolicy": False,
            "RestrictPublicBuckets": False,
        },
    )
    user.put_bucket_acl(Bucket=name, ACL="public-read")
    user.put_bucket_policy(Bucket=name, Policy=public)
    assert access.read_body(s3.client(None), name, "k") == b"v"
    assert access.error_of(
        lambda: user.put_bucket_ownership_controls(
            Bucket=name,
            OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        )
    ) == (400, "InvalidBucketAclWithObjectOwnership")
    user.delete_public_access_block(Bucket=name)
    assert access.error_of(lambda: user.get_public_access_block(Bucket=name)) == (
        404,
        "NoSuchPublicAccessBlockConfiguration",
    )


def test_ignore_public_acls_and_restrict_public_buckets(s3: S3Emulator, make: access.Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v", ACL="public-read")
    assert access.read_body(s3.client(None), name, "k") == b"v"
    user.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={"IgnorePublicAcls": True, "RestrictPublicBuckets": True},
    )
    assert access.error_of(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
