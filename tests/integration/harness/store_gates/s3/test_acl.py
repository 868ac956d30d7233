"""S3's ACLs through the real gate and moto, on every store that declares S3's access
mechanisms (R2 does not: test_r2_access.py beside this module): canned ACLs, grant headers
and the AccessControlPolicy document on buckets and objects, on copies and multipart
uploads."""

from __future__ import annotations

import uuid

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.s3 import S3Emulator
from harness.store_gates.s3.acl import S3_ACCOUNTS
from tests.integration.harness.store_gates.s3.access_helpers import (
    Maker,
    error_of,
    read_body,
)
from tests.integration.helpers import stores_with_s3_access

pytestmark = pytest.mark.parametrize("store_name", stores_with_s3_access(S3Emulator))


# --- ACL grants ----------------------------------------------------------------------------


def test_put_bucket_acl_public_read_after_creation(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    anonymous = s3.client(None)
    assert error_of(lambda: anonymous.list_objects_v2(Bucket=name))[0] == 403
    s3.client(USER).put_bucket_acl(Bucket=name, ACL="public-read")
    assert anonymous.list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert s3.client(OTHER).list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert error_of(lambda: anonymous.put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403


def test_object_acl_public_read(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    user.put_object_acl(Bucket=name, Key="k", ACL="public-read")
    assert read_body(s3.client(None), name, "k") == b"v"
    assert read_body(s3.client(OTHER), name, "k") == b"v"
    user.put_object(Bucket=name, Key="k", Body=b"v2")  # a new object: private again
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    user.put_object(Bucket=name, Key="gone", Body=b"g", ACL="public-read")
    assert read_body(s3.client(None), name, "gone") == b"g"
    user.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "gone"}], "Quiet": True})
    user.put_object(Bucket=name, Key="gone", Body=b"g")  # its ACL went with it
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="gone"))[0] == 403


def test_public_read_write_bucket_takes_anonymous_writes(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    s3.client(USER).put_bucket_acl(Bucket=name, ACL="public-read-write")
    s3.client(None).put_object(Bucket=name, Key="from-anyone", Body=b"a")
    s3.client(OTHER).put_object(Bucket=name, Key="from-other", Body=b"o")
    keys = [o["Key"] for o in s3.client(None).list_objects_v2(Bucket=name)["Contents"]]
    assert keys == ["from-anyone", "from-other"]
    s3.client(None).delete_object(Bucket=name, Key="from-anyone")
    assert [o["Key"] for o in s3.client(USER).list_objects_v2(Bucket=name)["Contents"]] == [
        "from-other"
    ]


def test_grants_to_the_other_account(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True)
    user, other = s3.client(USER), s3.client(OTHER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    assert error_of(lambda: other.list_objects_v2(Bucket=name))[0] == 403
    other_id = S3_ACCOUNTS[OTHER].canonical_id
    user.put_bucket_acl(
        Bucket=name,
        GrantFullControl=f'id="{other_id}"',
        GrantRead=f'id="{S3_ACCOUNTS[USER].canonical_id}"',
    )
    assert other.list_objects_v2(Bucket=name)["KeyCount"] == 1
    other.put_object(Bucket=name, Key="by-other", Body=b"o")  # FULL_CONTROL includes WRITE
    assert error_of(lambda: other.get_object(Bucket=name, Key="k"))[0] == 403  # the object's own
    user.put_object_acl(
        Bucket=name, Key="k", GrantRead=f'emailAddress="{S3_ACCOUNTS[OTHER].email}"'
    )
    assert read_body(other, name, "k") == b"v"
    grants = user.get_object_acl(Bucket=name, Key="k")["Grants"]
    assert {"ID": other_id, "Type": "CanonicalUser"}.items() <= grants[0]["Grantee"].items() or any(
        g["Grantee"].get("ID") == other_id and g["Permission"] == "READ" for g in grants
    )
    assert error_of(lambda: other.put_object_acl(Bucket=name, Key="k", ACL="public-read"))[0] == 403


def test_create_bucket_with_acl_headers(s3: S3Emulator) -> None:
    user, other = s3.client(USER), s3.client(OTHER)
    name = f"ac-{uuid.uuid4().hex[:12]}"
    grant = f'id="{S3_ACCOUNTS[OTHER].canonical_id}"'
    assert error_of(lambda: user.create_bucket(Bucket=name, GrantRead=grant)) == (
        400,
        "InvalidBucketAclWithObjectOwnership",
    )
    try:
        user.create_bucket(Bucket=name, ObjectOwnership="ObjectWriter", GrantRead=grant)
        assert other.list_objects_v2(Bucket=name)["KeyCount"] == 0
        assert error_of(lambda: other.put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403
        assert error_of(lambda: s3.client(None).list_objects_v2(Bucket=name))[0] == 403
    finally:
        s3.delete_bucket(name)


def test_grant_read_by_access_control_policy_round_trip(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True)
    user = s3.client(USER)
    acl = user.get_bucket_acl(Bucket=name)
    assert acl["Owner"]["ID"] == S3_ACCOUNTS[USER].canonical_id
    assert [(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]] == [
        (S3_ACCOUNTS[USER].canonical_id, "FULL_CONTROL")
    ]
    other_id = S3_ACCOUNTS[OTHER].canonical_id
    policy = {
        "Owner": acl["Owner"],
        "Grants": [
            *acl["Grants"],
            {"Grantee": {"Type": "CanonicalUser", "ID": other_id}, "Permission": "READ"},
        ],
    }
    user.put_bucket_acl(Bucket=name, AccessControlPolicy=policy)
    back = user.get_bucket_acl(Bucket=name)["Grants"]
    assert (other_id, "READ") in [(g["Grantee"].get("ID"), g["Permission"]) for g in back]
    assert s3.client(OTHER).list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert error_of(lambda: s3.client(OTHER).put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403


def test_copy_with_a_canned_acl(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="src", Body=b"data")
    user.copy_object(
        Bucket=name, Key="dst", CopySource={"Bucket": name, "Key": "src"}, ACL="public-read"
    )
    assert read_body(s3.client(None), name, "dst") == b"data"
    assert error_of(lambda: s3.client(None).get_object(Bucket=name, Key="src"))[0] == 403
    assert [e.op for e in s3.events(name) if e.key == "dst"] == ["copy"]


def test_multipart_upload_with_an_acl_applies_it_on_completion(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    upload = user.create_multipart_upload(Bucket=name, Key="mp", ACL="public-read")
    part = user.upload_part(
        Bucket=name, Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 10
    )
    user.complete_multipart_upload(
        Bucket=name,
        Key="mp",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
    )
    assert read_body(s3.client(None), name, "mp") == b"x" * 10
