"""The S3-family emulators attached to a target file, through the real gate and
boto3: a target written from the running emulator's own accounts, loaded and attached, then
every helper a conformance test uses, with the gate's admin API out of reach. Also the
contract fixes a server that checks signatures needs (the gate's signature on anonymous
reads, its signed HEAD) and ``S3Store.create()`` on a bucket the user already owns.

Run on a store from a package with ``PYTHONPATH`` (``--store rclones3``) these check
``rclone serve s3``, which refuses what moto lets through."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.emulators.base import EmulatorError, PublicAccessUnavailable
from harness.emulators.s3 import S3Emulator
from harness.targets import Target, TargetError, dump_target, load_target
from skycore.config import SkycoreConfig
from skycore.storage import StorageAccessError, get_store_class, make_store
from tests.integration.helpers import stores_of_kind

pytestmark = pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))

DAY = 86400.0


def write_target(folder: Path, text: str, mode: int = 0o600) -> Path:
    """``text`` as a target file in ``folder`` with ``mode``."""
    path = folder / f"target-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(text)
    path.chmod(mode)
    return path


def target_of(s3: S3Emulator, folder: Path, with_other: bool = True) -> Target:
    """A target file for ``s3``'s gate as an outsider sees it (no admin token), loaded."""
    text = dump_target(
        s3.store,
        s3.config_section(USER),
        s3.config_section(OTHER) if with_other else None,
        s3.bucket_url(s3.public_dataset, OTHER) if with_other else None,
    )
    return load_target(write_target(folder, text))


@pytest.fixture
def attached(s3: S3Emulator, tmp_path: Path) -> S3Emulator:
    """``s3``'s helpers attached to a target file with both accounts."""
    emulator = type(s3).attach(target_of(s3, tmp_path))
    assert isinstance(emulator, S3Emulator)
    return emulator


def _public_bucket(
    attached: S3Emulator, local: S3Emulator, name: str, owner: str, objects: dict[str, bytes]
) -> None:
    """A public bucket made through the target; where the store makes buckets public only
    outside its API (R2's dashboard), made private there and switched public by the local
    admin API, as the user would in the dashboard."""
    try:
        attached.make_bucket(name, owner, public=True, objects=objects)
    except PublicAccessUnavailable:
        attached.make_bucket(name, owner, public=False, objects=objects)
        local.make_public(name, owner)


