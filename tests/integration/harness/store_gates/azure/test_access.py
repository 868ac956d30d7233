"""Azure's access model through the real SDK (azure-storage-blob) against Azurite behind its
gate: container public access levels (off, blob, container) set by the real API calls
(Create Container, Set Container ACL), containers the gate learns from those requests, and
the harness helpers that reach them. Signing forms: test_signing.py.

The answers asserted are Azure's: an anonymous request that its container's level does not
open gets 404 ResourceNotFound (as for a container that does not exist); another account's
key gets 403 AuthenticationFailed.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
from azure.storage.blob import ContainerClient

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.azure import ACCOUNTS, AzureEmulator
from tests.integration.harness.store_gates.azure.helpers import (
    DATA,
    FORGED,
    KEY,
    MakeContainer,
    refusal,
)
from tests.names import unique_name

pytestmark = pytest.mark.azure


def anonymous(azure: AzureEmulator, name: str, owner: str = USER) -> ContainerClient:
    """Container ``name`` of ``owner``'s storage account, reached with no credentials."""
    return ContainerClient(azure.account_url(ACCOUNTS[owner].name), name)


HIDDEN = (404, "ResourceNotFound")


def gate_row(azure: AzureEmulator, name: str) -> dict[str, Any] | None:
    """The gate's bucket-table row of ``name`` (owner, public, settings)."""
    url = f"{azure.endpoint}/__gate__/buckets"
    rows = requests.get(url, headers=azure.admin_headers(), timeout=10).json()
    row = rows.get(name)
    return dict(row) if row is not None else None


# --- public access levels -------------------------------------------------------------------


def _anonymous_reads(
    azure: AzureEmulator, make_container: MakeContainer, level: str
) -> ContainerClient:
    """A new container of public access ``level``: an anonymous client reads its blob and
    the blob's properties; returns that client."""
    anon = anonymous(azure, make_container(level))
    assert anon.download_blob(KEY).readall() == DATA
    assert anon.get_blob_client(KEY).get_blob_properties().size == len(DATA)
    return anon


def test_level_container_opens_reads_and_listing(
    azure: AzureEmulator, make_container: MakeContainer
) -> None:
    anon = _anonymous_reads(azure, make_container, "container")
    assert list(anon.list_blob_names()) == [KEY]
    assert anon.get_container_properties().public_access == "container"


def test_level_blob_opens_reads_but_not_listing(
    azure: AzureEmulator, make_container: MakeContainer
) -> None:
    anon = _anonymous_reads(azure, make_container, "blob")
    assert refusal(lambda: list(anon.list_blob_names())) == HIDDEN
    assert refusal(anon.get_container_properties) == HIDDEN


def test_level_off_opens_nothing(azure: AzureEmulator, make_container: MakeContainer) -> None:
    name = make_container(None)
    anon = anonymous(azure, name)
    assert refusal(lambda: anon.download_blob(KEY).readall()) == HIDDEN
    assert refusal(anon.get_blob_client(KEY).get_blob_properties) == HIDDEN
    assert refusal(lambda: list(anon.list_blob_names())) == HIDDEN
    assert refusal(anon.get_container_properties) == HIDDEN


@pytest.mark.parametrize("level", ["blob", "container"])
def test_anonymous_callers_never_write_nor_read_the_acl(
    azure: AzureEmulator, make_container: MakeContainer, level: str
) -> None:
    """Public levels open reads only; the container's ACL (its stored access policies) is
    the owner's at every level (Azurite alone serves it at level container)."""
    name = make_container(level)
    anon = anonymous(azure, name)
    assert refusal(lambda: anon.upload_blob("planted.txt", b"x")) == HIDDEN
    assert refusal(lambda: anon.delete_blob(KEY)) == HIDDEN
    assert refusal(anon.get_container_access_policy) == HIDDEN
    assert refusal(lambda: anon.set_container_access_policy({}, public_access="container")) == (
        HIDDEN
    )
    assert list(azure.client(USER).get_container_client(name).list_blob_names()) == [KEY]


