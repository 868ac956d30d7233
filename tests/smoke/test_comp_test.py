"""The conformance suite's module, run by the smoke suite (one copy: harness/conformance)."""

from harness.conformance.test_comp_test import *  # noqa: F403
