"""Faults a gate injects on demand, free of any networking: what each fault is, which
requests it hits, and when it ends. The same for every store; the error bodies come from the
store's gate protocol (``GateProtocol.fault_verdict``).

Kinds (``harness fault STORE KIND``, the ``store_faults`` fixture):

- ``outage``: requests hang (no answer) while the fault lasts, then go on.
- ``errors``: a share ``rate`` of requests (exactly: the first, then one in every 1/rate) is
  answered ``status`` (503 by default) in the API's
  own error format (S3 SlowDown, GCS JSON, Azure ServerBusy).
- ``latency``: every request waits ``ms`` before it is forwarded.
- ``bandwidth``: bodies (both ways) flow at ``mibps`` MiB/s in total.
- ``stream-bandwidth``: each request's body (both ways) flows at ``mibps`` MiB/s on its own,
  as one long-RTT TCP stream is capped by its window; many requests go faster together.
  Every body it paces is a hit, and the fault keeps a record of its last streams
  (``streams``: method, path, bytes both ways, ``waited_s``, start and end on the gate's
  monotonic clock). Under ``bandwidth`` too, a body waits for the slower. Both pace the
  bodies the gate streams; the small ones it reads whole pass at once.
- ``reset``: a share ``rate`` of requests has its connection reset in the middle of a body.
- ``deny``: 403 AccessDenied, as when the credentials were revoked.
- ``corrupt``: a share ``rate`` of object writes is forwarded (the object is written
  whole) but answered with a wrong checksum (ETag, MD5, CRC: the store protocol's
  ``corrupt_answer``); reads of that object (HEAD, GET) show the wrong checksum too, until
  it is written again or deleted, or the fault is cleared. A client that checks its
  uploads (rclone) sees "corrupted on transfer", deletes the object and uploads it again.

A fault may be narrowed to one bucket and one method. It ends when it is cleared, after
``seconds`` (for the command line; tests end faults on events), or once it has hit
``max_hits`` requests (held, delayed, refused, reset or corrupted: ended ``"hits"``). Every
start and end is kept in the fault log (``GET /__gate__/faults/log``); an end says why in
``ended``: ``"cleared"``, ``"seconds"`` or ``"hits"``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.gate.pacing import TokenBucket, slowest

KINDS = (
    "outage",
    "errors",
    "latency",
    "bandwidth",
    "stream-bandwidth",
    "reset",
    "deny",
    "corrupt",
)
PACED = ("bandwidth", "stream-bandwidth")
"""Kinds that slow bodies down: they take ``mibps`` and hit no one request (no max_hits)."""
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH")
MAX_LOG = 10_000
MAX_STREAMS = 64  # stream records a stream-bandwidth fault keeps
MAX_ENDED = 10_000  # ended faults kept for state lookups (GET /__gate__/faults/state)
ENDED_BY = ("cleared", "seconds", "hits")


class FaultSpecError(ValueError):
    """A fault request that makes no sense; the message names the field."""


@dataclass
class Fault:
    """One injected fault."""

    id: int
    kind: str
    started_ns: int
    seconds: float | None = None
    rate: float = 1.0
    status: int = 503
    ms: float = 0.0
    mibps: float = 0.0
    bucket: str | None = None
    method: str | None = None
    max_hits: int | None = None
    ended_ns: int | None = None
    ended: str | None = None
    """Why the fault ended (one of ENDED_BY), None while it lasts."""
    hits: int = 0
    _credit: float = field(default=0.0, repr=False)
    _bucket: TokenBucket | None = field(default=None, repr=False)
    """A ``bandwidth`` fault's bucket, shared by every request it hits."""
    _streams: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def ends_at_ns(self) -> int | None:
        """When a timed fault ends (None: until cleared)."""
        if self.seconds is None:
            return None
        return self.started_ns + int(self.seconds * 1e9)

    def active(self, now_ns: int) -> bool:
        """True while the fault lasts."""
        if self.ended_ns is not None:
            return False
        end = self.ends_at_ns
        return end is None or now_ns < end

    def matches(self, bucket: str | None, method: str) -> bool:
        """True if the fault applies to a request on ``bucket`` with ``method``."""
        if self.bucket is not None and self.bucket != bucket:
            return False
        return self.method is None or self.method == method.upper()

    def public(self) -> dict[str, Any]:
        """The fault as the admin API shows it."""
        data = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        data["ends_at_ns"] = self.ends_at_ns
        if self.kind == "stream-bandwidth":
            data["streams"] = [dict(s) for s in self._streams]
        return data


