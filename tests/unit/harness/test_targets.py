"""Target files: permissions refused like ssh keys, fields checked by the store's own config
model with errors that name the field, secrets found, run tags matched."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.targets import (
    TargetError,
    check_run_id,
    dump_target,
    load_target,
    new_run_id,
    run_tag,
    tag_pattern,
)

USER = {"access_key_id": "AKIAUSER", "secret_access_key": "user-secret-123", "region": "eu-west-1"}
OTHER = {"access_key_id": "AKIAOTHER", "secret_access_key": "other-secret-456"}


def write(tmp_path: Path, doc: object, mode: int = 0o600) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    path.chmod(mode)
    return path


def test_a_good_target_loads_and_other_inherits_user_fields(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, {"store": "s3", "user": USER, "other": OTHER}))
    assert target.store == "s3" and target.has_other
    other = target.section("other")
    assert other.access_key_id == "AKIAOTHER" and other.region == "eu-west-1"
    assert sorted(target.secrets()) == ["other-secret-456", "user-secret-123"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, {"store": "s3", "user": USER}, mode)
    with pytest.raises(TargetError, match=f"chmod 600 {path}"):
        load_target(path)


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        ({"store": "s3"}, "user"),
        ({"store": "nostore", "user": USER}, "store 'nostore' is not registered"),
        ({"store": "s3", "user": {**USER, "bogus": 1}}, "user.bogus"),
        ({"store": "s3", "user": USER, "bucket_prefix": "Bad_Prefix"}, "bucket_prefix"),
        ({"store": "s3", "user": USER, "extra": 1}, "extra"),
        ("- a list", "must be a mapping"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, doc: object, names: str) -> None:
    with pytest.raises(TargetError, match=names):
        load_target(write(tmp_path, doc))


def test_a_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="harness target STORE"):
        load_target(tmp_path / "nope.yaml")


def test_dump_round_trips(tmp_path: Path) -> None:
    text = dump_target("s3", USER, OTHER, "s3://public-one")
    target = load_target(write(tmp_path, text))
    assert (
        target.public_bucket == "s3://public-one" and target.section("user").region == "eu-west-1"
    )


@given(st.sampled_from(["skyconf", "ab", "x1y2"]), st.text("abcdefghij0123456789-", max_size=20))
def test_the_tag_pattern_finds_the_run_id_wherever_the_tag_is(prefix: str, rest: str) -> None:
    rid = new_run_id()
    tag = run_tag(prefix, rid)
    for name in (f"{tag}-{rest}", f"s3-sky-managed-copy-{tag}-abc123", tag):
        match = tag_pattern(prefix).search(name)
        assert match is not None and match.group(1) == rid, name
    assert tag_pattern(prefix).search(f"x{tag}") is None  # only as a whole dash-separated part


def test_a_yaml_error_never_quotes_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "store: s3\nuser:\n  secret_access_key: SUPERSECRET: x\n")
    with pytest.raises(TargetError, match="line 3") as caught:
        load_target(path)
    assert "SUPERSECRET" not in str(caught.value)


@pytest.mark.parametrize(
    "other", [{"region": "us-west-2"}, {**USER}, {"secret_access_key": USER["secret_access_key"]}]
)
def test_other_needs_credentials_of_its_own(tmp_path: Path, other: dict) -> None:
    with pytest.raises(TargetError, match="'other' has no credentials of its own"):
        load_target(write(tmp_path, {"store": "s3", "user": USER, "other": other}))


def test_other_never_inherits_a_credential(tmp_path: Path) -> None:
    doc = {"store": "azure", "user": {"account_name": "u", "account_key": "user-key-1"},
           "other": {"account_key": "other-key-2"}}  # fmt: skip
    with pytest.raises(TargetError, match=r"other\.account_name"):
        load_target(write(tmp_path, doc))


def test_run_ids_are_checked() -> None:
    assert check_run_id(new_run_id())
    with pytest.raises(TargetError, match="8 lowercase hex digits"):
        check_run_id("My-Run")
