"""ListBuckets as the S3 gate answers it: the caller's buckets only, prefix-filtered, then
paginated with max-buckets and continuation tokens; and S3 requests as IAM actions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.store_gates.s3.acl import S3_ACCOUNTS
from harness.store_gates.s3.listing import ListingError, list_buckets_xml, listing_params
from harness.store_gates.s3.requests import S3Detail, classify_s3

NAMES = st.from_regex(r"[a-z0-9][a-z0-9-]{2,20}", fullmatch=True)


def _upstream(names: list[str]) -> bytes:
    rows = "".join(
        f"<Bucket><Name>{n}</Name><CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket>"
        for n in names
    )
    return f"<ListAllMyBucketsResult><Buckets>{rows}</Buckets></ListAllMyBucketsResult>".encode()


def _page(xml: bytes) -> tuple[list[str], str | None]:
    names = [m.decode() for m in re.findall(rb"<Name>(.*?)</Name>", xml)]
    token = re.search(rb"<ContinuationToken>(.*?)</ContinuationToken>", xml)
    return names, token.group(1).decode() if token else None


@given(
    mine=st.sets(NAMES, max_size=12),
    theirs=st.sets(NAMES, max_size=12),
    limit=st.integers(1, 5),
    prefix=st.sampled_from(["", "a", "b1", "z"]),
)
def test_pages_cover_the_callers_buckets_once_in_order(
    mine: set[str], theirs: set[str], limit: int, prefix: str
) -> None:
    upstream = _upstream(sorted(mine | theirs, reverse=True))
    seen: list[str] = []
    token: str | None = None
    for _ in range(30):
        query = {"max-buckets": [str(limit)], "prefix": [prefix]}
        if token:
            query["continuation-token"] = [token]
        names, token = _page(list_buckets_xml(upstream, USER, mine, query))
        assert len(names) <= limit
        seen += names
        if token is None:
            break
    assert seen == sorted(n for n in mine if n.startswith(prefix))


def test_owner_is_the_caller_and_bad_parameters_are_refused() -> None:
    xml = list_buckets_xml(_upstream(["b"]), OTHER, {"b"}, {})
    assert S3_ACCOUNTS[OTHER].canonical_id.encode() in xml
    for bad in ("0", "10001", "x"):
        with pytest.raises(ListingError) as info:
            listing_params({"max-buckets": [bad]})
        assert info.value.verdict.status == 400


@pytest.mark.parametrize(
    ("method", "path", "headers", "op", "action"),
    [
        ("GET", "/", {}, "ListBuckets", "s3:ListAllMyBuckets"),
        ("GET", "/b?list-type=2&prefix=a", {}, "ListObjects", "s3:ListBucket"),
        ("HEAD", "/b", {}, "HeadBucket", "s3:ListBucket"),
        ("PUT", "/b", {}, "CreateBucket", "s3:CreateBucket"),
        ("GET", "/b?acl", {}, "GetBucketAcl", "s3:GetBucketAcl"),
        ("PUT", "/b?acl", {}, "PutBucketAcl", "s3:PutBucketAcl"),
        ("PUT", "/b?policy", {}, "PutBucketPolicy", "s3:PutBucketPolicy"),
        ("DELETE", "/b?policy", {}, "DeleteBucketPolicy", "s3:DeleteBucketPolicy"),
        ("PUT", "/b?cors", {}, "PutBucketCors", "s3:PutBucketCORS"),
        ("DELETE", "/b?cors", {}, "DeleteBucketCors", "s3:PutBucketCORS"),
        (
            "PUT",
            "/b?ownershipControls",
            {},
            "PutBucketOwnershipControls",
            "s3:PutBucketOwnershipControls",
        ),
        (
            "DELETE",
            "/b?publicAccessBlock",
            {},
            "DeletePublicAccessBlock",
            "s3:PutBucketPublicAccessBlock",
        ),
        ("GET", "/b?uploads", {}, "ListMultipartUploads", "s3:ListBucketMultipartUploads"),
        ("GET", "/b?versions", {}, "ListObjectVersions", "s3:ListBucketVersions"),
        ("POST", "/b?delete", {}, "DeleteObjects", "s3:DeleteObject"),
        ("GET", "/b/k", {}, "GetObject", "s3:GetObject"),
        ("GET", "/b/k?versionId=1", {}, "GetObject", "s3:GetObjectVersion"),
        ("GET", "/b/k?acl", {}, "GetObjectAcl", "s3:GetObjectAcl"),
        ("PUT", "/b/k?acl", {}, "PutObjectAcl", "s3:PutObjectAcl"),
        ("GET", "/b/k?tagging", {}, "GetObjectTagging", "s3:GetObjectTagging"),
        ("PUT", "/b/k?tagging", {}, "PutObjectTagging", "s3:PutObjectTagging"),
        ("DELETE", "/b/k?tagging", {}, "DeleteObjectTagging", "s3:DeleteObjectTagging"),
        ("PUT", "/b/k", {"x-amz-copy-source": "/s/a%20b"}, "CopyObject", "s3:PutObject"),
        ("POST", "/b/k?uploads", {}, "CreateMultipartUpload", "s3:PutObject"),
        ("DELETE", "/b/k?uploadId=u", {}, "AbortMultipartUpload", "s3:AbortMultipartUpload"),
        ("GET", "/b/k?uploadId=u", {}, "ListParts", "s3:ListMultipartUploadParts"),
        ("OPTIONS", "/b/k", {}, "OptionsObject", "s3:*"),
    ],
)
def test_requests_are_iam_actions(
    method: str, path: str, headers: dict[str, str], op: str, action: str | None
) -> None:
    access = classify_s3(method, path, headers)
    assert isinstance(access.detail, S3Detail)
    assert (access.detail.op, access.action) == (op, action)
    if op == "CopyObject":
        assert access.detail.source == ("s", "a b") and access.sources == ("s",)
