"""Root conftest: registers the harness plugin (options --aws/--gcp/--azure, fixtures
local_cloud, skycore_home, bucket_factory, cluster_factory, ...). The installed package also
registers it through its ``pytest11`` entry point, named like the module, so pytest loads it
once either way (and a plain source checkout on PYTHONPATH works too).

Hypothesis runs without per-example deadlines: on a loaded 2-core machine a first example
can take longer than 200 ms for reasons that have nothing to do with the code under test.
"""

from hypothesis import settings

pytest_plugins = ["harness.plugin"]

settings.register_profile("skycore", deadline=None, print_blob=True)
settings.load_profile("skycore")