def parse_fault(data: Any, fault_id: int, now_ns: int) -> Fault:
    """A Fault from the admin API's JSON body; FaultSpecError naming the bad field."""
    if not isinstance(data, dict):
        raise FaultSpecError("the body must be a JSON object")
    kind = data.get("kind")
    if kind not in KINDS:
        raise FaultSpecError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    fault = Fault(fault_id, kind, now_ns)
    seconds = data.get("seconds")
    if seconds is not None:
        fault.seconds = _number(seconds, "seconds", low=0.0, strict=True)
    fault.rate = _number(data.get("rate", 1.0), "rate", low=0.0, high=1.0)
    fault.status = int(_number(data.get("status", 503), "status", low=400, high=599))
    fault.ms = _number(data.get("ms", 0.0), "ms", low=0.0)
    fault.mibps = _number(data.get("mibps", 0.0), "mibps", low=0.0)
    if kind == "latency" and fault.ms <= 0:
        raise FaultSpecError("latency needs ms > 0")
    if kind in PACED and fault.mibps <= 0:
        raise FaultSpecError(f"{kind} needs mibps > 0, in MiB/s (--mibps N on the command line)")
    bucket = data.get("bucket")
    if bucket is not None and (not isinstance(bucket, str) or not bucket):
        raise FaultSpecError("bucket must be a non-empty string")
    fault.bucket = bucket
    method = data.get("method")
    if method is not None:
        method = str(method).upper()
        if method not in METHODS:
            raise FaultSpecError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    fault.method = method
    fault.max_hits = _max_hits(data.get("max_hits"), kind)
    fault._credit = 1.0 - fault.rate  # the first request is hit
    if kind == "bandwidth":
        fault._bucket = TokenBucket.shared(fault.mibps)
    return fault


