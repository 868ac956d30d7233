"""The conformance suite's module, run by the smoke suite (one copy: harness/conformance)."""

from harness.conformance.test_multinode import *  # noqa: F403
