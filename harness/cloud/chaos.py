"""The error every fault injector of the local cloud raises (preemption, stalls, store_faults)."""

from __future__ import annotations

from harness.errors import CloudError


class ChaosError(CloudError):
    """The requested fault cannot be injected; the message says why and what to do."""
