"""The emulator checks itself before the suite trusts it: through the gate and with the
store's own SDK, the stand-in server must keep what the suite relies on (digests, listings
with delimiters, multipart, batch delete, ranged reads, its keys). A failed check names what
the emulator (not your store) does, the request and the answer, and only the test modules
that rely on that check are skipped. A check no test relies on (key order, conditional
reads, ...) is a finding, and a deviation the emulator declares is reported: both are
printed in the run's summary and fail nothing. A crash of the harness's or the package's
own code fails this test with its traceback.

It runs on the local cloud only: a target file is the real service. With
``--compare-stand-in`` a target run runs the probes on the target too (in buckets named with
the run's tag, deleted after) and prints, check by check, where the stand-in and the service
differ."""

from __future__ import annotations

import pytest

from harness.conformance.contract import run
from harness.conformance.contract.compare import differences
from harness.conformance.contract.results import Status
from harness.conformance.contract.verdict import verdict
from harness.emulators import fleet
from harness.testing import access, contract_summary


def test_the_emulator_keeps_the_contract(store: str, record_property, request) -> None:
    if access.target() is not None:
        if not request.config.getoption("--compare-stand-in"):
            pytest.skip(
                "a target file is the real service: the emulator contract checks stand-ins "
                "(--compare-stand-in runs its probes on both and prints where they differ)"
            )
        compare_with_stand_in(store, record_property)
        return
    request.getfixturevalue("local_cloud")  # the store's emulator, started if need be
    emulator = fleet.get(store)
    if emulator.contract_probes is None:
        pytest.skip(
            f"{type(emulator).__name__} names no contract probes (contract_probes): the "
            "emulator contract has none for its API (docs/backends.md)"
        )
    outcome = verdict(emulator)
    assert outcome.checks > 0, f"{emulator.contract_probes} has no checks"
    for result in outcome.of(Status.FINDING, Status.DEVIATION, Status.FAILED):
        contract_summary.record(record_property, store, result)
    assert not outcome.failures, "\n\n".join(outcome.failures)


def compare_with_stand_in(store: str, record_property) -> None:
    """The contract's probes on the target (buckets named with the run's tag) and on the
    local stand-in of its store (started if need be): one summary line per check whose
    outcome differs."""
    stand_in = fleet.start_all(stores=[store])[store]
    local = verdict(stand_in)
    service = run(access.store_access(store), tag=access.bucket_tag())
    found, agree = differences(local, service)
    for difference in found:
        record_property(contract_summary.COMPARE_PROPERTY, difference.line(store))
    record_property(
        contract_summary.COMPARE_PROPERTY,
        f"{store}: the stand-in and the service agree on {agree} of {agree + len(found)} checks",
    )
    crashes = [r.text for r in service.of(Status.CRASH)]
    assert not crashes, "\n\n".join(crashes)
