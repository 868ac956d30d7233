"""The conformance suite's module, run by the smoke suite (one copy: harness/conformance)."""

from harness.conformance.test_stop_start import *  # noqa: F403
