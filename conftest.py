"""Root conftest: registers the harness plugin (options --aws/--gcp/--azure, fixtures
local_cloud, skycore_home, bucket_factory, cluster_factory, ...). The installed package also
registers it through its ``pytest11`` entry point, named like the module, so pytest loads it
once either way (and a plain source checkout on PYTHONPATH works too).

Hypothesis runs without per-example deadlines: on a loaded 2-core machine a first example
can take longer than 200 ms for reasons that have nothing to do with the code under test.

Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE=NAME`` or pytest's
``--hypothesis-profile NAME``:

- ``fast`` (the default, what a developer runs after an edit): 10 examples per property,
  random ones each run (a failure is saved and replayed first next time).
- ``dev``: Hypothesis' 100 examples per property.
- ``deep`` (what CI runs, .ci/run): 500 examples per property, derandomized, so every run
  checks the same examples and a failure reproduces from the commit alone.
- ``ci``: 500 random examples per property and the larger budget of the integration state
  machine (tests/integration/skycore/core/test_state_machine.py keys its budget by profile
  name; every other profile gets its ``dev`` budget).

A property that needs more or fewer examples than the profile gives states its count for
``dev``; tests/unit/hypothesis_budget.py scales it to the loaded profile.
"""

import gc
import os

import pytest
from hypothesis import settings

pytest_plugins = ["harness.testing.plugin"]

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("fast", settings.get_profile("dev"), max_examples=10)
settings.register_profile("ci", settings.get_profile("dev"), max_examples=500)
settings.register_profile("deep", settings.get_profile("ci"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hide what start-up and collection made (modules, strategies, the test items: all live
    to the end of the run) from the garbage collector, so its full passes during the tests
    walk only what the tests made, and so do the five full passes pytest makes at the end."""
    gc.freeze()
