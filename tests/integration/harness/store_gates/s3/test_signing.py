"""Every S3 header and query signing form the SDKs send, through the real gate and moto,
on S3 and R2: SigV4 with X-Amz-Date or Date, presigned SigV4, SigV2 header (bucket- and
object-level, with Date or x-amz-date), presigned SigV2. Each form once as the SDK sends it
(it works) and forged (S3's error code). POST-policy uploads: test_post_policy.py."""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any

import pytest
import requests

from harness.accounts import USER
from harness.emulators.s3 import S3Emulator
from tests.integration.harness.store_gates.s3.signing_helpers import (
    flip,
    sdk_error,
    send,
    signing_client,
    xml_error,
    xml_message,
)
from tests.integration.helpers import stores_of_kind

pytestmark = pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))


SKEW = 20 * 60  # beyond the 15 minutes S3 allows


# --- SigV4 -----------------------------------------------------------------------------------


def test_sigv4_x_amz_date(s3: S3Emulator, bucket: str) -> None:
    """boto3 s3v4 (X-Amz-Date) works for bucket and object calls; a wrong secret, an altered
    signature and a signed date 20 minutes off are refused as S3 does."""
    client = signing_client(s3, "s3v4")
    client.put_object(Bucket=bucket, Key="v4/a b+ü.txt", Body=b"v4")
    assert client.get_object(Bucket=bucket, Key="v4/a b+ü.txt")["Body"].read() == b"v4"
    listed = client.list_objects_v2(Bucket=bucket, Prefix="v4/")["Contents"]
    assert [o["Key"] for o in listed] == ["v4/a b+ü.txt"]
    wrong = signing_client(s3, "s3v4", secret="not-the-secret")
    assert sdk_error(lambda: wrong.list_objects_v2(Bucket=bucket)) == (
        403,
        "SignatureDoesNotMatch",
    )
    request = _signed(s3, "v4", "GET", f"/{bucket}?list-type=2")
    altered = dict(request.headers)
    altered["Authorization"] = re.sub(
        r"Signature=(\w)", lambda m: "Signature=" + flip(m[1]), altered["Authorization"]
    )
    resp = requests.get(request.url, headers=altered, timeout=10)
    assert xml_error(resp) == (403, "SignatureDoesNotMatch")
    old = _signed(s3, "v4", "GET", f"/{bucket}?list-type=2", shift=-SKEW)
    assert xml_error(send(old)) == (403, "RequestTimeTooSkewed")


def test_sigv4_date_header(s3: S3Emulator, bucket: str) -> None:
    """SigV4 signed with a Date header instead of X-Amz-Date (botocore's signer) works for a
    listing and an upload; a wrong secret, a Date changed after signing and a Date 20
    minutes off are refused."""
    listing = _works_with_the_other_date(s3, bucket, "v4", "?list-type=2", "Date", "date")
    assert "X-Amz-Date" not in listing.headers and "Date" in listing.headers
    assert "date" in listing.headers["Authorization"]
    wrong = _signed(s3, "v4", "GET", f"/{bucket}?list-type=2", swap_date=True, secret="nope")
    assert xml_error(send(wrong)) == (403, "SignatureDoesNotMatch")


def _signed(
    s3: S3Emulator,
    version: str,
    method: str,
    path: str,
    swap_date: bool = False,
    shift: float = 0,
    secret: str | None = None,
    body: bytes = b"",
) -> Any:
    """A request signed by botocore at now + ``shift``. ``version`` "v4": S3SigV4Auth with
    X-Amz-Date, or with an RFC 1123 Date header when ``swap_date`` (the signer derives its
    timestamp from it and signs the Date header). "v2": HmacV1Auth, path style, with a Date
    header, or with ``x-amz-date`` and an empty Date line when ``swap_date``."""
    from botocore.auth import HmacV1Auth, S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    key = s3.keys[USER]
    credentials = Credentials(key.access_key_id, secret or key.secret_access_key)
    request = AWSRequest(method=method, url=f"{s3.endpoint}{path}", data=body)
    if version == "v4":
        if swap_date:
            request.headers["Date"] = formatdate(usegmt=True)
        with _clock(shift):
            S3SigV4Auth(credentials, "s3", s3.region).add_auth(request)
        return request
    date = formatdate(time.time() + shift, usegmt=True)

    class Signer(HmacV1Auth):
        def _get_date(self) -> str:
            return "" if swap_date else date

    bucket_level = path.count("/") == 1 and len(path) > 1
    request.auth_path = path + "/" if bucket_level else path
    if swap_date:
        request.headers["x-amz-date"] = date
    Signer(credentials).add_auth(request)
    if swap_date:
        del request.headers["Date"]  # the signer set it empty: send none
    return request


