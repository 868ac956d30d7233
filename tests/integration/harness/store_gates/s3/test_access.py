"""S3's access model through the real gate and moto, on every store that declares S3's
access mechanisms (R2 does not: test_r2_access.py beside this module): anonymous reads
decided per object, ListBuckets filtered then paginated, NoSuchBucket before AccessDenied,
CORS calls, POST uploads, object owners and versions; each through boto3 (or raw requests
where a browser would send it), as the service answers it. ACLs: test_acl.py; policies and
AWS's defaults: test_policy.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.emulators.s3 import S3Emulator
from harness.store_gates.s3.acl import S3_ACCOUNTS
from tests.integration.harness.store_gates.s3.access_helpers import (
    Maker,
    account_principal,
    error_of,
    everyone_may,
    policy_doc,
    read_body,
)
from tests.integration.helpers import stores_with_s3_access

pytestmark = pytest.mark.parametrize("store_name", stores_with_s3_access(S3Emulator))


ORIGIN = "https://app.example.com"


# --- security: anonymous reads are decided per object ------------------------------------


def test_anonymous_get_of_a_private_object_in_a_public_bucket_is_denied(
    s3: S3Emulator, make: Maker
) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_bucket_acl(Bucket=name, ACL="public-read")
    user.put_object(Bucket=name, Key="private", Body=b"secret")
    user.put_object(Bucket=name, Key="open", Body=b"hello", ACL="public-read")
    anonymous = s3.client(None)
    listed = anonymous.list_objects_v2(Bucket=name)["Contents"]
    assert sorted(o["Key"] for o in listed) == ["open", "private"]
    assert read_body(anonymous, name, "open") == b"hello"
    assert error_of(lambda: anonymous.get_object(Bucket=name, Key="private")) == (
        403,
        "AccessDenied",
    )
    assert error_of(lambda: s3.client(OTHER).get_object(Bucket=name, Key="private"))[0] == 403


def test_public_policy_does_not_open_objects_another_account_owns(
    s3: S3Emulator, make: Maker
) -> None:
    name = make(acls=True, block=False)
    s3.client(USER).put_bucket_policy(
        Bucket=name,
        Policy=policy_doc(everyone_may(["s3:GetObject", "s3:PutObject"], name)),
    )
    s3.client(USER).put_object(Bucket=name, Key="mine", Body=b"m")
    s3.client(OTHER).put_object(Bucket=name, Key="theirs", Body=b"t")  # ObjectWriter: theirs
    assert read_body(s3.client(None), name, "mine") == b"m"
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="theirs"))[0] == 403
    assert error_of(lambda: s3.client(USER).get_object(Bucket=name, Key="theirs"))[0] == 403
    assert read_body(s3.client(OTHER), name, "theirs") == b"t"


# --- ListBuckets is filtered, then paginated ---------------------------------------------


def test_list_buckets_max_buckets_pages_the_callers_buckets(s3: S3Emulator, make: Maker) -> None:
    prefix = f"lb{uuid.uuid4().hex[:6]}"
    mine = sorted(make(prefix=prefix) for _ in range(3))
    make(owner=OTHER, prefix=prefix)
    user = s3.client(USER)
    first = user.list_buckets(MaxBuckets=1)
    assert len(first["Buckets"]) == 1 and first.get("ContinuationToken")
    seen: list[str] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"MaxBuckets": 1, "Prefix": prefix}
        if token:
            params["ContinuationToken"] = token
        page = user.list_buckets(**params)
        assert len(page["Buckets"]) <= 1
        seen += [b["Name"] for b in page["Buckets"]]
        token = page.get("ContinuationToken")
        if not token:
            break
    assert seen == mine
    owner = user.list_buckets(Prefix=prefix)["Owner"]
    assert owner["ID"] == S3_ACCOUNTS[USER].canonical_id


# --- errors in S3's order --------------------------------------------------------------------


def test_anonymous_delete_on_a_deleted_bucket_is_no_such_bucket(s3: S3Emulator) -> None:
    name = f"gone-{uuid.uuid4().hex[:12]}"
    s3.client(USER).create_bucket(Bucket=name)
    s3.delete_bucket(name)
    assert error_of(lambda: s3.client(None).delete_object(Bucket=name, Key="k")) == (
        404,
        "NoSuchBucket",
    )
    resp = requests.get(f"{s3.endpoint}/{name}/k", timeout=10)
    assert resp.status_code == 404 and b"<Code>NoSuchBucket</Code>" in resp.content


def test_get_object_acl_round_trip_and_missing_key(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v", ACL="authenticated-read")
    acl = user.get_object_acl(Bucket=name, Key="k")
    assert acl["Owner"]["ID"] == S3_ACCOUNTS[USER].canonical_id
    grants = {
        (g["Grantee"].get("URI") or g["Grantee"].get("ID"), g["Permission"]) for g in acl["Grants"]
    }
    assert grants == {
        (S3_ACCOUNTS[USER].canonical_id, "FULL_CONTROL"),
        ("http://acs.amazonaws.com/groups/global/AuthenticatedUsers", "READ"),
    }
    assert read_body(s3.client(OTHER), name, "k") == b"v"
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    assert error_of(lambda: user.get_object_acl(Bucket=name, Key="missing")) == (404, "NoSuchKey")
    assert error_of(lambda: s3.client(OTHER).put_object(Bucket=name, Key="t", Body=b"t"))[0] == 403
    user.put_bucket_acl(Bucket=name, GrantWrite=f'id="{S3_ACCOUNTS[OTHER].canonical_id}"')
    s3.client(OTHER).put_object(Bucket=name, Key="theirs", Body=b"t")  # ObjectWriter: theirs
    theirs = s3.client(OTHER).get_object_acl(Bucket=name, Key="theirs")
    assert theirs["Owner"]["ID"] == S3_ACCOUNTS[OTHER].canonical_id


# --- CORS ----------------------------------------------------------------------------------


def test_cors_calls_go_to_moto_under_the_usual_rules(s3: S3Emulator, make: Maker) -> None:
    """The gate does not model CORS: ``?cors`` calls are the bucket sub-resource they are,
    decided like any other and answered by moto; a preflight (OPTIONS) is an ordinary
    request too, so a browser's anonymous one is refused."""
    name = make()
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    url = f"{s3.endpoint}/{name}/k"
    asks = {"Origin": ORIGIN, "Access-Control-Request-Method": "PUT"}
    refused = requests.options(url, headers=asks, timeout=10)
    assert refused.status_code == 403 and b"AccessDenied" in refused.content
    config = {
        "CORSRules": [
            {
                "AllowedOrigins": [ORIGIN],
                "AllowedMethods": ["GET", "PUT"],
                "AllowedHeaders": ["content-type", "x-amz-*"],
                "ExposeHeaders": ["ETag"],
                "MaxAgeSeconds": 600,
            }
        ]
    }
    theirs = s3.client(OTHER)
    assert error_of(lambda: theirs.put_bucket_cors(Bucket=name, CORSConfiguration=config))[0] == 403
    user.put_bucket_cors(Bucket=name, CORSConfiguration=config)
    rules = user.get_bucket_cors(Bucket=name)["CORSRules"]
    assert rules[0]["AllowedOrigins"] == [ORIGIN] and rules[0]["MaxAgeSeconds"] == 600
    user.delete_bucket_cors(Bucket=name)
    assert error_of(lambda: user.get_bucket_cors(Bucket=name)) == (404, "NoSuchCORSConfiguration")