def _max_hits(value: Any, kind: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FaultSpecError(f"max_hits must be a positive integer, not {value!r}")
    if kind in PACED:
        raise FaultSpecError(f"max_hits does not apply to {kind}: it lasts until cleared")
    return value


def _number(
    value: Any, name: str, low: float | None = None, high: float | None = None, strict: bool = False
) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise FaultSpecError(f"{name} must be a number, not {value!r}") from None
    if low is not None and (number < low or (strict and number == low)):
        raise FaultSpecError(f"{name} must be {'>' if strict else '>='} {low:g}, not {number:g}")
    if high is not None and number > high:
        raise FaultSpecError(f"{name} must be <= {high:g}, not {number:g}")
    return number


class FaultTable:
    """The faults of one gate, their log, and the objects whose writes a ``corrupt`` fault
    answered with a wrong checksum. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[int, Fault] = {}
        self._ended: dict[int, Fault] = {}
        self._log: list[dict[str, Any]] = []
        self._corrupted: dict[tuple[str, str], int] = {}
        self._next = 1

    def add(self, data: Any) -> Fault:
        """Start a fault from its JSON description (FaultSpecError if it is malformed)."""
        with self._lock:
            self._expire(time.time_ns())
            fault = parse_fault(data, self._next, time.time_ns())
            self._next += 1
            self._faults[fault.id] = fault
            self._note(fault, "start", fault.started_ns)
            return fault

    def clear(self, fault_id: int | None = None, bucket: str | None = None) -> list[Fault]:
        """End every fault (or the one with ``fault_id``, or those of ``bucket``); the ended.
        The objects ``corrupt`` faults marked (those of ``fault_id``, also when it had
        ended already, or in ``bucket``) read right again."""
        now = time.time_ns()
        with self._lock:
            self._expire(now)
            ended = [
                f
                for f in self._faults.values()
                if (fault_id is None or f.id == fault_id) and (bucket is None or f.bucket == bucket)
            ]
            for fault in ended:
                self._end(fault, "cleared", now)
            for where, marker in list(self._corrupted.items()):
                if (fault_id is None or marker == fault_id) and bucket in (None, where[0]):
                    del self._corrupted[where]
            return ended

    def active(self) -> list[Fault]:
        """The faults that last now."""
        with self._lock:
            self._expire(time.time_ns())
            return list(self._faults.values())

    def get(self, fault_id: int) -> Fault | None:
        """A fault by its id, active or ended (None if unknown or long gone)."""
        with self._lock:
            self._expire(time.time_ns())
            return self._faults.get(fault_id) or self._ended.get(fault_id)

    def tick(self) -> None:
        """End the timed faults whose time is up (logged at their end time)."""
        with self._lock:
            self._expire(time.time_ns())

    def _expire(self, now_ns: int) -> None:
        for fault in list(self._faults.values()):
            end = fault.ends_at_ns
            if end is not None and now_ns >= end:
                self._end(fault, "seconds", end)

    def _end(self, fault: Fault, why: str, t_ns: int) -> None:
        """End an active fault (call with the lock held)."""
        fault.ended_ns = t_ns
        fault.ended = why
        self._note(fault, "end", t_ns)
        del self._faults[fault.id]
        self._ended[fault.id] = fault
        while len(self._ended) > MAX_ENDED:
            del self._ended[next(iter(self._ended))]

    def _note(self, fault: Fault, phase: str, t_ns: int) -> None:
        entry = fault.public()
        entry["phase"] = phase
        entry["t_ns"] = t_ns
        self._log.append(entry)
        if len(self._log) > MAX_LOG:
            del self._log[: len(self._log) - MAX_LOG]

    def log(self, bucket: str | None = None) -> list[dict[str, Any]]:
        """Fault starts and ends, oldest first (of faults on ``bucket`` or on every bucket,
        when ``bucket`` is given)."""
        with self._lock:
            self._expire(time.time_ns())
            return [e for e in self._log if bucket is None or e["bucket"] in (None, bucket)]

    def matching(self, bucket: str | None, method: str) -> list[Fault]:
        """The active faults that apply to a request."""
        return [f for f in self.active() if f.matches(bucket, method)]

    def roll(self, fault: Fault) -> bool:
        """True if a rate-limited fault hits this request (counted). The share is exact and
        reproducible: the first request a fault sees is hit, then one in every 1/rate (rate
        0.3: requests 1, 4, 8, 11, ...), so a test knows its fault happened. A fault that
        has ended meanwhile hits nothing; one that reaches its ``max_hits`` ends here."""
        with self._lock:
            now = time.time_ns()
            self._expire(now)
            if fault.id not in self._faults:
                return False
            fault._credit += fault.rate
            hit = fault._credit >= 1.0 - 1e-9
            if hit:
                fault._credit -= 1.0
                fault.hits += 1
                if fault.max_hits is not None and fault.hits >= fault.max_hits:
                    self._end(fault, "hits", now)
            return hit

    # --- objects answered with a wrong checksum (corrupt) --------------------------------

    def mark_corrupted(self, bucket: str, key: str, fault: Fault) -> None:
        """Reads of ``key`` show a wrong checksum from now on (``fault`` corrupted its write)."""
        with self._lock:
            self._corrupted[(bucket, key)] = fault.id

    def corrupted(self, bucket: str | None, key: str | None) -> bool:
        """True if reads of ``key`` in ``bucket`` show a wrong checksum."""
        if not self._corrupted or bucket is None or key is None:
            return False
        with self._lock:
            return (bucket, key) in self._corrupted

    def corrupted_in(self, bucket: str | None) -> bool:
        """True if reads of some object of ``bucket`` show a wrong checksum."""
        if not self._corrupted or bucket is None:
            return False
        with self._lock:
            return any(where[0] == bucket for where in self._corrupted)

    def forget_corrupted(self, bucket: str | None, key: str | None = None) -> None:
        """``key`` was written or deleted (every key of ``bucket`` when None: the bucket
        was deleted): its reads are right again."""
        if not self._corrupted or bucket is None:
            return
        with self._lock:
            for where in list(self._corrupted):
                if where[0] == bucket and key in (None, where[1]):
                    del self._corrupted[where]

    def bandwidth_delay(
        self, faults: list[Fault], nbytes: int, own: TokenBucket | None = None
    ) -> float:
        """Seconds to wait before passing ``nbytes`` under the bandwidth faults given (a token
        bucket per fault, shared by every request it hits) and ``own``, the request's own
        bucket (stream-bandwidth): the slowest says."""
        buckets = [f._bucket for f in faults if f._bucket is not None]
        if own is not None:
            buckets.append(own)
        with self._lock:
            return slowest(buckets, nbytes, time.monotonic())

    # --- streams paced by stream-bandwidth ---------------------------------------------

    def open_stream(self, faults: list[Fault], method: str, path: str) -> list[dict[str, Any]]:
        """A request's body starts under the stream-bandwidth ``faults``: each counts a hit
        and keeps a record of the stream (its last MAX_STREAMS); the records."""
        now = time.monotonic()
        records = []
        with self._lock:
            for fault in faults:
                record: dict[str, Any] = {
                    "method": method,
                    "path": path[:200],
                    "request_bytes": 0,
                    "response_bytes": 0,
                    "waited_s": 0.0,
                    "started_s": now,
                    "ended_s": None,
                }
                fault.hits += 1
                fault._streams.append(record)
                del fault._streams[:-MAX_STREAMS]
                records.append(record)
        return records

    def note_stream(
        self, records: list[dict[str, Any]], side: str, nbytes: int, waited: float
    ) -> None:
        """``nbytes`` of a stream's body passed on ``side`` (``request_bytes`` or
        ``response_bytes``) after the gate held them ``waited`` seconds."""
        with self._lock:
            for record in records:
                record[side] += nbytes
                record["waited_s"] += waited

    def close_stream(self, records: list[dict[str, Any]]) -> None:
        """The request of these stream records is over."""
        now = time.monotonic()
        with self._lock:
            for record in records:
                record["ended_s"] = now
