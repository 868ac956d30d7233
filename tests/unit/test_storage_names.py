"""Bucket-name rules per store and URL parsing (pure, hypothesis where it fits)."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore.storage import BucketNameError, StorageSpecError, StoreType, parse_url
from skycore.storage.common import (
    azure_name_problem,
    bucket_name_problem,
    gcs_name_problem,
    s3_name_problem,
    validate_bucket_name,
)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ab", "3 to 63"),
        ("a" * 64, "3 to 63"),
        ("My-bucket", "lowercase"),
        ("under_score", "lowercase"),
        ("-abc", "begin and end"),
        ("abc.", "begin and end"),
        ("a..b", "adjacent dots"),
        ("192.168.5.4", "IP address"),
        ("xn--abc", "must not start"),
        ("abc-s3alias", "must not end"),
    ],
)
def test_s3_invalid(name: str, problem: str) -> None:
    assert problem in (s3_name_problem(name) or "")


@pytest.mark.parametrize("name", ["abc", "my.bucket-1", "a" * 63, "1-2-3"])
def test_s3_valid(name: str) -> None:
    assert s3_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ab", "3 to 63"),
        ("a" * 64, "3 to 63"),
        ("a." + "b" * 64, "each dot-separated part"),
        ("goog-bucket", "goog"),
        ("my-google-bucket", "google"),
        ("10.0.0.1", "IP address"),
        ("Upper", "lowercase"),
    ],
)
def test_gcs_invalid(name: str, problem: str) -> None:
    assert problem in (gcs_name_problem(name) or "")


@pytest.mark.parametrize("name", ["my_bucket", "a.b.c", "x" * 63, ("a" * 60 + ".") * 3 + "abc"])
def test_gcs_valid(name: str) -> None:
    assert gcs_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ab", "3 to 63"),
        ("a.b.c", "hyphens"),
        ("a--b", "consecutive"),
        ("-ab", "begin"),
        ("A12", "lowercase"),
    ],
)
def test_azure_invalid(name: str, problem: str) -> None:
    assert problem in (azure_name_problem(name) or "")


def test_validate_raises_one_paragraph() -> None:
    with pytest.raises(BucketNameError) as info:
        validate_bucket_name(StoreType.S3, "Bad..Name", "file_mounts./x.name")
    assert str(info.value).startswith("file_mounts./x.name: 'Bad..Name' is not a valid S3")
    assert info.value.exit_code == 2


S3_RE = re.compile(r"^(?!xn--|sthree-)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@given(st.text(string.ascii_letters + string.digits + ".-_", min_size=0, max_size=70))
def test_s3_rule_matches_reference_regex(name: str) -> None:
    expected = (
        bool(S3_RE.match(name))
        and ".." not in name
        and not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name)
        and not name.endswith(("-s3alias", "--ol-s3", ".mrap"))
    )
    assert (s3_name_problem(name) is None) == expected


@given(st.sampled_from(list(StoreType)), st.text(max_size=80))
def test_name_rules_never_crash(kind: StoreType, name: str) -> None:
    problem = bucket_name_problem(kind, name)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        assert 3 <= len(name) <= 222 and name == name.lower()


@pytest.mark.parametrize(
    ("url", "kind", "bucket", "prefix", "account"),
    [
        ("s3://b", StoreType.S3, "b", "", None),
        ("s3://b/a/b.txt", StoreType.S3, "b", "a/b.txt", None),
        ("gs://b/dir/", StoreType.GCS, "b", "dir", None),
        ("azure://acct/cont/x", StoreType.AZURE, "cont", "x", "acct"),
    ],
)
def test_parse_url(
    url: str, kind: StoreType, bucket: str, prefix: str, account: str | None
) -> None:
    u = parse_url(url)
    assert (u.store, u.bucket, u.prefix, u.account) == (kind, bucket, prefix, account)
    assert parse_url(str(u)) == u


@pytest.mark.parametrize(
    "url", ["http://x/y", "s3://", "azure://acct", "azure://acct/", "not a url"]
)
def test_parse_url_errors(url: str) -> None:
    with pytest.raises(StorageSpecError):
        parse_url(url)