def _works_with_the_other_date(
    s3: S3Emulator, bucket: str, version: str, query: str, header: str, prefix: str
) -> Any:
    """Signed with ``swap_date`` (its date in ``header``), a listing of ``bucket`` (with
    ``query``) and an upload under ``prefix`` work; ``header`` changed after signing is
    SignatureDoesNotMatch, a date 20 minutes off RequestTimeTooSkewed, an upload with a
    wrong secret SignatureDoesNotMatch and writes nothing. Returns the signed listing."""
    listing_path = f"/{bucket}{query}"
    listing = _signed(s3, version, "GET", listing_path, swap_date=True)
    resp = send(listing)
    assert resp.status_code == 200, resp.text
    assert b"<Key>seed</Key>" in resp.content
    put = _signed(s3, version, "PUT", f"/{bucket}/{prefix}/put", True, body=prefix.encode())
    assert send(put).status_code == 200
    assert s3.read_object(bucket, f"{prefix}/put") == prefix.encode()
    moved = dict(listing.headers)
    moved[header] = formatdate(time.time() - 5, usegmt=True)
    assert xml_error(requests.get(listing.url, headers=moved, timeout=10)) == (
        403,
        "SignatureDoesNotMatch",
    )
    skewed = _signed(s3, version, "GET", listing_path, swap_date=True, shift=-SKEW)
    assert xml_error(send(skewed)) == (403, "RequestTimeTooSkewed")
    forged = _signed(s3, version, "PUT", f"/{bucket}/{prefix}/forged", True, secret="x")
    assert xml_error(send(forged)) == (403, "SignatureDoesNotMatch")
    assert f"{prefix}/forged" not in s3.list_keys(bucket)
    return listing


def test_sigv4_presigned_query(s3: S3Emulator, bucket: str) -> None:
    """Presigned SigV4 URLs (boto3) for a GET, a PUT and a bucket listing work; an altered
    signature, a wrong secret and an expired URL are refused and write nothing."""
    client = signing_client(s3, "s3v4")
    get = client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "seed"})
    assert requests.get(get, timeout=10).content == b"seed"
    listing = client.generate_presigned_url("list_objects_v2", Params={"Bucket": bucket})
    assert b"<Key>seed</Key>" in requests.get(listing, timeout=10).content
    params = {"Bucket": bucket, "Key": "q4/ok"}
    put = client.generate_presigned_url("put_object", Params=params)
    assert requests.put(put, data=b"q4", timeout=10).status_code == 200
    altered = re.sub(r"X-Amz-Signature=(\w)", lambda m: "X-Amz-Signature=" + flip(m[1]), put)
    assert xml_error(requests.put(altered, data=b"x", timeout=10)) == (403, "SignatureDoesNotMatch")
    wrong = signing_client(s3, "s3v4", secret="nope").generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "q4/forged"}
    )
    assert xml_error(requests.put(wrong, data=b"x", timeout=10)) == (403, "SignatureDoesNotMatch")
    with _clock(-120):  # signed two minutes ago, valid for one
        short = client.generate_presigned_url(
            "put_object", Params={"Bucket": bucket, "Key": "q4/expired"}, ExpiresIn=60
        )
    expired = requests.put(short, data=b"x", timeout=10)
    assert xml_error(expired) == (403, "AccessDenied")
    assert xml_message(expired) == "Request has expired"
    keys = s3.list_keys(bucket)
    assert "q4/ok" in keys and not {"q4/forged", "q4/expired"} & set(keys)


@contextmanager
def _clock(shift: float) -> Iterator[None]:
    """botocore's signers see the time now + ``shift`` seconds (SigV4 and SigV2 clocks)."""
    from unittest import mock

    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    real = time.time
    with (
        mock.patch(
            "botocore.auth.get_current_datetime",
            return_value=now + datetime.timedelta(seconds=shift),
        ),
        mock.patch("botocore.auth.time.time", lambda: real() + shift),
    ):
        yield


# --- SigV2 -----------------------------------------------------------------------------------


def test_sigv2_header_bucket_level(s3: S3Emulator, bucket: str) -> None:
    """boto3 's3' (SigV2) on bucket-level requests, whose canonical resource is ``/bucket/``
    with its sub-resources (acl, uploads, versions): they work; a wrong secret is
    SignatureDoesNotMatch, and so is a bucket signature replayed on ``?acl``."""
    client = signing_client(s3, "s3")
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["seed"]
    assert [o["Key"] for o in client.list_objects(Bucket=bucket)["Contents"]] == ["seed"]
    client.head_bucket(Bucket=bucket)
    if s3.access_features.any_acls:  # a store without ACLs answers ?acl NotImplemented
        assert client.get_bucket_acl(Bucket=bucket)["Grants"]
    assert "Uploads" not in client.list_multipart_uploads(Bucket=bucket)
    assert client.list_object_versions(Bucket=bucket)["Name"] == bucket
    assert bucket in {b["Name"] for b in client.list_buckets()["Buckets"]}
    wrong = signing_client(s3, "s3", secret="not-the-secret")
    assert sdk_error(lambda: wrong.list_objects_v2(Bucket=bucket)) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert sdk_error(lambda: wrong.head_bucket(Bucket=bucket)) == (403, "403")
    signed = _signed(s3, "v2", "GET", f"/{bucket}")
    assert send(signed).status_code == 200
    replayed = requests.get(f"{signed.url}?acl", headers=dict(signed.headers), timeout=10)
    assert xml_error(replayed) == (403, "SignatureDoesNotMatch")


