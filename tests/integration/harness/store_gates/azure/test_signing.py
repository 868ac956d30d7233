"""Every signing form the Azure SDK sends, verified by the gate as Azure does, with a forgery
of each: Shared Key (the account key), account SAS, service SAS for a container and for a
blob, and user-delegation SAS (refused: the local cloud issues no delegation keys).

Forgeries get Azure's 403 AuthenticationFailed, public container or not (Azurite alone serves
a public container whatever the credentials say); a valid SAS used beyond its permissions
gets 403 AuthorizationPermissionMismatch.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import (
    AccountSasPermissions,
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    ResourceTypes,
    UserDelegationKey,
    generate_account_sas,
    generate_blob_sas,
    generate_container_sas,
)

from harness.accounts import OTHER, USER
from harness.emulators.azure import ACCOUNTS, UNKNOWN_KEY, AzureEmulator, npm_dir
from tests.integration.harness.store_gates.azure.helpers import (
    DATA,
    FORGED,
    KEY,
    MakeContainer,
    keyed,
    refusal,
)

pytestmark = pytest.mark.azure

SAS_KINDS = ("account", "container", "blob")


# --- Shared Key -----------------------------------------------------------------------------


def test_shared_key_of_the_account_works(
    azure: AzureEmulator, make_container: MakeContainer
) -> None:
    name = make_container(None)
    user = ACCOUNTS[USER]
    container = keyed(azure, name, user.name, user.key)
    container.upload_blob("päth with spaces/ü.txt", b"new", metadata={"a_b": "1", "ab": "2"})
    assert sorted(container.list_blob_names()) == [KEY, "päth with spaces/ü.txt"]
    assert container.download_blob(KEY, offset=4, length=4).readall() == DATA[4:8]
    container.delete_blob(KEY)
    assert list(container.list_blob_names()) == ["päth with spaces/ü.txt"]


class Tamper(RequestsTransport):
    """A transport that changes a request after the SDK has signed it."""

    def __init__(self, change: Callable[[Any], None]) -> None:
        super().__init__()
        self.change = change

    def send(self, request: Any, **kwargs: Any) -> Any:
        self.change(request)
        return super().send(request, **kwargs)


def _flip_signature(request: Any) -> None:
    scheme, _, credential = request.headers["Authorization"].partition(" ")
    account, _, signature = credential.rpartition(":")
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    request.headers["Authorization"] = f"{scheme} {account}:{flipped}"


def _other_blob(request: Any) -> None:
    request.url = request.url.replace("/dir/k.txt", "/dir/other.txt")


@pytest.mark.parametrize("level", [None, "container"])
@pytest.mark.parametrize(
    "forgery", ["wrong key", "other account's key", "altered signature", "replayed elsewhere"]
)
def test_shared_key_forgeries_fail(
    azure: AzureEmulator, make_container: MakeContainer, forgery: str, level: str | None
) -> None:
    """Refused as AuthenticationFailed even where anonymous reads are open (Azurite alone
    serves a public container to any key)."""
    name = make_container(level)
    user, other = ACCOUNTS[USER], ACCOUNTS[OTHER]
    url = azure.account_url(user.name)
    own = {"account_name": user.name, "account_key": user.key}
    clients = {
        "wrong key": keyed(azure, name, user.name, UNKNOWN_KEY),
        "other account's key": keyed(azure, name, other.name, other.key),
        "altered signature": ContainerClient(
            url, name, credential=own, transport=Tamper(_flip_signature)
        ),
        "replayed elsewhere": ContainerClient(
            url, name, credential=own, transport=Tamper(_other_blob)
        ),
    }
    container = clients[forgery]
    assert refusal(lambda: container.download_blob(KEY).readall()) == FORGED
    assert refusal(lambda: container.upload_blob(KEY, b"x", overwrite=True)) == FORGED
    if forgery != "replayed elsewhere":
        assert refusal(lambda: list(container.list_blob_names())) == FORGED
    assert azure.read_object(name, KEY) == DATA


# --- shared access signatures ----------------------------------------------------------------


def sas_token(
    kind: str,
    name: str,
    read_only: bool = False,
    key: str | None = None,
    expiry: timedelta = timedelta(hours=1),
    blob: str = KEY,
) -> str:
    """A SAS of ``kind`` (account, container, blob) for container ``name`` of the user's
    account, signed with ``key`` (default: the account's), reading (and listing unless
    ``read_only``), valid from an hour ago until ``expiry`` from now."""
    account = ACCOUNTS[USER]
    key = key or account.key
    now = datetime.now(UTC)
    start, end = now - timedelta(hours=2), now + expiry
    lists = not read_only
    if kind == "account":
        return generate_account_sas(
            account.name,
            key,
            ResourceTypes(container=True, object=True),
            AccountSasPermissions(read=True, list=lists),
            expiry=end,
            start=start,
        )
    if kind == "container":
        return generate_container_sas(
            account.name,
            name,
            account_key=key,
            permission=ContainerSasPermissions(read=True, list=lists),
            expiry=end,
            start=start,
        )
    return generate_blob_sas(
        account.name,
        name,
        blob,
        account_key=key,
        permission=BlobSasPermissions(read=True),
        expiry=end,
        start=start,
    )


def sas_blob(azure: AzureEmulator, name: str, token: str, blob: str = KEY) -> BlobClient:
    return BlobClient(azure.account_url(ACCOUNTS[USER].name), name, blob, credential=token)


def sas_container(azure: AzureEmulator, name: str, token: str) -> ContainerClient:
    return ContainerClient(azure.account_url(ACCOUNTS[USER].name), name, credential=token)


def with_param(token: str, name: str, value: str) -> str:
    """``token`` with one parameter replaced (after signing)."""
    pairs = [(n, value if n == name else v) for n, v in parse_qsl(token, keep_blank_values=True)]
    return urlencode(pairs)


@pytest.mark.parametrize("kind", SAS_KINDS)
def test_sas_from_the_sdk_works(
    azure: AzureEmulator, make_container: MakeContainer, kind: str
) -> None:
    name = make_container(None)
    token = sas_token(kind, name)
    assert sas_blob(azure, name, token).download_blob().readall() == DATA
    if kind == "account":
        service = BlobServiceClient(azure.account_url(ACCOUNTS[USER].name), credential=token)
        assert list(service.get_container_client(name).list_blob_names()) == [KEY]
    if kind == "container":
        assert list(sas_container(azure, name, token).list_blob_names()) == [KEY]


@pytest.mark.parametrize("kind", SAS_KINDS)
def test_sas_permissions_are_enforced(
    azure: AzureEmulator, make_container: MakeContainer, kind: str
) -> None:
    name = make_container(None)
    blob = sas_blob(azure, name, sas_token(kind, name, read_only=True))
    write = refusal(lambda: blob.upload_blob(b"x", overwrite=True))
    assert write == (403, "AuthorizationPermissionMismatch")
    assert azure.read_object(name, KEY) == DATA


FORGERIES = ("wrong key", "altered sig", "expired se", "widened sp")


def forged_token(kind: str, name: str, forgery: str) -> str:
    if forgery == "wrong key":
        return sas_token(kind, name, key=ACCOUNTS[OTHER].key)
    if forgery == "expired se":
        return sas_token(kind, name, expiry=timedelta(minutes=-5))
    token = sas_token(kind, name, read_only=True)
    if forgery == "altered sig":
        sig = dict(parse_qsl(token))["sig"]
        return with_param(token, "sig", ("B" if sig[0] == "A" else "A") + sig[1:])
    return with_param(token, "sp", "racwdl")  # widened after signing


@pytest.mark.parametrize("level", [None, "container"])
@pytest.mark.parametrize("forgery", FORGERIES)
@pytest.mark.parametrize("kind", SAS_KINDS)
def test_sas_forgeries_fail(
    azure: AzureEmulator,
    make_container: MakeContainer,
    kind: str,
    forgery: str,
    level: str | None,
) -> None:
    """Refused as AuthenticationFailed, also in a public container (where Azurite alone
    serves reads whatever the SAS says)."""
    name = make_container(level)
    blob = sas_blob(azure, name, forged_token(kind, name, forgery))
    assert refusal(lambda: blob.download_blob().readall()) == FORGED
    assert refusal(lambda: blob.upload_blob(b"planted", overwrite=True)) == FORGED
    assert azure.read_object(name, KEY) == DATA


def test_blob_sas_is_for_its_blob_only(azure: AzureEmulator, make_container: MakeContainer) -> None:
    name = make_container(None)
    azure.write_object(name, "dir/other.txt", b"other")
    token = sas_token("blob", name)
    assert refusal(lambda: sas_blob(azure, name, token, "dir/other.txt").download_blob()) == (
        FORGED
    )
    assert refusal(lambda: list(sas_container(azure, name, token).list_blob_names())) == FORGED


# --- user delegation SAS ---------------------------------------------------------------------


def test_user_delegation_keys_are_not_issued(azure: AzureEmulator) -> None:
    """A delegation key needs a Microsoft Entra token; the local cloud has none to give (and
    Azurite issues keys only over HTTPS with OAuth), so no user-delegation SAS can be made
    with the SDK, and none succeeds."""
    now = datetime.now(UTC)
    service = azure.client(USER)
    status, _ = refusal(lambda: service.get_user_delegation_key(now, now + timedelta(hours=1)))
    assert status == 403


def _azurite_delegation_secret(azure: AzureEmulator) -> bytes:
    """The constant Azurite derives every user delegation key from (from its source)."""
    constants = npm_dir(azure.home) / "node_modules/azurite/dist/src/blob/utils/constants.js"
    found = re.search(r'USERDELEGATIONKEY_BASIC_KEY = "([^"]+)"', constants.read_text())
    if found is None:
        pytest.fail(f"Azurite's delegation key constant is no longer in {constants}")
    return found.group(1).encode()


def _minted_user_delegation_sas(azure: AzureEmulator, name: str) -> str:
    """A user-delegation SAS for ``KEY`` made with no key from any service: the delegation
    key derived the way Azurite derives it (Azurite alone accepts it: 200)."""
    now = datetime.now(UTC)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    oid, tid, version = str(uuid.uuid4()), str(uuid.uuid4()), "2025-05-05"
    start, expiry = (
        (now - timedelta(minutes=5)).strftime(fmt),
        (now + timedelta(hours=1)).strftime(fmt),
    )
    key_text = "\n".join([oid, tid, start, expiry, "b", version])
    key = hmac.new(_azurite_delegation_secret(azure), key_text.encode(), hashlib.sha256).digest()
    resource = f"/blob/{ACCOUNTS[USER].name}/{name}/{KEY}"
    fields = ["r", "", expiry, resource, oid, tid, start, expiry, "b", version]
    fields += ["", "", "", "", "", version, "b"] + [""] * 7
    signature = hmac.new(key, "\n".join(fields).encode(), hashlib.sha256).digest()
    params = {
        "sp": "r",
        "se": expiry,
        "skoid": oid,
        "sktid": tid,
        "skt": start,
        "ske": expiry,
        "sks": "b",
        "skv": version,
        "sv": version,
        "sr": "b",
        "sig": base64.b64encode(signature).decode(),
    }
    return urlencode(params)


def _sdk_user_delegation_sas(name: str) -> str:
    """A user-delegation SAS from the SDK, over a delegation key nobody issued."""
    now = datetime.now(UTC)
    key = UserDelegationKey()
    key.signed_oid, key.signed_tid = str(uuid.uuid4()), str(uuid.uuid4())
    key.signed_start = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    key.signed_expiry = (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    key.signed_service, key.signed_version = "b", "2025-05-05"
    key.value = base64.b64encode(uuid.uuid4().bytes * 2).decode()
    return generate_blob_sas(
        ACCOUNTS[USER].name,
        name,
        KEY,
        user_delegation_key=key,
        permission=BlobSasPermissions(read=True),
        expiry=now + timedelta(hours=1),
    )


@pytest.mark.parametrize("made_by", ["sdk", "azurite's derivation"])
def test_user_delegation_sas_is_refused(
    azure: AzureEmulator, make_container: MakeContainer, made_by: str
) -> None:
    name = make_container(None)
    if made_by == "sdk":
        token = _sdk_user_delegation_sas(name)
    else:
        token = _minted_user_delegation_sas(azure, name)
    assert refusal(lambda: sas_blob(azure, name, token).download_blob().readall()) == FORGED
