"""The GCS and Azure helpers attached to a target file: a target built from the
running emulator (``harness target``'s way) and loaded back, so every helper reaches the gate
as an outsider does, through the store's public API alone; any gate admin call would raise.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness.accounts import OTHER, USER
from harness.emulator_registry import get_emulator_class
from harness.emulators.base import EmulatorError
from harness.emulators.fleet import RunningEmulator
from harness.targets import Target, dump_target, load_target
from tests.conftest import RcloneRunner
from tests.integration.helpers import stores_of_kind
from tests.names import unique_name

STORES = [p for p in stores_of_kind() if p.values[0] in ("gcs", "azure")]
NO_OTHER = "no other account in the target file"


def write_target(emulator: RunningEmulator, folder: Path, with_other: bool = True) -> Target:
    """The emulator's target file (user, other if ``with_other``, its public dataset),
    written mode 0600 into ``folder`` and loaded back."""
    text = dump_target(
        emulator.store,
        emulator.config_section(USER),
        emulator.config_section(OTHER) if with_other else None,
        emulator.bucket_url(emulator.public_dataset, OTHER),
    )
    path = folder / f"target-{emulator.store}-{'both' if with_other else 'user'}.yaml"
    path.write_text(text)
    path.chmod(0o600)
    return load_target(path)


@pytest.fixture
def local(emulators: dict[str, RunningEmulator], store_name: str) -> RunningEmulator:
    """The running emulator of ``store_name`` (the gate and its admin API)."""
    return emulators[store_name]


@pytest.fixture
def attached(local: RunningEmulator, tmp_path: Path) -> RunningEmulator:
    """``local``'s store class attached to a target file of ``local``'s gate."""
    return type(local).attach(write_target(local, tmp_path))


@pytest.mark.parametrize("store_name", STORES)
def test_an_attached_emulator_has_the_targets_accounts_and_no_admin_api(
    local: RunningEmulator, attached: RunningEmulator
) -> None:
    assert attached.target is not None
    assert attached.record is None
    for owner in (USER, OTHER):
        assert attached.config_section(owner) == local.config_section(owner)
        assert attached.bucket_url("some-bucket", owner) == local.bucket_url("some-bucket", owner)
    assert attached.config_section(USER) != attached.config_section(OTHER)
    with pytest.raises(EmulatorError, match="admin API"):
        attached.bucket_owner("some-bucket")
    with pytest.raises(EmulatorError, match="admin API"):
        attached.faults()


@pytest.mark.parametrize("store_name", STORES)
def test_attached_helpers_make_fill_list_and_delete_buckets(
    local: RunningEmulator, attached: RunningEmulator, rclone: RcloneRunner
) -> None:
    em = attached
    private, public, theirs = (unique_name(p) for p in ("tgp", "tgu", "tgo"))
    objects = {"a.txt": b"alpha", "dir/b.txt": b"beta"}
    started = time.time()
    try:
        assert em.make_bucket(private, USER, objects=objects) == local.bucket_url(private, USER)
        em.make_bucket(public, USER, public=True, objects=objects)
        em.make_bucket(theirs, OTHER, public=True, objects=objects)
        # Created through the store's own API, the gate learnt owner and access from it.
        assert local.bucket_owner(private) == USER
        assert local.bucket_owner(theirs) == OTHER

        assert em.bucket_exists(private, USER)
        assert em.list_keys(private) == sorted(objects)
        assert em.read_object(private, "dir/b.txt") == b"beta"
        em.write_object(private, "c.txt", b"gamma")
        em.delete_object(private, "a.txt")
        assert em.list_keys(private) == ["c.txt", "dir/b.txt"]
        assert local.read_object(private, "c.txt") == b"gamma"
        with pytest.raises(em.sdk_errors()):
            em.list_keys(private, None)  # private: the credentials above were needed

        assert em.list_keys(public, None) == sorted(objects)
        assert em.list_keys(theirs, None) == sorted(objects)
        assert em.read_object(theirs, "a.txt", USER) == b"alpha"  # public-not-by-user
        em.write_object(theirs, "mine.txt", b"x", OTHER)
        assert em.list_keys(theirs, OTHER) == sorted([*objects, "mine.txt"])

        mine, others = em.list_buckets(USER), em.list_buckets(OTHER)
        assert {private, public} <= set(mine)
        assert theirs in others
        for created in (mine[private], mine[public], others[theirs]):
            assert started - 60 <= created <= time.time() + 60
        if em.store == "azure":  # one storage account per owner
            assert theirs not in mine
            assert private not in others

        run = rclone(em, "lsf", "-R", "--files-only", f"remote:{private}", bucket=private)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["c.txt", "dir/b.txt"]
        run = rclone(em, "lsf", "-R", "--files-only", f"remote:{theirs}", owner=None, bucket=theirs)
        assert run.returncode == 0, run.stderr
        assert sorted(run.stdout.split()) == sorted([*objects, "mine.txt"])
    finally:
        for name in (private, public, theirs):
            em.delete_bucket(name)  # the other's bucket too: user's credentials, then other's
    assert not em.bucket_exists(private, USER)
    assert not em.bucket_exists(theirs, OTHER)
    assert not local.bucket_exists(theirs, OTHER)
    em.delete_bucket(theirs)  # gone: no error


@pytest.mark.parametrize("store_name", STORES)
def test_a_target_without_other_refuses_the_other_account_clearly(
    local: RunningEmulator, tmp_path: Path
) -> None:
    target = write_target(local, tmp_path, with_other=False)
    assert not target.has_other
    em = type(local).attach(target)
    name = unique_name("tgn")
    calls: dict[str, Any] = {
        "config_section": lambda: em.config_section(OTHER),
        "client": lambda: em.client(OTHER),
        "bucket_url": lambda: em.bucket_url(name, OTHER),
        "make_bucket": lambda: em.make_bucket(name, OTHER, public=True),
        "list_buckets": lambda: em.list_buckets(OTHER),
        "bucket_exists": lambda: em.bucket_exists(name, OTHER),
        "list_keys": lambda: em.list_keys(name, OTHER),
        "read_object": lambda: em.read_object(name, "k", OTHER),
        "write_object": lambda: em.write_object(name, "k", b"x", OTHER),
        "delete_object": lambda: em.delete_object(name, "k", OTHER),
        "rclone_config": lambda: em.rclone_config(OTHER, name),
    }
    for what, call in calls.items():
        with pytest.raises(EmulatorError, match=NO_OTHER) as raised:
            call()
        assert str(target.path) in str(raised.value), what
    assert not local.bucket_exists(name, OTHER)
    # The user's side works without the other account.
    assert not em.bucket_exists(name, USER)
    em.delete_bucket(name)
    assert em.config_section(USER) == local.config_section(USER)


def attach_plain(tmp_path: Path, store: str, user: dict[str, Any], other: Any) -> Any:
    """``store``'s emulator class attached to a target file of these sections."""
    path = tmp_path / f"{store}.yaml"
    path.write_text(dump_target(store, user, other, None))
    path.chmod(0o600)
    return get_emulator_class(store).attach(load_target(path))


