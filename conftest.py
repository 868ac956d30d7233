"""Root conftest: registers the harness plugin (options --aws/--gcp/--azure, fixtures
local_cloud, skycore_home, bucket_factory, cluster_factory, ...). The installed package also
registers it through its ``pytest11`` entry point, named like the module, so pytest loads it
once either way (and a plain source checkout on PYTHONPATH works too).

Hypothesis runs without per-example deadlines: on a loaded 2-core machine a first example
can take longer than 200 ms for reasons that have nothing to do with the code under test.

Two Hypothesis profiles: ``dev`` (the default, what ``make test`` runs: Hypothesis' 100
examples per property, the state machine's budget sized for the suite's time) and ``ci`` (a
deeper run: 500 examples per property and a larger state-machine budget, see
tests/integration/test_state_machine.py). Choose one with ``HYPOTHESIS_PROFILE=ci`` or pytest's
``--hypothesis-profile ci``.
"""

import os

from hypothesis import settings

pytest_plugins = ["harness.testing.plugin"]

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("ci", settings.get_profile("dev"), max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
