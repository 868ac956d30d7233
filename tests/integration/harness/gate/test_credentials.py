"""Signatures and tokens through the gate, as the real services check them: wrong secrets,
presigned URLs, malformed and unknown credentials, streaming uploads, GCS bearer tokens."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from tests.integration.harness.gate.helpers import (
    SEED,
    SEED_KEY,
    Emulators,
    MatrixBucket,
    xml_error,
)
from tests.integration.helpers import stores_of_kind


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
    assert xml_error(requests.put(tampered, data=b"x", timeout=10)) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert xml_error(requests.put(forged, data=b"x", timeout=10)) == (403, "SignatureDoesNotMatch")
    assert requests.put(forged_old, data=b"x", timeout=10).status_code == 403
    time.sleep(2.5)
    expired = requests.get(short, timeout=10)
    assert xml_error(expired) == (403, "AccessDenied")
    assert b"Request has expired" in expired.content
    assert xml_error(requests.put(short_put, data=b"x", timeout=10)) == (403, "AccessDenied")
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
        assert xml_error(resp) == (400, "AuthorizationHeaderMalformed"), auth
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
