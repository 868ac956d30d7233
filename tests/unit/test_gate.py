"""The access gate: the allow/deny matrix through the real SDKs, bucket creation rules,
copies, presigned URLs, the admin API; plus the pure request classification."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from harness.accounts import ACCOUNTS, OTHER, USER
from harness.emulators import RunningEmulator
from harness.emulators.azure import AzureEmulator
from harness.gate_rules import (
    ANONYMOUS,
    INVALID,
    Bucket,
    Kind,
    classify_azure,
    classify_gcs,
    classify_gcs_batch,
    classify_s3,
    decide,
    gcs_identity,
    s3_identity,
)

MARKS = {"s3": pytest.mark.aws, "gcs": pytest.mark.gcp, "azure": pytest.mark.azure}
SEED_KEY = "seed/hello world.txt"
SEED = b"hello from the seed object\n"
QUICK = 5.0  # a denial must come back this fast: no retry storm, no hang


def expected_allowed(store: str, owner: str, public: bool, caller: str, op: str) -> bool:
    """The local cloud's rules. Azurite serves public containers without checking a
    (wrong) key, where S3/GCS gates reject unknown credentials outright."""
    if caller == "unknown":
        return store == "azure" and public and op == "read"
    if caller == USER and owner == USER:
        return True
    return op == "read" and public


def matrix() -> list[Any]:
    """Every (store, owner, visibility, caller, operation) with the expected outcome."""
    return list(_matrix())


def _matrix() -> Iterator[Any]:
    for store in ("s3", "gcs", "azure"):
        for owner in (USER, OTHER):
            for public in (False, True):
                for caller in (USER, "anonymous", "unknown"):
                    for op in ("read", "write"):
                        allowed = expected_allowed(store, owner, public, caller, op)
                        ident = (
                            f"{store}-owner_{owner}-{'public' if public else 'private'}"
                            f"-by_{caller}-{op}-{'allow' if allowed else 'deny'}"
                        )
                        yield pytest.param(
                            store, owner, public, caller, op, allowed, id=ident, marks=MARKS[store]
                        )


@pytest.fixture(scope="module")
def matrix_bucket(
    emulators: dict[str, RunningEmulator],
) -> Iterator[Callable[[str, str, bool], str]]:
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


def _client(emulator: RunningEmulator, caller: str, bucket_owner: str) -> Any:
    """An SDK client for ``caller`` (user / anonymous / unknown credentials)."""
    store = emulator.store
    if caller in (USER, "anonymous"):
        owner = USER if caller == USER else None
        if isinstance(emulator, AzureEmulator):  # on the account that holds the container
            return emulator.client(owner, account=ACCOUNTS[bucket_owner].azure_account)
        return emulator.client(owner)
    # unknown credentials
    if store == "s3":
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=emulator.endpoint,
            region_name="us-east-1",
            aws_access_key_id="AKIAUNKNOWNKEY000000",
            aws_secret_access_key="not-a-known-secret",
        )
    if store == "gcs":
        from google.cloud import storage
        from google.oauth2.credentials import Credentials

        return storage.Client(
            project="skycore",
            credentials=Credentials("ya29.unknown-token"),
            client_options={"api_endpoint": emulator.endpoint},
        )
    from azure.storage.blob import BlobServiceClient

    account = ACCOUNTS[bucket_owner].azure_account
    wrong_key = ACCOUNTS[OTHER if bucket_owner == USER else USER].azure_key
    return BlobServiceClient(
        f"{emulator.endpoint}/{account}",
        credential={"account_name": account, "account_key": wrong_key},
    )


def _denied_types(store: str) -> tuple[type[BaseException], ...]:
    if store == "s3":
        from botocore.exceptions import ClientError

        return (ClientError,)
    if store == "gcs":
        from google.api_core.exceptions import Forbidden

        return (Forbidden,)
    from azure.core.exceptions import HttpResponseError

    return (HttpResponseError,)


def _status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore
        return int(response["ResponseMetadata"]["HTTPStatusCode"])
    code = getattr(error, "code", None) or getattr(error, "status_code", None)
    return int(code) if code is not None else None


def _read(store: str, client: Any, bucket: str) -> None:
    if store == "s3":
        body = client.get_object(Bucket=bucket, Key=SEED_KEY)["Body"].read()
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    elif store == "gcs":
        body = client.bucket(bucket).blob(SEED_KEY).download_as_bytes()
        keys = [b.name for b in client.list_blobs(bucket)]
    else:
        container = client.get_container_client(bucket)
        body = container.download_blob(SEED_KEY).readall()
        keys = [b.name for b in container.list_blobs()]
    assert body == SEED
    assert SEED_KEY in keys


def _write(store: str, client: Any, bucket: str) -> None:
    key = f"written/{uuid.uuid4().hex}.txt"
    if store == "s3":
        client.put_object(Bucket=bucket, Key=key, Body=b"new object")
    elif store == "gcs":
        client.bucket(bucket).blob(key).upload_from_string(b"new object")
    else:
        client.get_container_client(bucket).upload_blob(key, b"new object")


@pytest.mark.parametrize(("store_name", "owner", "public", "caller", "op", "allowed"), matrix())
def test_access_matrix(
    emulators: dict[str, RunningEmulator],
    matrix_bucket: Callable[[str, str, bool], str],
    store_name: str,
    owner: str,
    public: bool,
    caller: str,
    op: str,
    allowed: bool,
) -> None:
    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, owner, public)
    client = _client(emulator, caller, owner)
    action = _read if op == "read" else _write
    if allowed:
        action(store_name, client, bucket)
        return
    started = time.monotonic()
    with pytest.raises(_denied_types(store_name)) as info:
        action(store_name, client, bucket)
    assert time.monotonic() - started < QUICK
    assert _status_of(info.value) == 403, info.value


# --- bucket creation -------------------------------------------------------------------


@pytest.mark.aws
def test_s3_create_bucket_rules(emulators: dict[str, RunningEmulator]) -> None:
    from botocore.exceptions import ClientError

    s3 = emulators["s3"]
    name = f"gc-{uuid.uuid4().hex[:10]}"
    s3.client(USER).create_bucket(Bucket=name)
    assert s3.bucket_owner(name) == USER
    with pytest.raises(ClientError) as taken:
        s3.client(OTHER).create_bucket(Bucket=name)
    assert taken.value.response["Error"]["Code"] == "BucketAlreadyExists"
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
    public = f"gc-{uuid.uuid4().hex[:10]}"
    s3.client(OTHER).create_bucket(Bucket=public, ACL="public-read")  # canned ACL: public
    s3.client(OTHER).put_object(Bucket=public, Key="k", Body=b"v")
    assert s3.client(None).get_object(Bucket=public, Key="k")["Body"].read() == b"v"
    s3.delete_bucket(public)


@pytest.mark.gcp
def test_gcs_create_bucket_rules(emulators: dict[str, RunningEmulator]) -> None:
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


@pytest.mark.aws
def test_s3_copy_needs_read_access_to_the_source(
    emulators: dict[str, RunningEmulator], matrix_bucket: Callable[[str, str, bool], str]
) -> None:
    from botocore.exceptions import ClientError

    s3 = emulators["s3"]
    mine = matrix_bucket("s3", USER, False)
    private = matrix_bucket("s3", OTHER, False)
    public = matrix_bucket("s3", OTHER, True)
    user = s3.client(USER)
    with pytest.raises(ClientError) as denied:
        user.copy_object(Bucket=mine, Key="stolen", CopySource={"Bucket": private, "Key": SEED_KEY})
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    user.copy_object(Bucket=mine, Key="copied", CopySource={"Bucket": public, "Key": SEED_KEY})
    assert user.get_object(Bucket=mine, Key="copied")["Body"].read() == SEED
    assert [e.op for e in s3.events(mine) if e.key == "copied"] == ["copy"]


@pytest.mark.gcp
def test_gcs_copy_and_rewrite_need_read_access_to_the_source(
    emulators: dict[str, RunningEmulator], matrix_bucket: Callable[[str, str, bool], str]
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
    emulators: dict[str, RunningEmulator], matrix_bucket: Callable[[str, str, bool], str]
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
def test_gcs_xml_style_paths_are_gated(
    emulators: dict[str, RunningEmulator], matrix_bucket: Callable[[str, str, bool], str]
) -> None:
    gcs = emulators["gcs"]
    public = matrix_bucket("gcs", OTHER, True)
    private = matrix_bucket("gcs", OTHER, False)
    seed = SEED_KEY.replace(" ", "%20")
    assert requests.get(f"{gcs.endpoint}/{public}/{seed}", timeout=10).content == SEED
    assert requests.get(f"{gcs.endpoint}/{private}/{seed}", timeout=10).status_code == 403
    assert requests.put(f"{gcs.endpoint}/{public}/x", data=b"x", timeout=10).status_code == 403
    user = {"Authorization": f"Bearer {ACCOUNTS[USER].gcs_token}"}
    put = requests.put(f"{gcs.endpoint}/{public}/x", data=b"x", headers=user, timeout=10)
    assert put.status_code == 403


# --- other ways in ---------------------------------------------------------------------


@pytest.mark.aws
def test_s3_presigned_urls(
    emulators: dict[str, RunningEmulator], matrix_bucket: Callable[[str, str, bool], str]
) -> None:
    s3 = emulators["s3"]
    bucket = matrix_bucket("s3", USER, False)
    params = {"Bucket": bucket, "Key": SEED_KEY}
    url = s3.client(USER).generate_presigned_url("get_object", Params=params)
    assert requests.get(url, timeout=10).content == SEED
    foreign = s3.client(OTHER).generate_presigned_url("get_object", Params=params)
    assert requests.get(foreign, timeout=10).status_code == 403
    put = s3.client(OTHER).generate_presigned_url("put_object", Params={**params, "Key": "x"})
    assert requests.put(put, data=b"x", timeout=10).status_code == 403


@pytest.mark.parametrize("store_name", [pytest.param(s, marks=MARKS[s]) for s in ("s3", "gcs")])
def test_denied_streaming_upload_gets_a_clean_answer(
    emulators: dict[str, RunningEmulator],
    matrix_bucket: Callable[[str, str, bool], str],
    store_name: str,
) -> None:
    """A large chunked upload without Expect: 100-continue is answered 403 in the API's
    format, not with a reset connection."""
    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, OTHER, True)

    def body() -> Iterator[bytes]:
        for _ in range(24):
            yield b"x" * (1 << 20)

    if store_name == "s3":
        url = f"{emulator.endpoint}/{bucket}/big"
        resp = requests.put(url, data=body(), timeout=30)
        assert b"<Code>AccessDenied</Code>" in resp.content
    else:
        url = f"{emulator.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name=big"
        resp = requests.post(url, data=body(), timeout=30)
        assert resp.json()["error"]["code"] == 403
    assert resp.status_code == 403


@pytest.mark.parametrize("store_name", [pytest.param(s, marks=MARKS[s]) for s in MARKS])
def test_admin_api(emulators: dict[str, RunningEmulator], store_name: str) -> None:
    emulator = emulators[store_name]
    health = requests.get(f"{emulator.endpoint}/__gate__/health", timeout=10).json()
    assert health["ok"] and health["store"] == store_name
    name = f"ga-{uuid.uuid4().hex[:10]}"
    bad = requests.post(
        f"{emulator.endpoint}/__gate__/buckets",
        json={"bucket": name, "owner": "mallory", "public": True},
        timeout=10,
    )
    assert bad.status_code == 400
    emulator.set_bucket_access(name, OTHER, public=True)
    assert emulator.bucket_owner(name) == OTHER
    state = requests.get(f"{emulator.endpoint}/__gate__/buckets", timeout=10).json()
    assert state[name] == {"owner": OTHER, "public": True}
    from pathlib import Path

    assert name in Path(emulator.record.gate_state).read_text()  # persisted for restarts
    requests.delete(f"{emulator.endpoint}/__gate__/buckets?bucket={name}", timeout=10)
    assert emulator.bucket_owner(name) is None
    assert emulator.events(name) == []


# --- classification, without processes ------------------------------------------------


def test_s3_identity() -> None:
    user = ACCOUNTS[USER].s3_access_key_id
    v4 = (
        f"AWS4-HMAC-SHA256 Credential={user}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host"
    )
    assert s3_identity({"authorization": v4}, {}) == USER
    assert (
        s3_identity({"authorization": f"AWS {ACCOUNTS[OTHER].s3_access_key_id}:sig"}, {}) == OTHER
    )
    assert s3_identity({}, {"X-Amz-Credential": [f"{user}/20260101/x"]}) == USER
    assert s3_identity({}, {}) is ANONYMOUS
    assert s3_identity({"authorization": "AWS4-HMAC-SHA256 Credential=AKIAX/1/2"}, {}) == INVALID
    assert s3_identity({"authorization": "Basic abc"}, {}) == INVALID


def test_gcs_identity() -> None:
    assert gcs_identity({"authorization": f"Bearer {ACCOUNTS[USER].gcs_token}"}) == USER
    assert gcs_identity({"authorization": "Bearer ya29.nope"}) == INVALID
    assert gcs_identity({}) is ANONYMOUS


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