def test_attached_helpers_use_only_the_public_api(
    s3: S3Emulator, attached: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    assert attached.target is not None and attached.record is None
    assert attached.endpoint == s3.endpoint
    assert attached.keys[USER] == s3.keys[USER] and attached.keys[OTHER] == s3.keys[OTHER]
    for admin in (
        lambda: attached.bucket_owner("any"),
        lambda: attached.events("any"),
        lambda: attached.add_fault("outage"),
    ):
        with pytest.raises(EmulatorError, match="admin API"):
            admin()
    assert attached.config_section(OTHER).access_key_id == s3.keys[OTHER].access_key_id

    private = new_bucket_name("tgu")
    public = new_bucket_name("tgp")
    theirs = new_bucket_name("tgo")
    started = time.time()
    assert attached.make_bucket(private, objects={"a.txt": b"a"}) == s3.bucket_url(private)
    _public_bucket(attached, s3, public, USER, {"b.txt": b"bb"})
    _public_bucket(attached, s3, theirs, OTHER, {"c.txt": b"ccc"})

    attached.write_object(private, "d/e.txt", b"eeee")
    assert attached.list_keys(private) == ["a.txt", "d/e.txt"]
    assert attached.read_object(private, "d/e.txt") == b"eeee"
    attached.delete_object(private, "a.txt")
    assert attached.list_keys(private) == ["d/e.txt"]
    assert attached.read_object(public, "b.txt", None) == b"bb"
    assert attached.list_keys(theirs, USER) == ["c.txt"]
    assert attached.read_object(theirs, "c.txt", None) == b"ccc"
    with pytest.raises(s3.sdk_errors()):
        attached.write_object(theirs, "x", b"x", USER)
    with pytest.raises(s3.sdk_errors()):
        attached.read_object(private, "d/e.txt", OTHER)

    mine, others = attached.list_buckets(USER), attached.list_buckets(OTHER)
    assert {private, public} <= set(mine) and theirs not in mine
    assert theirs in others and private not in others
    for created in (mine[private], mine[public], others[theirs]):
        assert abs(created - started) < DAY  # Unix seconds, not milliseconds
    assert attached.bucket_exists(private) and not attached.bucket_exists(private, OTHER)
    assert attached.bucket_exists(theirs, OTHER)

    for name in (private, public, theirs):  # theirs: the user is refused, then other deletes
        attached.delete_bucket(name)
        assert not attached.bucket_exists(name) and not attached.bucket_exists(name, OTHER)
    attached.delete_bucket(private)  # gone already: no error


def test_delete_bucket_aborts_unfinished_uploads(
    attached: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    name = new_bucket_name("tgm")
    attached.make_bucket(name, objects={"k": b"k"})
    client = attached.client(USER)
    client.create_multipart_upload(Bucket=name, Key="big.bin")
    attached.delete_bucket(name)
    assert not attached.bucket_exists(name)


def test_a_target_without_other(
    s3: S3Emulator, tmp_path: Path, new_bucket_name: Callable[[str], str]
) -> None:
    target = target_of(s3, tmp_path, with_other=False)
    assert not target.has_other
    attached = type(s3).attach(target)
    for needs_other in (
        lambda: attached.client(OTHER),
        lambda: attached.config_section(OTHER),
        lambda: attached.make_bucket(f"tgn-{uuid.uuid4().hex[:10]}", OTHER, public=True),
        lambda: attached.list_buckets(OTHER),
        lambda: attached.rclone_config(OTHER),
    ):
        with pytest.raises(EmulatorError, match="no other account in the target file"):
            needs_other()
    name = new_bucket_name("tgn")
    attached.make_bucket(name, objects={"a": b"a"})
    assert attached.list_keys(name) == ["a"]
    attached.delete_bucket(name)
    assert not attached.bucket_exists(name)


def test_a_readable_target_file_is_refused(s3: S3Emulator, tmp_path: Path) -> None:
    text = dump_target(s3.store, s3.config_section(USER), None, None)
    path = write_target(tmp_path, text, 0o644)
    with pytest.raises(TargetError, match=f"chmod 600 {path}"):
        load_target(path)


def test_an_anonymous_read_is_forwarded_with_a_real_signature(
    s3: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    """The gate signs an anonymous read with its own key, x-amz-* headers included: a
    server that checks signatures (rclone serve s3) answers it."""
    name = new_bucket_name("tga")
    s3.make_bucket(name, OTHER, public=True, objects={"k.txt": b"public"})
    url = f"{s3.endpoint}/{name}/k.txt"
    resp = requests.get(url, headers={"x-amz-checksum-mode": "ENABLED"}, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.content == b"public"
    assert s3.list_keys(name, None) == ["k.txt"]


def test_a_copy_is_sized_by_a_signed_head(
    s3: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    """A copy's size comes from the gate's HEAD to the server, signed with its key."""
    name = new_bucket_name("tgh")
    s3.make_bucket(name, objects={"a.bin": b"x" * 1234})
    s3.client(USER).copy_object(
        Bucket=name, Key="b.bin", CopySource={"Bucket": name, "Key": "a.bin"}
    )
    copies = [e for e in s3.events(name) if e.key == "b.bin"]
    assert [(e.op, e.size) for e in copies] == [("copy", 1234)]


def test_create_of_an_owned_bucket_is_no_error(
    s3: S3Emulator, new_bucket_name: Callable[[str], str]
) -> None:
    """S3Store.create() on the user's own bucket reuses it, also where the server answers
    409 BucketAlreadyExists (rclone serve s3, AWS outside us-east-1 for some callers); the
    other account's bucket is still 'taken by another account'."""
    config_section = get_store_class(s3.store).config_section
    config = SkycoreConfig(**{config_section: s3.config_section(USER)})
    mine = new_bucket_name("tgc")
    s3.make_bucket(mine)
    make_store(s3.store, mine, config).create()
    assert s3.bucket_exists(mine)
    theirs = new_bucket_name("tgt")
    s3.make_bucket(theirs, OTHER)
    with pytest.raises(StorageAccessError, match="already taken by another account"):
        make_store(s3.store, theirs, config).create()
