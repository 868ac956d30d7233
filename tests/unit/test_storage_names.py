"""Bucket-name rules per store and URL parsing (pure, hypothesis where it fits)."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore.storage import BucketNameError, StorageSpecError, parse_url, store_names
from skycore.storage.azure import azure_name_problem
from skycore.storage.common import bucket_name_problem, validate_bucket_name
from skycore.storage.gcs import gcs_name_problem
from skycore.storage.r2 import r2_name_problem
from skycore.storage.s3 import s3_name_problem


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
        validate_bucket_name("s3", "Bad..Name", "file_mounts./x.name")
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


@given(st.sampled_from(store_names()), st.text(max_size=80))
def test_name_rules_never_crash(kind: str, name: str) -> None:
    problem = bucket_name_problem(kind, name)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        assert 3 <= len(name) <= 222 and name == name.lower()


@pytest.mark.parametrize(
    ("url", "kind", "bucket", "prefix", "account"),
    [
        ("s3://b", "s3", "b", "", None),
        ("s3://b/a/b.txt", "s3", "b", "a/b.txt", None),
        ("gs://b/dir/", "gcs", "b", "dir", None),
        ("azure://acct/cont/x", "azure", "cont", "x", "acct"),
        ("r2://b/ckpt/", "r2", "b", "ckpt", None),
    ],
)
def test_parse_url(url: str, kind: str, bucket: str, prefix: str, account: str | None) -> None:
    u = parse_url(url)
    assert (u.store, u.bucket, u.prefix, u.account) == (kind, bucket, prefix, account)
    assert parse_url(str(u)) == u


@pytest.mark.parametrize(
    "url", ["http://x/y", "s3://", "azure://acct", "azure://acct/", "not a url", "r2://"]
)
def test_parse_url_errors(url: str) -> None:
    with pytest.raises(StorageSpecError):
        parse_url(url)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ab", "3 to 63"),
        ("a" * 64, "3 to 63"),
        ("with.dot", "lowercase letters, digits and hyphens"),
        ("Upper", "lowercase letters, digits and hyphens"),
        ("-abc", "begin and end"),
    ],
)
def test_r2_name_rules(name: str, problem: str) -> None:
    assert problem in (r2_name_problem(name) or "")
    assert r2_name_problem("my-r2-bucket-01") is None


def test_unknown_scheme_lists_the_registered_ones() -> None:
    with pytest.raises(StorageSpecError) as e:
        parse_url("ftp://b/x", "file_mounts./d")
    msg = str(e.value)
    assert "file_mounts./d" in msg and "ftp://" in msg
    for scheme in ("s3://", "gs://", "azure://", "r2://"):
        assert scheme in msg


def test_unknown_store_is_a_clear_error_listing_the_registered_ones() -> None:
    from skycore.storage import UnknownStoreError, get_store_class

    with pytest.raises(UnknownStoreError) as e:
        get_store_class("b2", "file_mounts./d.store")
    msg = str(e.value)
    assert "file_mounts./d.store" in msg and "'b2'" in msg
    assert all(name in msg for name in store_names())
