"""Fixtures of the Azure gate's tests: the running emulator and its containers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.emulators.azure import AzureEmulator
from harness.emulators.fleet import RunningEmulator
from tests.integration.harness.store_gates.azure.helpers import (
    MakeContainer,
    azure_emulator,
    container_maker,
)


@pytest.fixture
def azure(emulators: dict[str, RunningEmulator]) -> AzureEmulator:
    """The running Azure emulator."""
    return azure_emulator(emulators)


@pytest.fixture
def make_container(azure: AzureEmulator) -> Iterator[MakeContainer]:
    """``make_container(level=None, owner=USER)``: containers deleted after the test."""
    yield from container_maker(azure)
