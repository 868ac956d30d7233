"""Root conftest. The harness plugin (options --aws/--gcp/--azure, fixtures local_cloud,
skycore_home, ...) is registered by the ``pytest11`` entry point of the installed package
(`pip install -e .`), so nothing is imported here."""
