"""The access gate through the real SDKs: the allow/deny matrix, bucket creation rules,
copies, presigned URLs, the admin API."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from harness import emulator_registry as registry
from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.fleet import RunningEmulator
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from harness.store_gates.s3.acl import S3_ACCOUNTS
from tests.integration.harness.gate.helpers import (
    SEED,
    SEED_KEY,
    Emulators,
    MatrixBucket,
    status_of,
)
from tests.integration.helpers import stores_of_kind

QUICK = 5.0  # a denial must come back this fast: no retry storm, no hang
CALLERS = {USER: USER, "anonymous": None, "unknown": UNKNOWN}
"""caller in test ids -> the owner argument of the emulator helpers"""


def _mark(store: str) -> pytest.MarkDecorator:
    return getattr(pytest.mark, registry.get_emulator_class(store).marker())


def expected_allowed(store: str, owner: str, public: bool, caller: str, op: str) -> bool:
    """The local cloud's rules. Some emulators serve public buckets without checking a
    (wrong) key, where the gates reject unknown credentials outright."""
    if caller == "unknown":
        cls = registry.get_emulator_class(store)
        return cls.public_read_ignores_bad_credentials and public and op == "read"
    if caller == USER and owner == USER:
        return True
    return op == "read" and public


def matrix() -> list[Any]:
    """Every (store, owner, visibility, caller, operation) with the expected outcome."""
    return list(_matrix())


def _matrix() -> Iterator[Any]:
    for store in registry.store_names():
        for owner in (USER, OTHER):
            for public in (False, True):
                for caller in CALLERS:
                    for op in ("read", "write"):
                        allowed = expected_allowed(store, owner, public, caller, op)
                        ident = (
                            f"{store}-owner_{owner}-{'public' if public else 'private'}"
                            f"-by_{caller}-{op}-{'allow' if allowed else 'deny'}"
                        )
                        yield pytest.param(
                            store, owner, public, caller, op, allowed, id=ident, marks=_mark(store)
                        )


def _read(emulator: RunningEmulator, caller: str | None, bucket: str) -> None:
    body = emulator.read_object(bucket, SEED_KEY, caller)
    keys = emulator.list_keys(bucket, caller)
    assert body == SEED
    assert SEED_KEY in keys


def _write(emulator: RunningEmulator, caller: str | None, bucket: str) -> None:
    emulator.write_object(bucket, f"written/{uuid.uuid4().hex}.txt", b"new object", caller)


@pytest.mark.parametrize(("store_name", "owner", "public", "caller", "op", "allowed"), matrix())
def test_access_matrix(
    emulators: Emulators,
    matrix_bucket: MatrixBucket,
    store_name: str,
    owner: str,
    public: bool,
    caller: str,
    op: str,
    allowed: bool,
) -> None:
    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, owner, public)
    action = _read if op == "read" else _write
    if allowed:
        action(emulator, CALLERS[caller], bucket)
        return
    started = time.monotonic()
    with pytest.raises(emulator.sdk_errors()) as info:
        action(emulator, CALLERS[caller], bucket)
    assert time.monotonic() - started < QUICK
    expected = (
        type(emulator).invalid_credentials_status
        if caller == "unknown"
        else type(emulator).denial_status
    )
    status = status_of(info.value)
    if status is None and type(info.value).__name__ == "RefreshError":
        # google-auth met a 401 and could not refresh its bare token: the SDK's way to say 401
        status = 401
    assert status == expected, info.value


# --- bucket creation -------------------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_create_bucket_rules(s3: S3Emulator) -> None:
    from botocore.exceptions import ClientError

    name = f"gc-{uuid.uuid4().hex[:10]}"
    s3.client(USER).create_bucket(Bucket=name)
    assert s3.bucket_owner(name) == USER
    with pytest.raises(ClientError) as taken:
        s3.client(OTHER).create_bucket(Bucket=name)
    assert taken.value.response["Error"]["Code"] == "BucketAlreadyExists"
    if s3.region == "us-east-1":  # re-creating one's own bucket: 200 there, 409 elsewhere
        s3.client(USER).create_bucket(Bucket=name)
    else:
        with pytest.raises(ClientError) as owned:
            s3.client(USER).create_bucket(Bucket=name)
        assert owned.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
    assert taken.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    with pytest.raises(ClientError) as anon:
        s3.client(None).create_bucket(Bucket=f"gc-{uuid.uuid4().hex[:10]}")
    assert anon.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # ListBuckets: the caller's own buckets only; anonymous callers are refused.
    mine = {b["Name"] for b in s3.client(USER).list_buckets()["Buckets"]}
    theirs = {b["Name"] for b in s3.client(OTHER).list_buckets()["Buckets"]}
    assert name in mine and name not in theirs
    with pytest.raises(ClientError):
        s3.client(None).list_buckets()
    s3.delete_bucket(name)
    assert s3.bucket_owner(name) is None  # a deleted bucket's name is free again
    if not s3.access_features.has("acls"):
        return  # the rest is S3's ACL model (R2's own: ../store_gates/s3/test_r2_access.py)
    # A canned public ACL at creation: refused by AWS's defaults (ACLs disabled); with ACLs
    # enabled and Block Public Access off it makes the bucket listable, not its objects.
    public = f"gc-{uuid.uuid4().hex[:10]}"
    with pytest.raises(ClientError) as refused:
        s3.client(OTHER).create_bucket(Bucket=public, ACL="public-read")
    assert refused.value.response["Error"]["Code"] == "InvalidBucketAclWithObjectOwnership"
    other = s3.client(OTHER)
    other.create_bucket(Bucket=public, ObjectOwnership="ObjectWriter")
    other.delete_public_access_block(Bucket=public)
    other.put_bucket_acl(Bucket=public, ACL="public-read")
    other.put_object(Bucket=public, Key="k", Body=b"v")
    listed = s3.client(None).list_objects_v2(Bucket=public)["Contents"]
    assert [o["Key"] for o in listed] == ["k"]
    with pytest.raises(ClientError) as private:
        s3.client(None).get_object(Bucket=public, Key="k")
    assert private.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    s3.delete_bucket(public)


@pytest.mark.gcp
def test_gcs_create_bucket_rules(emulators: Emulators) -> None:
    from google.api_core.exceptions import Conflict, Forbidden

    gcs = emulators["gcs"]
    name = f"gc-{uuid.uuid4().hex[:10]}"
    gcs.client(USER).create_bucket(name)
    assert gcs.bucket_owner(name) == USER
    with pytest.raises(Conflict):
        gcs.client(OTHER).create_bucket(name)
    with pytest.raises(Forbidden):
        gcs.client(None).create_bucket(f"gc-{uuid.uuid4().hex[:10]}")
    mine = {b.name for b in gcs.client(USER).list_buckets()}
    theirs = {b.name for b in gcs.client(OTHER).list_buckets()}
    assert name in mine and name not in theirs
    with pytest.raises(Forbidden):
        list(gcs.client(None).list_buckets())
    gcs.delete_bucket(name)
    assert gcs.bucket_owner(name) is None


# --- copies read their source ----------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_copy_needs_read_access_to_the_source(
    s3: S3Emulator, matrix_bucket: MatrixBucket, own_bucket: str, store_name: str
) -> None:
    from botocore.exceptions import ClientError

    mine = own_bucket
    private = matrix_bucket(store_name, OTHER, False)
    public = matrix_bucket(store_name, OTHER, True)
    user = s3.client(USER)
    with pytest.raises(ClientError) as denied:
        user.copy_object(Bucket=mine, Key="stolen", CopySource={"Bucket": private, "Key": SEED_KEY})
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    user.copy_object(Bucket=mine, Key="copied", CopySource={"Bucket": public, "Key": SEED_KEY})
    assert user.get_object(Bucket=mine, Key="copied")["Body"].read() == SEED
    assert [e.op for e in s3.events(mine) if e.key == "copied"] == ["copy"]


@pytest.mark.gcp
def test_gcs_copy_and_rewrite_need_read_access_to_the_source(
    emulators: Emulators, matrix_bucket: MatrixBucket
) -> None:
    from google.api_core.exceptions import Forbidden

    gcs = emulators["gcs"]
    client = gcs.client(USER)
    mine = client.bucket(matrix_bucket("gcs", USER, False))
    private = client.bucket(matrix_bucket("gcs", OTHER, False))
    public = client.bucket(matrix_bucket("gcs", OTHER, True))
    with pytest.raises(Forbidden):
        private.copy_blob(private.blob(SEED_KEY), mine, "stolen")
    public.copy_blob(public.blob(SEED_KEY), mine, "copied")
    mine.blob("rewritten").rewrite(public.blob(SEED_KEY))
    assert mine.blob("rewritten").download_as_bytes() == SEED
    with pytest.raises(Forbidden):  # and nobody but the owner writes into a bucket
        mine.copy_blob(mine.blob("copied"), public, "planted")
    ops = {e.key: e.op for e in gcs.events(mine.name)}
    assert ops["copied"] == "copy" and ops["rewritten"] == "rewrite"


@pytest.mark.gcp
def test_gcs_compose_is_an_owner_write_and_one_event(
    emulators: Emulators, matrix_bucket: MatrixBucket
) -> None:
    from google.api_core.exceptions import Forbidden

    gcs = emulators["gcs"]
    mine = gcs.client(USER).bucket(matrix_bucket("gcs", USER, True))
    mine.blob("part-1").upload_from_string(b"abc")
    mine.blob("part-2").upload_from_string(b"defg")
    mine.blob("whole").compose([mine.blob("part-1"), mine.blob("part-2")])
    assert mine.blob("whole").download_as_bytes() == b"abcdefg"
    assert [(e.key, e.size, e.op) for e in gcs.events(mine.name)][-1] == ("whole", 7, "compose")
    theirs = gcs.client(OTHER).bucket(mine.name)
    with pytest.raises(Forbidden):
        theirs.blob("whole2").compose([theirs.blob("part-1"), theirs.blob("part-2")])


@pytest.mark.gcp
def test_gcs_xml_style_paths_are_gated(emulators: Emulators, matrix_bucket: MatrixBucket) -> None:
    gcs = emulators["gcs"]
    public = matrix_bucket("gcs", OTHER, True)
    private = matrix_bucket("gcs", OTHER, False)
    seed = SEED_KEY.replace(" ", "%20")
    assert requests.get(f"{gcs.endpoint}/{public}/{seed}", timeout=10).content == SEED
    assert requests.get(f"{gcs.endpoint}/{private}/{seed}", timeout=10).status_code == 403
    assert requests.put(f"{gcs.endpoint}/{public}/x", data=b"x", timeout=10).status_code == 403
    user = {"Authorization": f"Bearer {GcsEmulator.tokens[USER]}"}
    put = requests.put(f"{gcs.endpoint}/{public}/x", data=b"x", headers=user, timeout=10)
    assert put.status_code == 403


# --- other ways in ---------------------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_presigned_urls(s3: S3Emulator, own_bucket: str) -> None:
    params = {"Bucket": own_bucket, "Key": SEED_KEY}
    url = s3.client(USER).generate_presigned_url("get_object", Params=params)
    assert requests.get(url, timeout=10).content == SEED
    foreign = s3.client(OTHER).generate_presigned_url("get_object", Params=params)
    assert requests.get(foreign, timeout=10).status_code == 403
    put = s3.client(OTHER).generate_presigned_url("put_object", Params={**params, "Key": "x"})
    assert requests.put(put, data=b"x", timeout=10).status_code == 403


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator) + stores_of_kind(GcsEmulator))
def test_denied_streaming_upload_gets_a_clean_answer(
    emulators: Emulators, matrix_bucket: MatrixBucket, store_name: str
) -> None:
    """A large chunked upload without Expect: 100-continue is answered 403 in the API's
    format, not with a reset connection."""
    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, OTHER, True)

    def body() -> Iterator[bytes]:
        for _ in range(24):
            yield b"x" * (1 << 20)

    if isinstance(emulator, S3Emulator):
        url = f"{emulator.endpoint}/{bucket}/big"
        resp = requests.put(url, data=body(), timeout=30)
        assert b"<Code>AccessDenied</Code>" in resp.content
    else:
        url = f"{emulator.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name=big"
        resp = requests.post(url, data=body(), timeout=30)
        assert resp.json()["error"]["code"] == 403
    assert resp.status_code == 403


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_admin_api(emulators: Emulators, store_name: str) -> None:
    emulator = emulators[store_name]
    admin = f"{emulator.endpoint}/__gate__"
    token = emulator.admin_headers()
    health = requests.get(f"{admin}/health", timeout=10).json()
    assert health["ok"] and health["store"] == store_name
    name = f"ga-{uuid.uuid4().hex[:10]}"
    row = {"bucket": name, "owner": OTHER, "public": True}
    # Without the token (a node, anyone but the harness) nothing but health answers.
    for wrong in ({}, {"X-Gate-Token": "guess"}):
        assert (
            requests.post(f"{admin}/buckets", json=row, headers=wrong, timeout=10).status_code
            == 401
        )
        assert (
            requests.delete(f"{admin}/buckets?bucket=x", headers=wrong, timeout=10).status_code
            == 401
        )
        for route in ("buckets", "events?bucket=x", "faults", "faults/log"):
            assert requests.get(f"{admin}/{route}", headers=wrong, timeout=10).status_code == 401
        fault = {"kind": "outage"}
        assert (
            requests.post(f"{admin}/faults", json=fault, headers=wrong, timeout=10).status_code
            == 401
        )
    assert emulator.bucket_owner(name) is None
    from pathlib import Path

    token_file = emulator.home / "gate-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    bad = requests.post(
        f"{admin}/buckets",
        json={"bucket": name, "owner": "mallory", "public": True},
        headers=token,
        timeout=10,
    )
    assert bad.status_code == 400
    emulator.set_bucket_access(name, OTHER, public=True)
    assert emulator.bucket_owner(name) == OTHER
    state = requests.get(f"{admin}/buckets", headers=token, timeout=10).json()
    assert {k: state[name][k] for k in ("owner", "public")} == {"owner": OTHER, "public": True}
    assert name in Path(emulator.record.gate_state).read_text()  # persisted for restarts
    requests.delete(f"{admin}/buckets?bucket={name}", headers=token, timeout=10)
    assert emulator.bucket_owner(name) is None
    assert emulator.events(name) == []


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_admin_owner_change_moves_the_bucket(s3: S3Emulator) -> None:
    """A bucket the admin API gives to another account is that account's: its old owner's
    settings are gone, and with them the old owner's access."""
    from botocore.exceptions import ClientError

    name = f"gx-{uuid.uuid4().hex[:10]}"
    s3.client(USER).create_bucket(Bucket=name)
    try:
        s3.client(USER).put_object(Bucket=name, Key="before", Body=b"b")
        s3.set_bucket_access(name, OTHER)
        with pytest.raises(ClientError) as denied:
            s3.client(USER).put_object(Bucket=name, Key="k", Body=b"u")
        assert status_of(denied.value) == 403
        with pytest.raises(ClientError) as unread:
            s3.client(USER).get_object(Bucket=name, Key="before")
        assert status_of(unread.value) == 403
        s3.client(OTHER).put_object(Bucket=name, Key="k", Body=b"o")
        assert s3.read_object(name, "k", owner=OTHER) == b"o"
        assert s3.read_object(name, "before", owner=OTHER) == b"b"
        if s3.access_features.has("acls"):  # a store without ACLs has no ACL to show
            acl = s3.client(OTHER).get_bucket_acl(Bucket=name)
            assert acl["Owner"]["ID"] == S3_ACCOUNTS[OTHER].canonical_id
    finally:
        s3.delete_bucket(name)
