"""The gate's request classification and identities, without processes: each store's
protocol (S3, GCS, Azure) and the gate's rules on what it classified."""

from __future__ import annotations

import pytest

from harness import emulator_registry as registry
from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from harness.gate.rules import ANONYMOUS, INVALID, Bucket, Kind, decide
from harness.store_gates.azure.protocol import classify_azure
from harness.store_gates.gcs.protocol import classify_gcs, classify_gcs_batch
from harness.store_gates.s3.protocol import classify_s3
from tests.integration.helpers import stores_of_kind


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