# --- browser-style uploads --------------------------------------------------------------------


def test_post_policy_upload_lands_as_the_signer(s3: S3Emulator, make: Maker) -> None:
    name = make()
    post = s3.client(USER).generate_presigned_post(name, "posted/${filename}")
    files = {"file": ("hello.txt", b"hello form")}
    resp = requests.post(post["url"], data=post["fields"], files=files, timeout=10)
    assert resp.status_code in (200, 204), resp.text
    assert read_body(s3.client(USER), name, "posted/hello.txt") == b"hello form"
    assert [e.op for e in s3.events(name) if e.key == "posted/hello.txt"] == ["put"]


# --- review fixes: the admin flag, object owners, keys that look like parameters -----------


def _write_grant_to_other(s3: S3Emulator, name: str, *more: dict[str, Any]) -> None:
    """A bucket policy letting OTHER write objects (which it then owns) into ``name``."""
    allow_other = {
        "Effect": "Allow",
        "Principal": account_principal(OTHER),
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    s3.client(USER).put_bucket_policy(Bucket=name, Policy=policy_doc(allow_other, *more))


def test_admin_public_flag_is_a_public_read_statement(s3: S3Emulator, make: Maker) -> None:
    """The admin API's public flag lets everyone read and list, as a public policy would:
    not past an explicit Deny, not objects another account owns, not under
    RestrictPublicBuckets."""
    name = make(acls=True, block=False)
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{name}/denied/*",
    }
    _write_grant_to_other(s3, name, deny)
    user, anonymous = s3.client(USER), s3.client(None)
    user.put_object(Bucket=name, Key="open", Body=b"o")
    user.put_object(Bucket=name, Key="denied/x", Body=b"d")
    s3.client(OTHER).put_object(Bucket=name, Key="theirs", Body=b"t")
    assert error_of(lambda: anonymous.get_object(Bucket=name, Key="open"))[0] == 403
    s3.set_bucket_access(name, USER, public=True)
    assert read_body(anonymous, name, "open") == b"o"
    assert len(anonymous.list_objects_v2(Bucket=name)["Contents"]) == 3
    assert error_of(lambda: anonymous.get_object(Bucket=name, Key="denied/x")) == (
        403,
        "AccessDenied",
    )
    assert error_of(lambda: anonymous.get_object(Bucket=name, Key="theirs"))[0] == 403
    assert error_of(lambda: anonymous.put_object(Bucket=name, Key="w", Body=b"w"))[0] == 403
    user.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True}
    )
    assert error_of(lambda: anonymous.get_object(Bucket=name, Key="open"))[0] == 403
    assert error_of(lambda: s3.client(OTHER).list_objects_v2(Bucket=name))[0] == 403
    assert read_body(user, name, "open") == b"o"


def test_object_level_writes_need_the_objects_owner(s3: S3Emulator, make: Maker) -> None:
    """Tagging an object is its owner's call, not the bucket owner's (ACLs enabled: an
    object another account wrote is that account's)."""
    name = make(acls=True, block=False)
    _write_grant_to_other(s3, name)
    user, other = s3.client(USER), s3.client(OTHER)
    other.put_object(Bucket=name, Key="theirs", Body=b"t")
    tags = {"TagSet": [{"Key": "team", "Value": "a"}]}
    assert error_of(lambda: user.put_object_tagging(Bucket=name, Key="theirs", Tagging=tags)) == (
        403,
        "AccessDenied",
    )
    other.put_object_tagging(Bucket=name, Key="theirs", Tagging=tags)
    assert other.get_object_tagging(Bucket=name, Key="theirs")["TagSet"] == tags["TagSet"]
    assert error_of(lambda: user.delete_object_tagging(Bucket=name, Key="theirs"))[0] == 403
    other.delete_object_tagging(Bucket=name, Key="theirs")
    user.delete_object(Bucket=name, Key="theirs")  # deleting is the bucket owner's


def test_a_key_that_looks_like_a_credential_is_just_a_key(s3: S3Emulator, make: Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    key = "x-amz-credential=1/AWSAccessKeyId=2"
    user.put_object(Bucket=name, Key=key, Body=b"k")
    public = everyone_may("s3:GetObject", name)
    user.put_bucket_policy(Bucket=name, Policy=policy_doc(public))
    assert read_body(s3.client(None), name, key) == b"k"
    resp = requests.get(f"{s3.endpoint}/{name}/{key}", timeout=10)
    assert resp.status_code == 200 and resp.content == b"k"


def _purge_versions(client: Any, name: str, held: tuple[tuple[str, str], ...] = ()) -> None:
    """Lift the legal holds on ``held`` (key, version id) and delete every version and
    delete marker, so that the bucket can go."""
    for key, vid in held:
        client.put_object_legal_hold(
            Bucket=name, Key=key, VersionId=vid, LegalHold={"Status": "OFF"}
        )
    listed = client.list_object_versions(Bucket=name)
    for version in listed.get("Versions", []) + listed.get("DeleteMarkers", []):
        client.delete_object(Bucket=name, Key=version["Key"], VersionId=version["VersionId"])


def test_deleting_a_version_keeps_the_current_objects_acl(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user, anonymous = s3.client(USER), s3.client(None)
    user.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    try:
        first = user.put_object(Bucket=name, Key="k", Body=b"1", ACL="public-read")["VersionId"]
        user.put_object(Bucket=name, Key="k", Body=b"2", ACL="public-read")
        user.delete_object(Bucket=name, Key="k", VersionId=first)
        assert read_body(anonymous, name, "k") == b"2"
        versions = {"Objects": [{"Key": "k", "VersionId": "nope"}]}
        user.delete_objects(Bucket=name, Delete=versions)
        assert read_body(anonymous, name, "k") == b"2"
    finally:
        _purge_versions(user, name)


def test_delete_objects_keeps_the_acl_of_keys_it_could_not_delete(
    s3: S3Emulator, make: Maker
) -> None:
    name = f"lk-{uuid.uuid4().hex[:12]}"
    user, anonymous = s3.client(USER), s3.client(None)
    user.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True, ObjectOwnership="ObjectWriter")
    held = ""
    try:
        user.delete_public_access_block(Bucket=name)
        held = user.put_object(
            Bucket=name, Key="held", Body=b"h", ACL="public-read", ObjectLockLegalHoldStatus="ON"
        )["VersionId"]
        user.put_object(Bucket=name, Key="free", Body=b"f", ACL="public-read")
        result = user.delete_objects(
            Bucket=name,
            Delete={"Objects": [{"Key": "held", "VersionId": held}, {"Key": "free"}]},
        )
        assert [e["Key"] for e in result.get("Errors", [])] == ["held"]
        assert read_body(anonymous, name, "held") == b"h"  # still there, still public
        user.put_object(Bucket=name, Key="free", Body=b"again")  # a new object: private
        assert error_of(lambda: anonymous.get_object(Bucket=name, Key="free"))[0] == 403
    finally:
        _purge_versions(user, name, (("held", held),) if held else ())
        s3.delete_bucket(name)