def test_gcs_attached_without_an_endpoint_reaches_google(tmp_path: Path) -> None:
    em = attach_plain(
        tmp_path, "gcs", {"project": "my-proj", "access_token": "ya29.u"}, {"access_token": "o"}
    )
    assert em.endpoint == "https://storage.googleapis.com"
    assert em.config_section(OTHER).access_token == "o"
    assert em.config_section(OTHER).project == "my-proj"
    assert em.bucket_url("b", OTHER) == "gs://b"
    conf = em.rclone_config(USER)
    assert "endpoint = https://storage.googleapis.com/storage/v1/" in conf
    assert "access_token = ya29.u" in conf
    assert "project_number = my-proj" in conf


def test_azure_attached_uses_the_targets_accounts_and_endpoints(tmp_path: Path) -> None:
    user = {"account_name": "acme", "account_key": "dXNlcg=="}
    em = attach_plain(tmp_path, "azure", user, {"account_name": "rival", "account_key": "b3Ro"})
    assert em.endpoint == "https://acme.blob.core.windows.net"
    assert em.account_url("rival") == "https://rival.blob.core.windows.net"
    assert em.bucket_url("c", USER) == "azure://acme/c"
    assert em.bucket_url("c", OTHER) == "azure://rival/c"
    assert em.config_section(OTHER).account_key == "b3Ro"
    conf = em.rclone_config(OTHER)
    assert "account = rival" in conf
    assert "endpoint = https://rival.blob.core.windows.net" in conf
    assert "key = b3Ro" in conf