def test_changing_the_level_takes_effect(
    azure: AzureEmulator, make_container: MakeContainer
) -> None:
    name = make_container(None)
    owner = azure.client(USER).get_container_client(name)
    anon = anonymous(azure, name)
    assert refusal(lambda: anon.download_blob(KEY).readall()) == HIDDEN

    owner.set_container_access_policy(signed_identifiers={}, public_access="container")
    assert list(anon.list_blob_names()) == [KEY]
    assert gate_row(azure, name) == {
        "owner": USER,
        "public": True,
        "settings": {"public_access": "container"},
    }

    azure.set_public_access(name, "blob")
    assert anon.download_blob(KEY).readall() == DATA
    assert refusal(lambda: list(anon.list_blob_names())) == HIDDEN

    owner.set_container_access_policy(signed_identifiers={})  # no level: off
    assert refusal(lambda: anon.download_blob(KEY).readall()) == HIDDEN
    assert gate_row(azure, name) == {
        "owner": USER,
        "public": False,
        "settings": {"public_access": "off"},
    }


# --- the gate learns containers from the real calls -------------------------------------------


def test_the_gate_learns_owner_and_level_from_the_requests(azure: AzureEmulator) -> None:
    """Create Container, Set Container ACL and Delete Container, straight through the SDK as
    a user makes them: the gate's table follows, with the owner of the storage account."""
    name = unique_name("azl")
    other = azure.client(OTHER)
    other.create_container(name, public_access="blob")
    try:
        assert gate_row(azure, name) == {
            "owner": OTHER,
            "public": True,
            "settings": {"public_access": "blob"},
        }
        assert azure.bucket_owner(name) == OTHER
        other.get_container_client(name).set_container_access_policy(signed_identifiers={})
        row = gate_row(azure, name)
        assert row is not None and not row["public"]
        assert row["settings"] == {"public_access": "off"}
    finally:
        other.delete_container(name)
    assert gate_row(azure, name) is None


def test_harness_buckets_are_made_by_the_real_calls(azure: AzureEmulator) -> None:
    """make_bucket creates the container through the SDK only; the level comes from the
    Create Container request (the admin API knows no levels)."""
    public, private = unique_name("azp"), unique_name("azq")
    try:
        azure.make_bucket(public, owner=OTHER, public=True, objects={KEY: DATA})
        azure.make_bucket(private, owner=USER, public=False, objects={KEY: DATA})
        assert gate_row(azure, public) == {
            "owner": OTHER,
            "public": True,
            "settings": {"public_access": "container"},
        }
        assert gate_row(azure, private) == {
            "owner": USER,
            "public": False,
            "settings": {"public_access": "off"},
        }
        assert azure.read_object(public, KEY, None) == DATA
        assert azure.read_object(public, KEY, USER) == DATA  # another account's: anonymously
        assert refusal(lambda: azure.read_object(private, KEY, None)) == HIDDEN
        assert refusal(lambda: azure.read_object(private, KEY, OTHER)) == HIDDEN
    finally:
        azure.delete_bucket(public)
        azure.delete_bucket(private)
    assert gate_row(azure, public) is None and gate_row(azure, private) is None


# --- the unknown caller ------------------------------------------------------------------------


def test_helpers_sign_as_expected(azure: AzureEmulator, make_container: MakeContainer) -> None:
    """The harness helpers: the owner's key works, ``unknown`` is refused as a forgery, and
    callers from another account fall back to anonymous access (they hold no key there)."""
    name = make_container(None)
    assert azure.list_keys(name, USER) == [KEY]
    assert refusal(lambda: azure.list_keys(name, UNKNOWN)) == FORGED
    assert refusal(lambda: azure.list_keys(name, OTHER)) == HIDDEN
    assert refusal(lambda: azure.list_keys(name, None)) == HIDDEN
