"""Root conftest. The harness plugin (options --aws/--gcp/--azure, fixtures local_cloud,
skycore_home, ...) is registered by the ``pytest11`` entry point of the installed package
(``pip install -e .``), so it is not imported here.

Hypothesis runs without per-example deadlines: on a loaded 2-core machine a first example
can take longer than 200 ms for reasons that have nothing to do with the code under test.
"""

from hypothesis import settings

settings.register_profile("skycore", deadline=None, print_blob=True)
settings.load_profile("skycore")
