"""Reads of a byte range through the Azure gate, as rclone's cached mounts make them: a
range that starts at or past the blob's end is answered as Azure answers it, 416
InvalidRange (Azurite alone answers 206 with ``Content-Range: bytes N-(N-1)/N``, which made
rclone truncate a cached 128 MiB file it had read whole)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import ContainerClient

from harness.accounts import USER
from harness.emulators.azure import AzureEmulator
from harness.emulators.fleet import RunningEmulator
from tests.integration.harness.store_gates.azure.helpers import (
    KEY,
    azure_emulator,
    container_maker,
    refusal,
)

pytestmark = pytest.mark.azure

DATA = bytes(range(256)) * 4  # 1000+ bytes whose every range is telling


@pytest.fixture
def blob(emulators: dict[str, RunningEmulator]) -> Iterator[ContainerClient]:
    azure: AzureEmulator = azure_emulator(emulators)
    maker = container_maker(azure)
    name = next(maker)()
    container = azure.client(USER).get_container_client(name)
    container.upload_blob(KEY, DATA, overwrite=True)
    yield container
    next(maker, None)


def test_a_range_at_the_end_of_a_blob_is_invalid_as_on_azure(blob: ContainerClient) -> None:
    size = len(DATA)
    assert blob.download_blob(KEY, offset=size - 24, length=24).readall() == DATA[-24:]
    assert refusal(lambda: blob.download_blob(KEY, offset=size, length=10).readall()) == (
        416,
        "InvalidRange",
    )
    past = refusal(lambda: blob.download_blob(KEY, offset=size + 5, length=10).readall())
    assert past == (416, "InvalidRange")
