"""The tests' poller: harness.testing.polling's ``wait_for``, which the harness's test helpers
(harness.testing.managed_jobs) use too."""

from harness.testing.polling import wait_for

__all__ = ["wait_for"]
