"""The access gate: the allow/deny matrix through the real SDKs, bucket creation rules,
copies, presigned URLs, the admin API; plus the pure request classification."""

from __future__ import annotations

import itertools
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from harness import emulator_registry as registry
from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.fleet import RunningEmulator
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from harness.gate.rules import ANONYMOUS, INVALID, Bucket, Kind, decide
from harness.store_gates.azure.protocol import classify_azure
from harness.store_gates.gcs.protocol import classify_gcs, classify_gcs_batch
from harness.store_gates.s3.acl import S3_ACCOUNTS
from harness.store_gates.s3.protocol import classify_s3
from tests.integration.helpers import stores_of_kind

SEED_KEY = "seed/hello world.txt"
SEED = b"hello from the seed object\n"
QUICK = 5.0  # a denial must come back this fast: no retry storm, no hang
CALLERS = {USER: USER, "anonymous": None, "unknown": UNKNOWN}
"""caller in test ids -> the owner argument of the emulator helpers"""
Emulators = dict[str, RunningEmulator]
MatrixBucket = Callable[[str, str, bool], str]
"""``matrix_bucket(store, owner, public)`` -> the name of a seeded bucket"""


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


@pytest.fixture(scope="module")
def matrix_bucket(emulators: Emulators) -> Iterator[Callable[[str, str, bool], str]]:
    """``matrix_bucket(store, owner, public)``: one seeded bucket per combination, made once
    per module (and worker) and deleted at the end."""
    made: dict[tuple[str, str, bool], str] = {}

    def get(store: str, owner: str, public: bool) -> str:
        key = (store, owner, public)
        if key not in made:
            name = f"gm-{owner}-{'pub' if public else 'prv'}-{uuid.uuid4().hex[:10]}"
            emulators[store].make_bucket(name, owner=owner, public=public, objects={SEED_KEY: SEED})
            made[key] = name
        return made[key]

    yield get
    for (store, _, _), name in made.items():
        emulators[store].delete_bucket(name)


@pytest.fixture
def own_bucket(matrix_bucket: MatrixBucket, store_name: str) -> str:
    """USER's private seeded bucket in the test's store."""
    return matrix_bucket(store_name, USER, False)


def _status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore
        return int(response["ResponseMetadata"]["HTTPStatusCode"])
    code = getattr(error, "code", None) or getattr(error, "status_code", None)
    return int(code) if code is not None else None


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
    status = _status_of(info.value)
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
        return  # the rest is S3's ACL model (R2's own: tests/integration/test_r2_access.py)
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
        assert _status_of(denied.value) == 403
        with pytest.raises(ClientError) as unread:
            s3.client(USER).get_object(Bucket=name, Key="before")
        assert _status_of(unread.value) == 403
        s3.client(OTHER).put_object(Bucket=name, Key="k", Body=b"o")
        assert s3.read_object(name, "k", owner=OTHER) == b"o"
        assert s3.read_object(name, "before", owner=OTHER) == b"b"
        if s3.access_features.has("acls"):  # a store without ACLs has no ACL to show
            acl = s3.client(OTHER).get_bucket_acl(Bucket=name)
            assert acl["Owner"]["ID"] == S3_ACCOUNTS[OTHER].canonical_id
    finally:
        s3.delete_bucket(name)


# --- classification, without processes ------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_identity(store_name: str) -> None:
    cls = registry.get_emulator_class(store_name)
    assert issubclass(cls, S3Emulator)
    protocol = cls.gate_protocol()
    user = cls.keys[USER].access_key_id
    region = cls.region
    v4 = f"AWS4-HMAC-SHA256 Credential={user}/20260101/{region}/s3/aws4_request, SignedHeaders=host"
    assert protocol.identity({"authorization": v4}, {}) == USER
    other = cls.keys[OTHER].access_key_id
    assert protocol.identity({"authorization": f"AWS {other}:sig"}, {}) == OTHER
    assert protocol.identity({}, {"X-Amz-Credential": [f"{user}/20260101/x"]}) == USER
    assert protocol.identity({}, {}) is ANONYMOUS
    unknown = f"AWS4-HMAC-SHA256 Credential={cls.keys[UNKNOWN].access_key_id}/1/2"
    assert protocol.identity({"authorization": unknown}, {}) == INVALID
    assert protocol.identity({"authorization": "AWS4-HMAC-SHA256 Credential=AKIAX/1/2"}, {}) == (
        INVALID
    )
    assert protocol.identity({"authorization": "Basic abc"}, {}) == INVALID


