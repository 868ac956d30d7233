"""The emulator checks itself before the suite trusts it: through the gate and with the
store's own SDK, the stand-in server must keep what the suite relies on (digests, listings
with delimiters, key order, pagination, multipart, batch delete, conditional and ranged
reads, its keys). A failure names what the emulator (not your store) does, the request and
the answer, and the rest of the suite for that store is skipped with that reason.

It runs on the local cloud only: a target file is the real service."""

from __future__ import annotations

import pytest

from harness.conformance.contract.verdict import verdict
from harness.emulators import fleet
from harness.testing import access


def test_the_emulator_keeps_the_contract(store: str, record_property, request) -> None:
    if access.target() is not None:
        pytest.skip("a target file is the real service: the emulator contract checks stand-ins")
    request.getfixturevalue("local_cloud")  # the store's emulator, started if need be
    emulator = fleet.get(store)
    if emulator.contract_probes is None:
        pytest.skip(
            f"{type(emulator).__name__} names no contract probes (contract_probes): the "
            "emulator contract has none for its API (docs/backends.md)"
        )
    outcome = verdict(emulator)
    assert outcome.checks > 0, f"{emulator.contract_probes} has no checks"
    for deviation in outcome.deviations:
        record_property("known_deviation", deviation)
    assert not outcome.failures, "\n".join(outcome.failures)
