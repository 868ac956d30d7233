"""The autouse fixture every conformance test module (but the contract's own) imports: a
test that relies on a contract check its store's emulator failed is skipped."""

from __future__ import annotations

import pytest

from harness.conformance.contract.verdict import skip_reason
from harness.emulators import fleet
from harness.testing import access


@pytest.fixture(autouse=True)
def emulator_contract_kept(request: pytest.FixtureRequest) -> None:
    """Skip a test that relies on a contract check its store's emulator failed, with that
    check's sentence (local cloud only; every test that relies on no failed check runs). The
    local cloud is brought up first: the verdict is about the running emulator."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    store = params.get("store")
    if store is None or access.target() is not None:
        return
    request.getfixturevalue("local_cloud")
    module = getattr(request.module, "__name__", "")
    reason = skip_reason(fleet.get(store), module.rsplit(".", 1)[-1])
    if reason is not None:
        pytest.skip(reason)
