"""The conformance suite of a storage backend, shipped in the package: the mount matrix, the
seed's comp_test, stop/start persistence, upload order and multinode. It runs from any
directory with ``harness conform --store NAME`` or ``pytest --pyargs harness.conformance``,
on the local cloud or, with ``--target FILE``, against a real endpoint (docs/conformance.md).

The smoke suite runs these modules through ``harness conform`` (one copy): against a target
file of each built-in store's local gate (tests/smoke/test_conformance_targets.py) and on the
local cloud for the store packages installed from a wheel (tests/smoke/test_backend_package.py).
"""

from harness.testing.target_plan import COSTS

MODULES = tuple(cost.module for cost in COSTS)
"""The suite's test modules, in the order a run reports them."""