def test_sigv2_header_object_level(s3: S3Emulator, bucket: str) -> None:
    """SigV2 object calls with every sub-resource botocore signs (uploads, uploadId,
    partNumber, tagging, delete, response-* overrides) work; a response-* override added to
    a signed URL is SignatureDoesNotMatch, a parameter S3 does not sign is not."""
    client = signing_client(s3, "s3")
    key = "v2/a b+ü.txt"
    client.put_object(Bucket=bucket, Key=key, Body=b"v2", Metadata={"who": "v2"})
    got = client.get_object(Bucket=bucket, Key=key, ResponseContentType="text/x-v2")
    assert got["Body"].read() == b"v2" and got["ContentType"] == "text/x-v2"
    assert client.head_object(Bucket=bucket, Key=key)["Metadata"] == {"who": "v2"}
    client.put_object_tagging(
        Bucket=bucket, Key=key, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}
    )
    assert client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"] == [
        {"Key": "k", "Value": "v"}
    ]
    upload = client.create_multipart_upload(Bucket=bucket, Key="v2/multi")["UploadId"]
    part = client.upload_part(
        Bucket=bucket, Key="v2/multi", UploadId=upload, PartNumber=1, Body=b"part"
    )
    assert client.list_parts(Bucket=bucket, Key="v2/multi", UploadId=upload)["Parts"]
    client.complete_multipart_upload(
        Bucket=bucket,
        Key="v2/multi",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.read_object(bucket, "v2/multi") == b"part"
    deleted = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "v2/multi"}]})
    assert [d["Key"] for d in deleted["Deleted"]] == ["v2/multi"]
    client.delete_object(Bucket=bucket, Key=key)
    signed = _signed(s3, "v2", "GET", f"/{bucket}/seed")
    assert send(signed).content == b"seed"
    headers = dict(signed.headers)
    unsigned = requests.get(f"{signed.url}?x-id=GetObject", headers=headers, timeout=10)
    assert unsigned.content == b"seed"
    override = requests.get(
        f"{signed.url}?response-content-type=text/evil", headers=headers, timeout=10
    )
    assert xml_error(override) == (403, "SignatureDoesNotMatch")
    wrong = signing_client(s3, "s3", secret="not-the-secret")
    assert sdk_error(lambda: wrong.put_object(Bucket=bucket, Key="v2/forged", Body=b"x")) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert s3.list_keys(bucket) == ["seed"]


def test_sigv2_x_amz_date(s3: S3Emulator, bucket: str) -> None:
    """SigV2 with x-amz-date (Date line empty, x-amz-date signed as an amz header) works on a
    bucket listing and an upload; an x-amz-date changed after signing is
    SignatureDoesNotMatch, one 20 minutes off RequestTimeTooSkewed, none at all AccessDenied."""
    listing = _works_with_the_other_date(s3, bucket, "v2", "", "x-amz-date", "amz")
    assert "Date" not in listing.headers
    undated = {k: v for k, v in listing.headers.items() if k.lower() != "x-amz-date"}
    assert xml_error(requests.get(listing.url, headers=undated, timeout=10)) == (
        403,
        "AccessDenied",
    )


def test_sigv2_presigned_query(s3: S3Emulator, bucket: str) -> None:
    """Presigned SigV2 URLs (boto3 's3'): a GET with a response-* override, a bucket
    listing, a PUT whose metadata travels as signed x-amz-meta-* query parameters; an
    altered signature, a tampered metadata value and an expired URL are refused."""
    client = signing_client(s3, "s3")
    get = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "seed", "ResponseContentType": "a/b"}
    )
    got = requests.get(get, timeout=10)
    assert got.content == b"seed" and got.headers["Content-Type"] == "a/b"
    listing = client.generate_presigned_url("list_objects", Params={"Bucket": bucket})
    assert b"<Key>seed</Key>" in requests.get(listing, timeout=10).content
    params = {"Bucket": bucket, "Key": "q2/meta", "Metadata": {"who": "q2"}}
    put = client.generate_presigned_url("put_object", Params=params)
    assert "x-amz-meta-who=q2" in put
    assert requests.put(put, data=b"q2", timeout=10).status_code == 200
    assert s3.read_object(bucket, "q2/meta") == b"q2"
    altered = put.replace("Signature=", "Signature=A", 1)
    assert xml_error(requests.put(altered, data=b"x", timeout=10)) == (403, "SignatureDoesNotMatch")
    tampered = put.replace("x-amz-meta-who=q2", "x-amz-meta-who=evil")
    assert xml_error(requests.put(tampered, data=b"x", timeout=10)) == (
        403,
        "SignatureDoesNotMatch",
    )
    with _clock(-120):  # signed two minutes ago, valid for one
        expired = client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": "seed"}, ExpiresIn=60
        )
    resp = requests.get(expired, timeout=10)
    assert xml_error(resp) == (403, "AccessDenied")
    assert xml_message(resp) == "Request has expired"
