"""How fast bodies may flow through the gate, free of any networking and of the clock (the
caller says what time it is): token buckets, and the pace of one stream.

``bandwidth`` shares one bucket between every request it hits (a bucket's whole link);
``stream-bandwidth`` gives each request's body its own (one TCP stream, capped by its window
over the round trip). A stream may have passed ``stream_allowance(t)`` bytes ``t`` seconds
after its body started: one slice at once, then ``mibps`` MiB/s. A body under both waits for
the slower (``slowest``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MIB = 1 << 20
BUCKET_BURST_S = 0.05
"""A ``bandwidth`` bucket holds this many seconds of bytes."""
SLICE_S = 0.02
"""A paced stream moves in slices of this many seconds of bytes (smooth, not bursts)..."""
MIN_SLICE = 64 << 10
"""... and at least this many bytes (a slow cap is not paced in tiny writes)."""


def slice_bytes(mibps: float) -> int:
    """The size of the pieces a stream capped at ``mibps`` is paced in (its burst)."""
    return max(MIN_SLICE, int(mibps * MIB * SLICE_S))


def stream_allowance(seconds: float, mibps: float) -> float:
    """Bytes a stream capped at ``mibps`` may have passed ``seconds`` after its body
    started, when it always has more to send: one slice at once, then the cap."""
    return slice_bytes(mibps) + max(0.0, seconds) * mibps * MIB


@dataclass
class TokenBucket:
    """Bytes flow at ``rate`` bytes/s, in bursts of at most ``capacity``; full when first
    used. Bytes beyond the tokens put it in debt, and the debt is the wait."""

    rate: float
    capacity: float
    tokens: float = 0.0
    last: float | None = None
    """When it last passed bytes (monotonic seconds); None before its first bytes."""

    @classmethod
    def shared(cls, mibps: float) -> TokenBucket:
        """The bucket of a ``bandwidth`` fault: every request it hits draws on it."""
        return cls(mibps * MIB, mibps * MIB * BUCKET_BURST_S)

    @classmethod
    def stream(cls, mibps: float) -> TokenBucket:
        """The bucket of one direction of one request under ``stream-bandwidth``."""
        return cls(mibps * MIB, float(slice_bytes(mibps)))

    def delay(self, nbytes: int, now: float) -> float:
        """Take ``nbytes`` at ``now`` (monotonic seconds): the seconds to wait before they
        may leave (0 while the bucket has the tokens)."""
        if self.last is None:
            self.tokens, self.last = self.capacity, now
        elapsed, self.last = max(0.0, now - self.last), max(now, self.last)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate) - nbytes
        return max(0.0, -self.tokens / self.rate)


def slowest(buckets: Iterable[TokenBucket], nbytes: int, now: float) -> float:
    """Every bucket takes ``nbytes`` at ``now``: the seconds to wait for the slowest."""
    return max([bucket.delay(nbytes, now) for bucket in buckets], default=0.0)
