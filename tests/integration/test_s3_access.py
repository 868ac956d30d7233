"""S3's access model through the real gate and moto, on every store that declares S3's
access mechanisms (R2 does not: tests/integration/test_r2_access.py): bucket and
object ACLs, Object Ownership and Block Public Access with AWS's defaults, bucket policies,
ListBuckets pagination, NoSuchBucket before AccessDenied, CORS calls; each through
boto3 (or raw requests where a browser would send it), as the service answers it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.emulators.fleet import RunningEmulator
from harness.emulators.s3 import S3Emulator
from harness.store_gates.s3.acl import S3_ACCOUNTS
from tests.integration.helpers import stores_with_s3_access

Emulators = dict[str, RunningEmulator]
Maker = Callable[..., str]
ORIGIN = "https://app.example.com"


pytestmark = pytest.mark.parametrize("store_name", stores_with_s3_access(S3Emulator))


@pytest.fixture
def make(s3: S3Emulator) -> Iterator[Maker]:
    """``make(owner=USER, acls=False, block=True, prefix="ac")``: a new bucket, created
    through the API as on AWS (acls: ObjectWriter ownership; block=False: its Block Public
    Access removed); deleted after the test."""
    made: list[str] = []

    def create(
        owner: str = USER, acls: bool = False, block: bool = True, prefix: str = "ac"
    ) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client = s3.client(owner)
        if acls:
            client.create_bucket(Bucket=name, ObjectOwnership="ObjectWriter")
        else:
            client.create_bucket(Bucket=name)
        made.append(name)
        if not block:
            client.delete_public_access_block(Bucket=name)
        return name

    yield create
    for name in made:
        s3.delete_bucket(name)


def _error(call: Callable[[], Any]) -> tuple[int, str]:
    """(HTTP status, S3 error code) of a call that must fail."""
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as info:
        call()
    response = info.value.response
    return int(response["ResponseMetadata"]["HTTPStatusCode"]), response["Error"].get("Code", "")


def _read(client: Any, bucket: str, key: str) -> bytes:
    return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _account_principal(owner: str) -> dict[str, str]:
    return {"AWS": f"arn:aws:iam::{S3_ACCOUNTS[owner].account_id}:root"}


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
    assert _read(anonymous, name, "open") == b"hello"
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="private")) == (
        403,
        "AccessDenied",
    )
    assert _error(lambda: s3.client(OTHER).get_object(Bucket=name, Key="private"))[0] == 403


def test_public_policy_does_not_open_objects_another_account_owns(
    s3: S3Emulator, make: Maker
) -> None:
    name = make(acls=True, block=False)
    s3.client(USER).put_bucket_policy(
        Bucket=name,
        Policy=_policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:GetObject", "s3:PutObject"],
                "Resource": f"arn:aws:s3:::{name}/*",
            }
        ),
    )
    s3.client(USER).put_object(Bucket=name, Key="mine", Body=b"m")
    s3.client(OTHER).put_object(Bucket=name, Key="theirs", Body=b"t")  # ObjectWriter: theirs
    assert _read(s3.client(None), name, "mine") == b"m"
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="theirs"))[0] == 403
    assert _error(lambda: s3.client(USER).get_object(Bucket=name, Key="theirs"))[0] == 403
    assert _read(s3.client(OTHER), name, "theirs") == b"t"


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


# --- ACL grants ----------------------------------------------------------------------------


def test_put_bucket_acl_public_read_after_creation(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    anonymous = s3.client(None)
    assert _error(lambda: anonymous.list_objects_v2(Bucket=name))[0] == 403
    s3.client(USER).put_bucket_acl(Bucket=name, ACL="public-read")
    assert anonymous.list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert s3.client(OTHER).list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert _error(lambda: anonymous.put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403


def test_object_acl_public_read(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    user.put_object_acl(Bucket=name, Key="k", ACL="public-read")
    assert _read(s3.client(None), name, "k") == b"v"
    assert _read(s3.client(OTHER), name, "k") == b"v"
    user.put_object(Bucket=name, Key="k", Body=b"v2")  # a new object: private again
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    user.put_object(Bucket=name, Key="gone", Body=b"g", ACL="public-read")
    assert _read(s3.client(None), name, "gone") == b"g"
    user.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "gone"}], "Quiet": True})
    user.put_object(Bucket=name, Key="gone", Body=b"g")  # its ACL went with it
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="gone"))[0] == 403


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
    assert _error(lambda: other.list_objects_v2(Bucket=name))[0] == 403
    other_id = S3_ACCOUNTS[OTHER].canonical_id
    user.put_bucket_acl(
        Bucket=name,
        GrantFullControl=f'id="{other_id}"',
        GrantRead=f'id="{S3_ACCOUNTS[USER].canonical_id}"',
    )
    assert other.list_objects_v2(Bucket=name)["KeyCount"] == 1
    other.put_object(Bucket=name, Key="by-other", Body=b"o")  # FULL_CONTROL includes WRITE
    assert _error(lambda: other.get_object(Bucket=name, Key="k"))[0] == 403  # the object's own
    user.put_object_acl(
        Bucket=name, Key="k", GrantRead=f'emailAddress="{S3_ACCOUNTS[OTHER].email}"'
    )
    assert _read(other, name, "k") == b"v"
    grants = user.get_object_acl(Bucket=name, Key="k")["Grants"]
    assert {"ID": other_id, "Type": "CanonicalUser"}.items() <= grants[0]["Grantee"].items() or any(
        g["Grantee"].get("ID") == other_id and g["Permission"] == "READ" for g in grants
    )
    assert _error(lambda: other.put_object_acl(Bucket=name, Key="k", ACL="public-read"))[0] == 403


def test_create_bucket_with_acl_headers(s3: S3Emulator) -> None:
    user, other = s3.client(USER), s3.client(OTHER)
    name = f"ac-{uuid.uuid4().hex[:12]}"
    grant = f'id="{S3_ACCOUNTS[OTHER].canonical_id}"'
    assert _error(lambda: user.create_bucket(Bucket=name, GrantRead=grant)) == (
        400,
        "InvalidBucketAclWithObjectOwnership",
    )
    try:
        user.create_bucket(Bucket=name, ObjectOwnership="ObjectWriter", GrantRead=grant)
        assert other.list_objects_v2(Bucket=name)["KeyCount"] == 0
        assert _error(lambda: other.put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403
        assert _error(lambda: s3.client(None).list_objects_v2(Bucket=name))[0] == 403
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
    assert _error(lambda: s3.client(OTHER).put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403


def test_copy_with_a_canned_acl(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="src", Body=b"data")
    user.copy_object(
        Bucket=name, Key="dst", CopySource={"Bucket": name, "Key": "src"}, ACL="public-read"
    )
    assert _read(s3.client(None), name, "dst") == b"data"
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="src"))[0] == 403
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
    assert _read(s3.client(None), name, "mp") == b"x" * 10


# --- bucket policies -----------------------------------------------------------------------


def test_policy_allowing_the_other_account(s3: S3Emulator, make: Maker) -> None:
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
        assert _error(call)[0] == 403
    user.put_bucket_policy(
        Bucket=name,
        Policy=_policy(
            {
                "Effect": "Allow",
                "Principal": _account_principal(OTHER),
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
    assert _read(other, name, "k") == b"v"
    assert other.list_objects_v2(Bucket=name)["KeyCount"] == 1
    other.put_object(Bucket=name, Key="o", Body=b"o", ACL="bucket-owner-full-control")
    assert other.get_object_tagging(Bucket=name, Key="k")["TagSet"] == [{"Key": "a", "Value": "b"}]
    other.put_object_tagging(
        Bucket=name, Key="k", Tagging={"TagSet": [{"Key": "by", "Value": "other"}]}
    )
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    assert _error(lambda: other.delete_object(Bucket=name, Key="k"))[0] == 403
    batch = {"Objects": [{"Key": "k"}, {"Key": "o"}], "Quiet": True}
    assert _error(lambda: other.delete_objects(Bucket=name, Delete=batch))[0] == 403  # (1)
    assert _read(user, name, "k") == b"v"
    # (1) S3 answers 200 with an AccessDenied error per key; the gate refuses the batch.
    got = json.loads(user.get_bucket_policy(Bucket=name)["Policy"])
    assert got["Statement"][1]["Action"] == "s3:ListBucket"


def test_policy_allowing_everyone(s3: S3Emulator, make: Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v")
    user.put_bucket_policy(
        Bucket=name,
        Policy=_policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:GetObject", "s3:PutObject"],
                "Resource": f"arn:aws:s3:::{name}/*",
            },
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{name}",
            },
        ),
    )
    anonymous = s3.client(None)
    assert _read(anonymous, name, "k") == b"v"
    anonymous.put_object(Bucket=name, Key="anon", Body=b"a")
    assert sorted(o["Key"] for o in anonymous.list_objects_v2(Bucket=name)["Contents"]) == [
        "anon",
        "k",
    ]
    assert _read(user, name, "anon") == b"a"  # BucketOwnerEnforced: the bucket owner's
    user.delete_bucket_policy(Bucket=name)
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="k"))[0] == 403
    assert _error(lambda: user.get_bucket_policy(Bucket=name)) == (404, "NoSuchBucketPolicy")


def test_explicit_deny_wins(s3: S3Emulator, make: Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    for key in ("open/a", "secret/b"):
        user.put_object(Bucket=name, Key=key, Body=b"v")
    user.put_bucket_policy(
        Bucket=name,
        Policy=_policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{name}/*",
            },
            {
                "Effect": "Deny",
                "Principal": _account_principal(OTHER),
                "Action": "s3:Get*",
                "Resource": f"arn:aws:s3:::{name}/secret/*",
            },
        ),
    )
    other = s3.client(OTHER)
    assert _read(other, name, "open/a") == b"v"
    assert _error(lambda: other.get_object(Bucket=name, Key="secret/b")) == (403, "AccessDenied")
    assert _read(s3.client(None), name, "secret/b") == b"v"
    assert _read(user, name, "secret/b") == b"v"


def test_malformed_policy_is_refused(s3: S3Emulator, make: Maker) -> None:
    name = make()
    user = s3.client(USER)
    bad = _policy(
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::another-bucket/*",
        }
    )
    assert _error(lambda: user.put_bucket_policy(Bucket=name, Policy=bad)) == (
        400,
        "MalformedPolicy",
    )
    assert _error(lambda: user.put_bucket_policy(Bucket=name, Policy="{not json")) == (
        400,
        "MalformedPolicy",
    )
    ok = _policy(
        {
            "Effect": "Allow",
            "Principal": _account_principal(OTHER),
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{name}/*",
        }
    )
    assert _error(lambda: s3.client(OTHER).put_bucket_policy(Bucket=name, Policy=ok))[0] in (
        403,
        405,
    )


# --- AWS's defaults: ACLs disabled, Block Public Access on ---------------------------------


def test_defaults_refuse_acls_and_public_policies_until_switched(
    s3: S3Emulator, make: Maker
) -> None:
    name = make()
    user = s3.client(USER)
    ownership = user.get_bucket_ownership_controls(Bucket=name)["OwnershipControls"]
    assert ownership["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    block = user.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    assert set(block.values()) == {True} and len(block) == 4
    assert _error(lambda: user.put_bucket_acl(Bucket=name, ACL="public-read")) == (
        400,
        "AccessControlListNotSupported",
    )
    assert _error(lambda: user.put_object(Bucket=name, Key="k", Body=b"v", ACL="public-read")) == (
        400,
        "AccessControlListNotSupported",
    )
    user.put_object(Bucket=name, Key="k", Body=b"v", ACL="bucket-owner-full-control")
    public = _policy(
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{name}/*",
        }
    )
    assert _error(lambda: user.put_bucket_policy(Bucket=name, Policy=public)) == (
        403,
        "AccessDenied",
    )
    user.put_bucket_ownership_controls(
        Bucket=name, OwnershipControls={"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    )
    assert _error(lambda: user.put_bucket_acl(Bucket=name, ACL="public-read")) == (
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
    assert _read(s3.client(None), name, "k") == b"v"
    assert _error(
        lambda: user.put_bucket_ownership_controls(
            Bucket=name,
            OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        )
    ) == (400, "InvalidBucketAclWithObjectOwnership")
    user.delete_public_access_block(Bucket=name)
    assert _error(lambda: user.get_public_access_block(Bucket=name)) == (
        404,
        "NoSuchPublicAccessBlockConfiguration",
    )


def test_ignore_public_acls_and_restrict_public_buckets(s3: S3Emulator, make: Maker) -> None:
    name = make(acls=True, block=False)
    user = s3.client(USER)
    user.put_object(Bucket=name, Key="k", Body=b"v", ACL="public-read")
    assert _read(s3.client(None), name, "k") == b"v"
    user.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={"IgnorePublicAcls": True, "RestrictPublicBuckets": True},
    )
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403


# --- errors in S3's order --------------------------------------------------------------------


def test_anonymous_delete_on_a_deleted_bucket_is_no_such_bucket(s3: S3Emulator) -> None:
    name = f"gone-{uuid.uuid4().hex[:12]}"
    s3.client(USER).create_bucket(Bucket=name)
    s3.delete_bucket(name)
    assert _error(lambda: s3.client(None).delete_object(Bucket=name, Key="k")) == (
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
    assert _read(s3.client(OTHER), name, "k") == b"v"
    assert _error(lambda: s3.client(None).get_object(Bucket=name, Key="k"))[0] == 403
    assert _error(lambda: user.get_object_acl(Bucket=name, Key="missing")) == (404, "NoSuchKey")
    assert _error(lambda: s3.client(OTHER).put_object(Bucket=name, Key="t", Body=b"t"))[0] == 403
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
    assert _error(lambda: theirs.put_bucket_cors(Bucket=name, CORSConfiguration=config))[0] == 403
    user.put_bucket_cors(Bucket=name, CORSConfiguration=config)
    rules = user.get_bucket_cors(Bucket=name)["CORSRules"]
    assert rules[0]["AllowedOrigins"] == [ORIGIN] and rules[0]["MaxAgeSeconds"] == 600
    user.delete_bucket_cors(Bucket=name)
    assert _error(lambda: user.get_bucket_cors(Bucket=name)) == (404, "NoSuchCORSConfiguration")


# --- browser-style uploads --------------------------------------------------------------------


def test_post_policy_upload_lands_as_the_signer(s3: S3Emulator, make: Maker) -> None:
    name = make()
    post = s3.client(USER).generate_presigned_post(name, "posted/${filename}")
    files = {"file": ("hello.txt", b"hello form")}
    resp = requests.post(post["url"], data=post["fields"], files=files, timeout=10)
    assert resp.status_code in (200, 204), resp.text
    assert _read(s3.client(USER), name, "posted/hello.txt") == b"hello form"
    assert [e.op for e in s3.events(name) if e.key == "posted/hello.txt"] == ["put"]


# --- review fixes: the admin flag, object owners, keys that look like parameters -----------


def _write_grant_to_other(s3: S3Emulator, name: str, *more: dict[str, Any]) -> None:
    """A bucket policy letting OTHER write objects (which it then owns) into ``name``."""
    allow_other = {
        "Effect": "Allow",
        "Principal": _account_principal(OTHER),
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    s3.client(USER).put_bucket_policy(Bucket=name, Policy=_policy(allow_other, *more))


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
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="open"))[0] == 403
    s3.set_bucket_access(name, USER, public=True)
    assert _read(anonymous, name, "open") == b"o"
    assert len(anonymous.list_objects_v2(Bucket=name)["Contents"]) == 3
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="denied/x")) == (
        403,
        "AccessDenied",
    )
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="theirs"))[0] == 403
    assert _error(lambda: anonymous.put_object(Bucket=name, Key="w", Body=b"w"))[0] == 403
    user.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True}
    )
    assert _error(lambda: anonymous.get_object(Bucket=name, Key="open"))[0] == 403
    assert _error(lambda: s3.client(OTHER).list_objects_v2(Bucket=name))[0] == 403
    assert _read(user, name, "open") == b"o"


def test_object_level_writes_need_the_objects_owner(s3: S3Emulator, make: Maker) -> None:
    """Tagging an object is its owner's call, not the bucket owner's (ACLs enabled: an
    object another account wrote is that account's)."""
    name = make(acls=True, block=False)
    _write_grant_to_other(s3, name)
    user, other = s3.client(USER), s3.client(OTHER)
    other.put_object(Bucket=name, Key="theirs", Body=b"t")
    tags = {"TagSet": [{"Key": "team", "Value": "a"}]}
    assert _error(lambda: user.put_object_tagging(Bucket=name, Key="theirs", Tagging=tags)) == (
        403,
        "AccessDenied",
    )
    other.put_object_tagging(Bucket=name, Key="theirs", Tagging=tags)
    assert other.get_object_tagging(Bucket=name, Key="theirs")["TagSet"] == tags["TagSet"]
    assert _error(lambda: user.delete_object_tagging(Bucket=name, Key="theirs"))[0] == 403
    other.delete_object_tagging(Bucket=name, Key="theirs")
    user.delete_object(Bucket=name, Key="theirs")  # deleting is the bucket owner's


def test_a_key_that_looks_like_a_credential_is_just_a_key(s3: S3Emulator, make: Maker) -> None:
    name = make(block=False)
    user = s3.client(USER)
    key = "x-amz-credential=1/AWSAccessKeyId=2"
    user.put_object(Bucket=name, Key=key, Body=b"k")
    public = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    user.put_bucket_policy(Bucket=name, Policy=_policy(public))
    assert _read(s3.client(None), name, key) == b"k"
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
        assert _read(anonymous, name, "k") == b"2"
        versions = {"Objects": [{"Key": "k", "VersionId": "nope"}]}
        user.delete_objects(Bucket=name, Delete=versions)
        assert _read(anonymous, name, "k") == b"2"
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
        assert _read(anonymous, name, "held") == b"h"  # still there, still public
        user.put_object(Bucket=name, Key="free", Body=b"again")  # a new object: private
        assert _error(lambda: anonymous.get_object(Bucket=name, Key="free"))[0] == 403
    finally:
        _purge_versions(user, name, (("held", held),) if held else ())
        s3.delete_bucket(name)
