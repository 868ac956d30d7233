"""The conformance suite's module, run by the smoke suite (one copy: harness/conformance)."""

from harness.conformance.test_mount_matrix import *  # noqa: F403
