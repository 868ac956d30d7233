"""A store with canned bucket ACLs only (as Backblaze B2: 'private' and 'public-read', no
bucket policies, no Block Public Access) through the real gate and moto: its gate answers a
policy or Block Public Access call with the store's error, takes the two canned ACLs by
header and refuses the others, and an object has its bucket's ACL; the harness makes its
buckets public with public-read. No built-in store is one: run with a package that declares
one on PYTHONPATH (tests/fixtures/b2_pkg installed with ``pip install --target DIR``)::

    PYTHONPATH=DIR pytest tests/integration/harness/store_gates/s3/test_canned_acl.py --store b2like
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from harness import emulator_registry as registry
from harness.accounts import OTHER, USER
from harness.emulators.s3 import S3Emulator, public_read_policy
from tests.integration.helpers import s3_error, stores_of_kind

pytestmark = pytest.mark.parametrize(
    "store_name",
    [
        param
        for param in stores_of_kind(S3Emulator)
        if registry.get_emulator_class(param.values[0]).access_features.has("canned_acls")
    ],
)


@pytest.fixture
def name(s3: S3Emulator) -> Iterator[str]:
    """A new private bucket of the user's (deleted after the test)."""
    bucket = f"ca-{uuid.uuid4().hex[:10]}"
    s3.make_bucket(bucket, USER, public=False, objects={"k": b"v"})
    yield bucket
    s3.delete_bucket(bucket)


def test_policies_and_block_public_access_get_the_storess3_error(s3: S3Emulator, name: str) -> None:
    client = s3.client(USER)
    lacking = s3.access_features.lacking("x")
    refused = (lacking.status, lacking.code)
    policy = json.dumps(public_read_policy(name))
    for call in (
        lambda: client.put_bucket_policy(Bucket=name, Policy=policy),
        lambda: client.get_bucket_policy(Bucket=name),
        lambda: client.delete_public_access_block(Bucket=name),
        lambda: client.get_public_access_block(Bucket=name),
    ):
        assert s3_error(call)[:2] == refused
    assert not s3.is_public(name)


def test_canned_acls_by_header_make_the_bucket_and_its_objects_public(
    s3: S3Emulator, name: str
) -> None:
    client, anonymous = s3.client(USER), s3.client(None)
    assert s3_error(lambda: client.put_bucket_acl(Bucket=name, ACL="authenticated-read")) == (
        400,
        "InvalidArgument",
        "Unsupported value for canned acl 'authenticated-read'",
    )
    assert s3_error(lambda: anonymous.get_object(Bucket=name, Key="k"))[0] == 403
    client.put_bucket_acl(Bucket=name, ACL="public-read")
    assert s3.is_public(name)
    assert anonymous.get_object(Bucket=name, Key="k")["Body"].read() == b"v"  # the bucket's ACL
    assert s3_error(lambda: s3.client(OTHER).put_object(Bucket=name, Key="x", Body=b"x"))[0] == 403
    client.put_bucket_acl(Bucket=name, ACL="private")
    assert not s3.is_public(name)
    assert s3_error(lambda: anonymous.get_object(Bucket=name, Key="k"))[0] == 403


def test_make_bucket_public_uses_the_canned_acl(s3: S3Emulator) -> None:
    bucket = f"cp-{uuid.uuid4().hex[:10]}"
    try:
        s3.make_bucket(bucket, OTHER, public=True, objects={"a": b"a"})
        assert s3.is_public(bucket, OTHER)
        grants = s3.client(OTHER).get_bucket_acl(Bucket=bucket)["Grants"]
        assert any(g["Grantee"].get("URI", "").endswith("AllUsers") for g in grants)
        assert s3.read_object(bucket, "a", None) == b"a"
        assert s3.read_object(bucket, "a", USER) == b"a"
    finally:
        s3.delete_bucket(bucket)