def test_s3_compatible_stores_have_their_own_identities() -> None:
    """Each S3-protocol emulator knows only its own keys: another store's key is INVALID."""
    s3_like = [c for c in registry.emulator_classes().values() if issubclass(c, S3Emulator)]
    for cls in s3_like:
        for other_cls in s3_like:
            if other_cls is cls:
                continue
            for owner in (USER, OTHER):
                key = other_cls.keys[owner].access_key_id
                assert key not in {k.access_key_id for k in cls.keys.values()}
                auth = {"authorization": f"AWS {key}:sig"}
                assert cls.gate_protocol().identity(auth, {}) == INVALID


def test_gcs_identity() -> None:
    protocol = GcsEmulator.gate_protocol()
    assert protocol.identity({"authorization": f"Bearer {GcsEmulator.tokens[USER]}"}) == USER
    assert protocol.identity({"authorization": f"Bearer {GcsEmulator.tokens[UNKNOWN]}"}) == (
        INVALID
    )
    assert protocol.identity({"authorization": "Bearer ya29.nope"}) == INVALID
    assert protocol.identity({}) is ANONYMOUS


@pytest.mark.parametrize(
    ("method", "path", "headers", "kind", "bucket", "key", "event"),
    [
        ("GET", "/", {}, Kind.LIST_BUCKETS, None, None, None),
        ("PUT", "/b", {}, Kind.CREATE_BUCKET, "b", None, None),
        ("PUT", "/b?versioning", {}, Kind.WRITE, "b", None, None),
        ("GET", "/b?list-type=2&prefix=a", {}, Kind.READ, "b", None, None),
        ("PUT", "/b/a%20b/c?x-id=PutObject", {}, Kind.WRITE, "b", "a b/c", "put"),
        ("PUT", "/b/k?partNumber=1&uploadId=u", {}, Kind.WRITE, "b", "k", None),
        ("POST", "/b/k?uploads", {}, Kind.WRITE, "b", "k", None),
        ("POST", "/b/k?uploadId=u", {}, Kind.WRITE, "b", "k", "multipart"),
        ("PUT", "/b/k", {"x-amz-copy-source": "/src/k"}, Kind.WRITE, "b", "k", "copy"),
        ("DELETE", "/b/k", {}, Kind.WRITE, "b", "k", "delete"),
        ("DELETE", "/b/k?versionId=3", {}, Kind.WRITE, "b", "k", "delete"),
        ("DELETE", "/b/k?uploadId=u", {}, Kind.WRITE, "b", "k", None),
        ("GET", "/b/k?X-Amz-Credential=a%2Fb&X-Amz-Signature=s", {}, Kind.READ, "b", "k", None),
        ("POST", "/b?delete", {}, Kind.WRITE, "b", None, "delete"),
        ("GET", "/moto-api/reset", {}, Kind.DENY, None, None, None),
    ],
)
def test_classify_s3(
    method: str,
    path: str,
    headers: dict[str, str],
    kind: Kind,
    bucket: str | None,
    key: str | None,
    event: str | None,
) -> None:
    access = classify_s3(method, path, headers)
    assert (access.kind, access.bucket, access.key, access.event) == (kind, bucket, key, event)


UP = "/upload/storage/v1/b/b/o"
SRC = "/storage/v1/b/s/o/k"


