"""Plain helpers of the Azure gate's tests (their fixtures, ``azure`` and
``make_container``, are in conftest.py here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient

from harness.accounts import USER
from harness.emulators.azure import ACCOUNTS, AzureEmulator
from harness.emulators.fleet import RunningEmulator
from tests.names import unique_name

KEY = "dir/k.txt"
DATA = b"the blob's content\n"

MakeContainer = Callable[..., str]


def azure_emulator(emulators: dict[str, RunningEmulator]) -> AzureEmulator:
    """The running Azure emulator."""
    emulator = emulators["azure"]
    assert isinstance(emulator, AzureEmulator)
    return emulator


def container_maker(azure: AzureEmulator) -> Iterator[MakeContainer]:
    """Body of the ``make_container`` fixture: ``make_container(level=None, owner=USER)``
    makes a container through the SDK with the owner's key (public at ``level``) holding
    ``KEY``; every one is deleted after the test."""
    made: list[str] = []

    def make(level: str | None = None, owner: str = USER) -> str:
        name = unique_name("az")
        container = azure.client(owner).create_container(name, public_access=level)
        made.append(name)
        container.upload_blob(KEY, DATA)
        return name

    yield make
    for name in made:
        azure.delete_bucket(name)


def keyed(azure: AzureEmulator, name: str, account_name: str, key: str) -> ContainerClient:
    """Container ``name`` of the user's storage account, signed as ``account_name``/``key``."""
    credential = {"account_name": account_name, "account_key": key}
    return ContainerClient(azure.account_url(ACCOUNTS[USER].name), name, credential=credential)


def refusal(call: Callable[[], Any]) -> tuple[int | None, str | None]:
    """(status, ``x-ms-error-code``) of a call the service refuses."""
    with pytest.raises(HttpResponseError) as info:
        call()
    headers = getattr(info.value.response, "headers", None) or {}
    return info.value.status_code, headers.get("x-ms-error-code")


FORGED = (403, "AuthenticationFailed")
