"""R2's own access model through the real gate and moto: R2 has no bucket policies, ACLs,
Block Public Access or Object Ownership, so its gate answers those calls as R2 does (501
NotImplemented "<Operation> not implemented"); a bucket is public by R2's public setting
(the dashboard's switch, the gate's admin API here), which lets everyone read and list it.
Attached to a target, the harness cannot flip that switch and says so before it creates
anything."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.base import PublicAccessUnavailable
from harness.emulators.r2 import R2Emulator
from harness.emulators.s3 import S3Emulator, public_read_policy
from harness.targets import dump_target, load_target
from tests.integration.helpers import s3_error, stores_of_kind

pytestmark = pytest.mark.parametrize("store_name", stores_of_kind(R2Emulator))

ALL_USERS = 'uri="http://acs.amazonaws.com/groups/global/AllUsers"'


@pytest.fixture
def own_bucket(s3: S3Emulator, new_bucket_name: Callable[[str], str]) -> str:
    """A new bucket the user created with their own client (deleted after the test)."""
    name = new_bucket_name("r2own")
    s3.client(USER).create_bucket(Bucket=name)
    return name


def test_r2_answers_policy_acl_and_block_calls_501_not_implemented(
    s3: S3Emulator, own_bucket: str
) -> None:
    name, client = own_bucket, s3.client(USER)
    policy = json.dumps(public_read_policy(name))
    block = {"BlockPublicAcls": False, "RestrictPublicBuckets": False}
    calls: dict[str, Callable[[], Any]] = {
        "PutBucketPolicy": lambda: client.put_bucket_policy(Bucket=name, Policy=policy),
        "GetBucketPolicy": lambda: client.get_bucket_policy(Bucket=name),
        "DeleteBucketPolicy": lambda: client.delete_bucket_policy(Bucket=name),
        "GetBucketPolicyStatus": lambda: client.get_bucket_policy_status(Bucket=name),
        "PutPublicAccessBlock": lambda: client.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=block
        ),
        "GetPublicAccessBlock": lambda: client.get_public_access_block(Bucket=name),
        "DeletePublicAccessBlock": lambda: client.delete_public_access_block(Bucket=name),
        "PutBucketAcl": lambda: client.put_bucket_acl(Bucket=name, GrantRead=ALL_USERS),
        "GetBucketAcl": lambda: client.get_bucket_acl(Bucket=name),
        "GetBucketOwnershipControls": lambda: client.get_bucket_ownership_controls(Bucket=name),
    }
    for op, call in calls.items():
        assert s3_error(call) == (501, "NotImplemented", f"{op} not implemented"), op
    assert not s3.is_public(name)  # none of them opened it
    assert s3_error(lambda: s3.client(None).list_objects_v2(Bucket=name))[:2] == (
        403,
        "AccessDenied",
    )


def test_r2_refuses_an_acl_on_a_write_and_takes_private(s3: S3Emulator, own_bucket: str) -> None:
    name, client = own_bucket, s3.client(USER)
    assert s3_error(
        lambda: client.put_object(Bucket=name, Key="pub", Body=b"x", ACL="public-read")
    ) == (501, "NotImplemented", "Header 'x-amz-acl' with value 'public-read' not implemented")
    client.put_object(Bucket=name, Key="mine", Body=b"y", ACL="private")
    assert s3.list_keys(name) == ["mine"]  # the refused write never reached the store


def test_r2_public_buckets_are_public_by_the_public_setting(
    s3: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    public, private = new_bucket_name("r2pu"), new_bucket_name("r2pr")
    s3.make_bucket(public, USER, public=True, objects={"a/b.txt": b"ab"})
    s3.make_bucket(private, USER, public=False, objects={"a/b.txt": b"ab"})
    assert s3.is_public(public) and not s3.is_public(private)
    anonymous = s3.client(None)
    assert [o["Key"] for o in anonymous.list_objects_v2(Bucket=public)["Contents"]] == ["a/b.txt"]
    assert anonymous.get_object(Bucket=public, Key="a/b.txt")["Body"].read() == b"ab"
    assert s3.read_object(public, "a/b.txt", OTHER) == b"ab"  # another account reads it too
    assert s3_error(lambda: anonymous.list_objects_v2(Bucket=private))[0] == 403
    for writer in (anonymous, s3.client(OTHER)):  # public means read and list, not write
        assert s3_error(lambda w=writer: w.put_object(Bucket=public, Key="x", Body=b"x"))[0] == 403
    assert s3.list_keys(public) == ["a/b.txt"]


def test_r2_seeded_public_dataset_reads_anonymously(s3: S3Emulator) -> None:
    assert s3.is_public(s3.public_dataset, OTHER)
    keys = s3.list_keys(s3.public_dataset, None)
    assert keys and s3.read_object(s3.public_dataset, keys[0], None)


def test_against_a_target_r2_public_buckets_name_the_dashboard(
    s3: S3Emulator, tmp_path: Path, new_bucket_name: Callable[[str], str]
) -> None:
    path = tmp_path / "target.yaml"
    path.write_text(dump_target(s3.store, s3.config_section(USER), s3.config_section(OTHER), None))
    path.chmod(0o600)
    attached = type(s3).attach(load_target(path))
    name = new_bucket_name("r2tg")
    with pytest.raises(PublicAccessUnavailable) as info:
        attached.make_bucket(name, public=True, objects={"k": b"v"})
    message = str(info.value)
    assert "Public access" in message and "r2.dev" in message and "skipped" in message
    assert not s3.bucket_exists(name)  # refused before anything was created
    with pytest.raises(PublicAccessUnavailable):
        attached.is_public(s3.public_dataset, OTHER)
    attached.make_bucket(name, public=False, objects={"k": b"v"})  # private ones still work
    assert attached.list_keys(name) == ["k"]