@pytest.mark.parametrize(
    ("method", "path", "kind", "bucket", "key", "event", "sources"),
    [
        ("GET", "/storage/v1/b?project=p", Kind.LIST_BUCKETS, None, None, None, ()),
        ("POST", "/storage/v1/b?project=p", Kind.CREATE_BUCKET, None, None, None, ()),
        ("GET", "/storage/v1/b/b/o?prefix=x", Kind.READ, "b", None, None, ()),
        ("GET", "/storage/v1/b/b/o/a%2Fb?alt=media", Kind.READ, "b", "a/b", None, ()),
        ("GET", "/download/storage/v1/b/b/o/a%2Fb", Kind.READ, "b", "a/b", None, ()),
        ("DELETE", "/storage/v1/b/b/o/a%2Fb", Kind.WRITE, "b", "a/b", "delete", ()),
        ("PATCH", "/storage/v1/b/b/o/a", Kind.WRITE, "b", "a", None, ()),
        ("DELETE", "/storage/v1/b/b", Kind.WRITE, "b", None, None, ()),
        (
            "POST",
            "/upload/storage/v1/b/b/o?uploadType=media&name=n",
            Kind.WRITE,
            "b",
            "n",
            "put",
            (),
        ),
        ("POST", "/upload/storage/v1/b/b/o?uploadType=resumable", Kind.WRITE, "b", None, None, ()),
        ("PUT", "/upload/storage/v1/b/b/o?upload_id=u", Kind.WRITE, "b", None, "resumable", ()),
        (
            "POST",
            "/storage/v1/b/s/o/k/rewriteTo/b/d/o/k2",
            Kind.WRITE,
            "d",
            "k2",
            "rewrite",
            ("s",),
        ),
        ("POST", "/storage/v1/b/s/o/k/copyTo/b/d/o/a%2Fb", Kind.WRITE, "d", "a/b", "copy", ("s",)),
        ("POST", "/storage/v1/b/b/o/k/compose", Kind.WRITE, "b", "k", "compose", ("b",)),
        ("GET", "/b/a/b.txt", Kind.READ, "b", "a/b.txt", None, ()),
        ("PUT", "/b/a/b.txt", Kind.WRITE, "b", "a/b.txt", "put", ()),
        ("GET", "/_internal/healthcheck", Kind.DENY, None, None, None, ()),
    ],
)
def test_classify_gcs(
    method: str,
    path: str,
    kind: Kind,
    bucket: str | None,
    key: str | None,
    event: str | None,
    sources: tuple[str, ...],
) -> None:
    access = classify_gcs(method, path, {})
    got = (access.kind, access.bucket, access.key, access.event, access.sources)
    assert got == (kind, bucket, key, event, sources)


def test_gcs_batch_is_decided_part_by_part() -> None:
    body = (
        b"--batch\r\nContent-Type: application/http\r\n\r\n"
        b"DELETE /storage/v1/b/mine/o/a HTTP/1.1\r\n\r\n--batch\r\n"
        b"Content-Type: application/http\r\n\r\n"
        b"DELETE /storage/v1/b/theirs/o/b HTTP/1.1\r\n\r\n--batch--\r\n"
    )
    access = classify_gcs_batch(body)
    buckets = {"mine": Bucket(USER), "theirs": Bucket(OTHER, public=True)}
    assert not decide(access, USER, buckets).allowed
    assert decide(access, OTHER, {"mine": Bucket(OTHER), "theirs": Bucket(OTHER)}).allowed


def test_classify_azure_events() -> None:
    assert classify_azure("PUT", "/acct/c/a/b.txt", {}).event == "put"
    assert classify_azure("PUT", "/acct/c/b?comp=block&blockid=x", {}).event is None
    assert classify_azure("PUT", "/acct/c/b?comp=blocklist", {}).event == "commit"
    assert classify_azure("PUT", "/acct/c/b", {"x-ms-copy-source": "http://x"}).event == "copy"
    assert classify_azure("DELETE", "/acct/c/b", {}).event == "delete"
    put = classify_azure("PUT", "/acct/c?restype=container", {})
    assert put.kind is Kind.PASS and put.event is None


def test_unknown_store_is_a_clear_error() -> None:
    """A gate for a store no emulator serves refuses to start, naming the store and the
    registered ones (never a fallback protocol that lets everything through)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "harness.gate", "--store", "nosuchstore", "--listen"]
    argv += ["127.0.0.1:1", "--upstream", "http://127.0.0.1:2", "--state", "/nonexistent"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "Unknown store 'nosuchstore'" in result.stderr
    for store in registry.store_names():
        assert store in result.stderr
    with pytest.raises(registry.UnknownEmulatorError, match="nosuchstore"):
        registry.get_emulator_class("nosuchstore")


# --- signatures and tokens, as the real services check them ----------------------------


def _s3_error(resp: requests.Response) -> tuple[int, str]:
    code = re.search(rb"<Code>(.*?)</Code>", resp.content)
    return resp.status_code, code.group(1).decode() if code else ""


def _signed_client(s3: S3Emulator, secret: str, signature_version: str) -> Any:
    """A boto3 client with USER's key id, ``secret`` and the given signature version."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name=s3.region,
        aws_access_key_id=s3.keys[USER].access_key_id,
        aws_secret_access_key=secret,
        config=Config(signature_version=signature_version, s3={"addressing_style": "path"}),
    )


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
@pytest.mark.parametrize("signature_version", ["s3v4", "s3"])
def test_s3_wrong_secret_is_signature_does_not_match(
    s3: S3Emulator, own_bucket: str, signature_version: str
) -> None:
    """A known key id with a wrong secret: 403 SignatureDoesNotMatch for every call (list,
    put, ListBuckets), as in AWS; the right secret works with the same SDK settings."""
    from botocore.exceptions import ClientError

    bucket = own_bucket
    key = s3.keys[USER]
    right = _signed_client(s3, key.secret_access_key, signature_version)
    wrong = _signed_client(s3, key.secret_access_key[:-1] + "X", signature_version)
    right.put_object(Bucket=bucket, Key="sig/ok ü+x.txt", Body=b"ok")
    assert right.get_object(Bucket=bucket, Key="sig/ok ü+x.txt")["Body"].read() == b"ok"
    calls = [
        lambda: wrong.list_objects_v2(Bucket=bucket),
        lambda: wrong.put_object(Bucket=bucket, Key="sig/forged", Body=b"x"),
        lambda: wrong.list_buckets(),
    ]
    for call in calls:
        with pytest.raises(ClientError) as info:
            call()
        error = info.value.response
        assert error["Error"]["Code"] == "SignatureDoesNotMatch"
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "sig/forged" not in s3.list_keys(bucket)


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
@pytest.mark.parametrize("signature_version", ["s3v4", "s3"])
def test_s3_presigned_urls_are_verified(
    s3: S3Emulator, own_bucket: str, signature_version: str
) -> None:
    """Presigned URLs (SigV4 and SigV2, made by boto3): valid ones work; an expired one is
    403 AccessDenied 'Request has expired'; a tampered signature, a wrong secret and a forged
    URL (no secret, date 2000) are refused; none of them writes anything."""
    bucket = own_bucket
    user = _signed_client(s3, s3.keys[USER].secret_access_key, signature_version)
    wrong = _signed_client(s3, "not-the-secret", signature_version)
    get = {"Bucket": bucket, "Key": SEED_KEY}
    put = {"Bucket": bucket, "Key": f"presigned/{signature_version}"}
    ok = user.generate_presigned_url("get_object", Params=get, ExpiresIn=300)
    assert requests.get(ok, timeout=10).content == SEED
    ok_put = user.generate_presigned_url("put_object", Params=put, ExpiresIn=300)
    assert requests.put(ok_put, data=b"signed", timeout=10).status_code == 200
    short = user.generate_presigned_url("get_object", Params=get, ExpiresIn=1)
    short_put = user.generate_presigned_url(
        "put_object", Params={**put, "Key": "presigned/expired"}, ExpiresIn=1
    )
    sig = "X-Amz-Signature=" if signature_version == "s3v4" else "Signature="
    tampered = ok_put.replace(sig, sig + "0", 1)
    forged = wrong.generate_presigned_url("put_object", Params={**put, "Key": "presigned/forged"})
    # a URL made up with no secret at all, dated 2000
    if signature_version == "s3v4":
        forged_old = re.sub(r"X-Amz-Date=\d{8}T", "X-Amz-Date=20000101T", forged)
        forged_old = re.sub(r"(X-Amz-Credential=[^&]*?%2F)\d{8}", r"\g<1>20000101", forged_old)
    else:
        forged_old = re.sub(r"Expires=\d+", "Expires=946684800", forged)
    assert _s3_error(requests.put(tampered, data=b"x", timeout=10)) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert _s3_error(requests.put(forged, data=b"x", timeout=10)) == (403, "SignatureDoesNotMatch")
    assert requests.put(forged_old, data=b"x", timeout=10).status_code == 403
    time.sleep(2.5)
    expired = requests.get(short, timeout=10)
    assert _s3_error(expired) == (403, "AccessDenied")
    assert b"Request has expired" in expired.content
    assert _s3_error(requests.put(short_put, data=b"x", timeout=10)) == (403, "AccessDenied")
    keys = s3.list_keys(bucket)
    assert f"presigned/{signature_version}" in keys
    assert not {"presigned/expired", "presigned/forged"} & set(keys)


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_malformed_and_unknown_credentials(s3: S3Emulator, own_bucket: str) -> None:
    """A malformed SigV4 header is 400 AuthorizationHeaderMalformed (moto alone answered
    500); an unknown key id is 403 InvalidAccessKeyId (through boto3)."""
    from botocore.exceptions import ClientError

    bucket = own_bucket
    user = s3.keys[USER].access_key_id
    for auth in (
        f"AWS4-HMAC-SHA256 Credential={user}/x, Signature=abc",
        f"AWS4-HMAC-SHA256 Credential={user}/20260101/{s3.region}/s3, SignedHeaders=host",
        "AWS4-HMAC-SHA256 garbage",
    ):
        resp = requests.get(f"{s3.endpoint}/{bucket}", headers={"Authorization": auth}, timeout=10)
        assert _s3_error(resp) == (400, "AuthorizationHeaderMalformed"), auth
    with pytest.raises(ClientError) as info:
        s3.client(UNKNOWN).list_objects_v2(Bucket=bucket)
    assert info.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_s3_streaming_uploads_still_work(s3: S3Emulator, own_bucket: str, tmp_path: Any) -> None:
    """aws-chunked uploads, as boto3 (checksum trailers) and rclone send them, pass the
    signature check and arrive whole."""
    import hashlib
    import io
    import subprocess

    from botocore.config import Config

    bucket = own_bucket
    data = os.urandom(12 << 20)
    client = s3.client(USER)
    client.put_object(Bucket=bucket, Key="chunked/put", Body=io.BytesIO(data))
    client.upload_fileobj(io.BytesIO(data), bucket, "chunked/multipart")
    import boto3

    key = s3.keys[USER]
    trailer = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name=s3.region,
        aws_access_key_id=key.access_key_id,
        aws_secret_access_key=key.secret_access_key,
        config=Config(
            request_checksum_calculation="when_supported", s3={"addressing_style": "path"}
        ),
    )
    trailer.put_object(Bucket=bucket, Key="chunked/trailer", Body=io.BytesIO(data))
    src = tmp_path / "rclone.bin"
    src.write_bytes(data)
    conf = tmp_path / "rclone.conf"
    conf.write_text(s3.rclone_config(USER, bucket))
    rclone = Path(sys.executable).parent / "rclone"
    subprocess.run(
        [str(rclone), "--config", str(conf), "copyto", str(src), f"remote:{bucket}/chunked/rclone"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    digest = hashlib.sha256(data).hexdigest()
    for name in ("put", "multipart", "trailer", "rclone"):
        got = s3.read_object(bucket, f"chunked/{name}")
        assert hashlib.sha256(got).hexdigest() == digest, name


@pytest.mark.gcp
def test_gcs_invalid_token_is_401_in_gcs_json(
    emulators: Emulators, matrix_bucket: MatrixBucket
) -> None:
    """An unknown or malformed bearer token: 401 with GCS's JSON error (authError), even on a
    public bucket; the SDK gives up (a bare token cannot be refreshed)."""
    from google.auth.exceptions import RefreshError

    gcs = emulators["gcs"]
    public = matrix_bucket("gcs", OTHER, True)
    for auth in (f"Bearer {GcsEmulator.tokens[UNKNOWN]}", "Bearer ", "Basic dXNlcjpwdw=="):
        resp = requests.get(
            f"{gcs.endpoint}/storage/v1/b/{public}/o", headers={"Authorization": auth}, timeout=10
        )
        assert resp.status_code == 401, auth
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        error = resp.json()["error"]
        assert error["code"] == 401 and error["errors"][0]["reason"] == "authError"
    with pytest.raises(RefreshError):
        gcs.list_keys(public, UNKNOWN)
    assert SEED_KEY in gcs.list_keys(public, None)  # anonymous reads of a public bucket work


# --- the gate is the only door -----------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_emulators_are_sealed(emulators: Emulators, store_name: str) -> None:
    """The emulator listens only inside its private network namespace: from the host
    namespace (where nodes live, --network host) its port refuses; its gate answers."""
    import socket

    emulator = emulators[store_name]
    assert emulator.record.sealed
    for address in ("127.0.0.1", "127.0.0.2", "127.5.6.7"):
        with socket.socket() as sock, pytest.raises(OSError):
            sock.settimeout(3)
            sock.connect((address, emulator.record.port))
    assert emulator.upstream_answers()  # it runs, inside
    assert requests.get(f"{emulator.endpoint}/__gate__/health", timeout=10).json()["ok"]
    gate_ns = os.readlink(f"/proc/{emulator.record.gate_pid}/ns/net")
    assert gate_ns == os.readlink(f"/proc/{emulator.record.pid}/ns/net")
    assert gate_ns != os.readlink("/proc/self/ns/net")


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_small_responses_do_not_stall(emulators: Emulators, store_name: str) -> None:
    """TCP_NODELAY on the gate's connections: without it a small proxied answer with a body
    (a streamed response: headers, then body, in two writes) stalls ~45 ms on a keep-alive
    connection (Nagle and delayed ACK). The option is read on the gate's own end of the
    connection (its socket, duplicated with pidfd_getfd), after 40 answers on it: a timing
    bound here failed under a load of 20 (300-400 ms answers, none of it Nagle's)."""
    import socket

    emulator = emulators[store_name]
    from harness.emulators.azure import ACCOUNTS, AzureEmulator

    # a missing object of the public bucket: the emulator answers 404 with an error body
    path = f"/{emulator.public_dataset}/nx-{uuid.uuid4().hex[:12]}"
    if isinstance(emulator, AzureEmulator):
        path = f"/{ACCOUNTS[OTHER].name}{path}"
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    times = []
    with socket.create_connection(("127.0.0.1", emulator.record.gate_port), timeout=10) as sock:
        for _ in range(40):
            started = time.monotonic()
            sock.sendall(request)
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(65536)
            head, _, body = reply.partition(b"\r\n\r\n")
            fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
            headers = {k.strip().lower(): v.strip() for k, v in fields.items()}
            if b"content-length" in headers:
                while len(body) < int(headers[b"content-length"]):
                    body += sock.recv(65536)
            else:
                assert headers.get(b"transfer-encoding") == b"chunked", head
                while not body.endswith(b"0\r\n\r\n"):
                    body += sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 404") and body, head
            times.append(time.monotonic() - started)
        gate_end = _peer_socket(emulator.record.gate_pid, sock)
        try:
            nodelay = gate_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            gate_end.close()
    assert nodelay, f"no TCP_NODELAY on the gate's end; answers took {times} s"


def _link(fd: Path) -> str | None:
    """What an fd of another process points at; None if it was closed meanwhile (the gate
    serves other connections while this test lists its fds; ours stays open)."""
    try:
        return os.readlink(fd)
    except FileNotFoundError:
        return None


def _peer_socket(pid: int, ours: Any) -> Any:
    """A duplicate of process ``pid``'s end of our TCP connection ``ours`` (same network
    namespace as ours: the gate's listening socket is in the host's)."""
    import ctypes
    import socket

    local_port = ours.getsockname()[1]
    server_port = ours.getpeername()[1]
    inode = None
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        here, there = int(cols[1].split(":")[1], 16), int(cols[2].split(":")[1], 16)
        if (here, there) == (server_port, local_port):
            inode = cols[9]
    assert inode is not None, "the gate's end of the connection is not in /proc/net/tcp"
    fds = [
        int(fd.name) for fd in Path(f"/proc/{pid}/fd").iterdir() if _link(fd) == f"socket:[{inode}]"
    ]
    assert fds, f"process {pid} holds no socket:[{inode}]"
    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        dup = libc.syscall(438, pidfd, fds[0], 0)  # pidfd_getfd (x86_64 and arm64)
        assert dup >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(pidfd)
    return socket.socket(fileno=dup)


# --- injected faults ---------------------------------------------------------------------


def _raw_path(emulator: RunningEmulator, bucket: str, key: str) -> str:
    """The gate URL of ``key`` in ``bucket`` (XML-style path; Azure: in the other account)."""
    from harness.emulators.azure import ACCOUNTS, AzureEmulator

    if isinstance(emulator, AzureEmulator):
        return f"{emulator.endpoint}/{ACCOUNTS[OTHER].name}/{bucket}/{key}"
    return f"{emulator.endpoint}/{bucket}/{key}"


def _error_code(emulator: RunningEmulator, resp: requests.Response) -> str:
    """The API's error code of a response, read the way its SDK reads it."""
    from harness.emulators.azure import AzureEmulator

    if isinstance(emulator, GcsEmulator):
        return str(resp.json()["error"]["errors"][0]["reason"])
    code = _s3_error(resp)[1]
    if isinstance(emulator, AzureEmulator):
        assert resp.headers["x-ms-error-code"] == code
    return code


EXPECTED_CODES = {  # (emulator class name, status) -> the service's own error code
    ("S3Emulator", 503): "SlowDown",
    ("S3Emulator", 500): "InternalError",
    ("S3Emulator", 403): "AccessDenied",
    ("GcsEmulator", 503): "backendError",
    ("GcsEmulator", 500): "backendError",
    ("GcsEmulator", 403): "forbidden",
    ("AzureEmulator", 503): "ServerBusy",
    ("AzureEmulator", 500): "InternalError",
    ("AzureEmulator", 403): "AuthenticationFailed",
}


def _expected_code(emulator: RunningEmulator, status: int) -> str:
    for cls in type(emulator).__mro__:
        if (cls.__name__, status) in EXPECTED_CODES:
            return EXPECTED_CODES[(cls.__name__, status)]
    raise AssertionError(f"no expected error code for {type(emulator).__name__} {status}")


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_errors_and_deny_in_the_api_format(emulators: Emulators, store_name: str) -> None:
    """errors (503, 500) and deny answer in the store's own format, only on the fault's
    bucket and method; each start and end is in the fault log."""
    emulator = emulators[store_name]
    target, bystander = (f"fx-{uuid.uuid4().hex[:10]}" for _ in range(2))
    before = time.time_ns()
    try:
        for kind, status in (("errors", 503), ("errors", 500), ("deny", 403)):
            options = {"status": status} if kind == "errors" else {}
            fault = emulator.add_fault(kind, bucket=target, method="GET", **options)
            expected = (status, _expected_code(emulator, status))

            def answer(resp: requests.Response) -> tuple[int, str]:
                try:
                    return resp.status_code, _error_code(emulator, resp)
                except (ValueError, KeyError, AssertionError):
                    return resp.status_code, ""

            assert answer(requests.get(_raw_path(emulator, target, "k"), timeout=10)) == expected
            # another bucket, another method, the fault cleared: the emulator's own answers
            other = requests.get(_raw_path(emulator, bystander, "k"), timeout=10)
            assert answer(other) != expected
            put = requests.put(_raw_path(emulator, target, "k"), data=b"x", timeout=10)
            assert answer(put) != expected or kind == "deny"
            emulator.clear_faults(fault_id=fault["id"])
            after = requests.get(_raw_path(emulator, target, "k"), timeout=10)
            assert answer(after) != expected
    finally:
        emulator.clear_faults(bucket=target)
    log = [e for e in emulator.fault_log(target) if e["t_ns"] >= before and e["bucket"] == target]
    phases = [(e["kind"], e["phase"]) for e in log]
    assert phases == [(k, p) for k in ("errors", "errors", "deny") for p in ("start", "end")]
    assert all(a["t_ns"] <= b["t_ns"] for a, b in itertools.pairwise(log))


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_outage_latency_and_expiry(emulators: Emulators, store_name: str) -> None:
    """An outage holds requests (no answer) until it ends, then they are served; latency
    delays each request; a timed fault ends by itself and logs its end at its end time."""
    emulator = emulators[store_name]
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    url = _raw_path(emulator, bucket, "k")
    baseline = requests.get(url, timeout=10).status_code
    fault = emulator.add_fault("outage", seconds=1.5, bucket=bucket)
    started = time.monotonic()
    assert requests.get(url, timeout=30).status_code == baseline
    assert time.monotonic() - started >= 1.2
    ends = [e for e in emulator.fault_log(bucket) if e["id"] == fault["id"]]
    assert [e["phase"] for e in ends] == ["start", "end"]
    assert ends[1]["t_ns"] == fault["ends_at_ns"]
    # until cleared: a request stays unanswered, then goes through after 'clear'
    emulator.add_fault("outage", bucket=bucket)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(url, timeout=1.0)
    # (other tests' faults on the shared emulator are scoped to their own buckets)
    assert [f["kind"] for f in emulator.faults() if f["bucket"] == bucket] == ["outage"]
    emulator.clear_faults(bucket=bucket)
    assert requests.get(url, timeout=10).status_code == baseline
    with_latency = emulator.add_fault("latency", ms=400, bucket=bucket)
    started = time.monotonic()
    requests.get(url, timeout=10)
    assert time.monotonic() - started >= 0.4
    emulator.clear_faults(fault_id=with_latency["id"])
    # Cleared, it delays nothing more: the requests after it meet no fault (its hits stop at
    # the one request above, and none of the bucket's faults is left).
    for _ in range(3):
        requests.get(url, timeout=10)
    ended = [e for e in emulator.fault_log(bucket) if e["id"] == with_latency["id"]]
    assert [(e["phase"], e["hits"]) for e in ended] == [("start", 0), ("end", 1)], ended
    assert not [f for f in emulator.faults() if f["bucket"] == bucket]


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_bandwidth_and_resets_with_the_sdk(
    emulators: Emulators, matrix_bucket: MatrixBucket, store_name: str
) -> None:
    """bandwidth caps bodies both ways; reset cuts connections mid-body (a raw client sees
    the connection broken); under resets and 503s the SDK's retries deliver the object
    whole."""
    import hashlib

    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, USER, False)
    data = os.urandom(2 << 20)
    try:
        with_bw = emulator.add_fault("bandwidth", mibps=2, bucket=bucket)
        started = time.monotonic()
        emulator.write_object(bucket, "fx/slow", data)
        assert time.monotonic() - started >= 0.9  # 2 MiB at 2 MiB/s
        started = time.monotonic()
        assert emulator.read_object(bucket, "fx/slow") == data
        assert time.monotonic() - started >= 0.9
        emulator.clear_faults(fault_id=with_bw["id"])
        emulator.add_fault("reset", rate=1.0, bucket=bucket, method="PUT")
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.put(_raw_path(emulator, bucket, "fx/raw"), data=data, timeout=30)
        emulator.clear_faults(bucket=bucket)
        # low rates: every SDK gives up after a few attempts (Azure's back off 15 s each)
        emulator.add_fault("reset", rate=0.15, bucket=bucket)
        emulator.add_fault("errors", rate=0.15, bucket=bucket)
        emulator.write_object(bucket, "fx/retried", data)
        emulator.clear_faults(bucket=bucket)
        got = emulator.read_object(bucket, "fx/retried")
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    finally:
        emulator.clear_faults(bucket=bucket)


def test_fault_cli(emulators: Emulators) -> None:
    """``harness fault STORE ...``: start, list, clear; bad options are a clear error."""
    import subprocess

    harness = str(Path(sys.executable).parent / "harness")
    store = next(iter(emulators))
    bucket = f"fx-{uuid.uuid4().hex[:10]}"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [harness, "fault", store, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    started = run("errors", "--rate", "0.5", "--seconds", "60", "--bucket", bucket)
    assert started.returncode == 0, started.stderr
    assert "errors" in started.stdout and bucket in started.stdout
    listed = run("list")
    assert bucket in listed.stdout and "rate=0.5" in listed.stdout
    bad = run("latency", "--bucket", bucket)
    assert bad.returncode != 0 and "ms" in bad.stderr
    cleared = run("clear", "--bucket", bucket)
    assert cleared.returncode == 0 and "Cleared 1" in cleared.stdout
    run("clear")
    assert bucket not in run("list").stdout
