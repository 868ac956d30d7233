"""The one-request floor of an ordered small-file upload, measured beside it: single PUTs of
one small object through the gate, sent by the emulator module's own SDK client (built once
and kept, as a plain client keeps its connection), on the run's bucket behind the run's
network. The floor of ``files`` ordered files is files x the median PUT x the requests the
mount sends per file (1 on a store that uploads a small file in one request).

Every PUT is timed on the monotonic clock; each batch's requests are read from the gate's
log, so a PUT that was not one request through the gate is seen.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import common
from bench_consistency import negatives, parts_over_whole

KEY_PREFIX = "floor-put/"  # the probe's objects, apart from the files the mount writes
NOT_UPLOADS = ("LIST", "GET-bucket")  # request kinds that are no part of a file's upload
LOG_WAIT_S = 5.0  # the gate logs a request when it ends: how long to wait for the last line

Put = Callable[[str, bytes], None]


def sdk_put(client: Any, bucket: str) -> Put:
    """A PUT of one object into ``bucket`` with ``client``, one of the emulator modules' SDK
    clients (``RunningEmulator.client``), the way each module's ``write_object`` sends it:
    boto3 ``put_object``, azure ``upload_blob``, google ``upload_from_string`` (each one
    request for a small object). Told apart by what the client offers, not by store."""
    if hasattr(client, "put_object"):  # boto3 (the S3 API)
        return lambda key, data: client.put_object(Bucket=bucket, Key=key, Body=data)
    if hasattr(client, "get_container_client"):  # azure.storage.blob.BlobServiceClient
        container = client.get_container_client(bucket)
        return lambda key, data: container.upload_blob(key, data, overwrite=True)
    if hasattr(client, "bucket"):  # google.cloud.storage.Client
        handle = client.bucket(bucket)
        return lambda key, data: handle.blob(key).upload_from_string(data)
    raise TypeError(f"no single PUT known for an SDK client of type {type(client).__name__}")


def upload_requests(kinds: Mapping[str, float]) -> float:
    """The requests of ``kinds`` (kind -> count) that are part of an upload (no listings)."""
    return sum(v for k, v in kinds.items() if k not in NOT_UPLOADS)


def requests_per_file(per_file: Mapping[str, Any] | None) -> int | None:
    """How many requests the floor counts per file: the mount's measured upload requests per
    file (``upload_order.per_file``'s ``by_kind``), rounded, at least 1 (None: not measured).
    Rounded, so that a rare retry or a listing does not lower the bar."""
    if not per_file:
        return None
    return max(1, round(upload_requests(per_file["by_kind"])))


def floor_s(files: int, put_median_s: float | None, requests: int | None) -> float | None:
    """files x the median PUT x requests per file (None if either is not measured)."""
    if put_median_s is None or requests is None:
        return None
    return files * put_median_s * requests


def floor_name(requests: int | None) -> str:
    """``one-request`` or ``3-request`` (the floor's label)."""
    return "one-request" if requests in (None, 1) else f"{requests}-request"


def median_ms(times_ns: list[int]) -> float | None:
    """The median of ``times_ns`` in milliseconds (None for none)."""
    return statistics.median(times_ns) / 1e6 if times_ns else None


def inconsistencies(puts: Mapping[str, Any], case_wall_s: float | None) -> list[str]:
    """What in one run's PUT figures cannot be: a negative time, a median PUT or all PUTs
    together longer than the whole run, fewer requests in the gate's log than PUTs sent."""
    if not puts or not puts.get("count"):
        return []
    median = puts["median_ms"]
    times = {
        "put_median_s": None if median is None else median / 1000,
        "put_min_s": None if puts.get("min_ms") is None else puts["min_ms"] / 1000,
        "puts_s": puts["total_s"],
    }
    problems = [*negatives(times), *parts_over_whole("case_wall_s", case_wall_s, times)]
    if puts["requests"] < puts["count"]:
        problems.append(
            f"put_requests ({puts['requests']}) is less than the PUTs sent ({puts['count']}): "
            "a PUT the gate did not log"
        )
    return problems


@dataclass
class PutProbe:
    """Timed PUTs of ``data`` into ``bucket`` of emulator ``em`` with its SDK client, in
    batches (before and after the run they share the load of)."""

    em: Any
    bucket: str
    data: bytes
    put: Put | None = None
    times_ns: list[int] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    sent: int = 0

    def warm(self) -> None:
        """Build the client and send one untimed PUT (its connection is then open)."""
        self.put = sdk_put(self.em.client(), self.bucket)
        self.put(f"{KEY_PREFIX}warm", self.data)

    def batch(self, n: int, label: str) -> None:
        """``n`` timed PUTs, one after the other; their requests counted from the gate log."""
        if n <= 0:
            return
        if self.put is None:
            self.warm()
        assert self.put is not None
        offset = common.gate_log_offset(self.em)
        for i in range(n):
            key = f"{KEY_PREFIX}{label}-{i:03d}"
            t0 = time.monotonic_ns()
            self.put(key, self.data)
            self.times_ns.append(time.monotonic_ns() - t0)
        self.sent += n

        def logged() -> Counter[str] | None:
            found = Counter(
                common.request_kind(m, p, self.bucket)
                for m, p in common.gate_requests(self.em, self.bucket, offset)
            )
            return found if upload_requests(found) >= n else None

        try:
            found = common.wait_for("the PUTs in the gate's log", logged, LOG_WAIT_S, 0.02)
        except TimeoutError:
            found = Counter(
                common.request_kind(m, p, self.bucket)
                for m, p in common.gate_requests(self.em, self.bucket, offset)
            )
        self.kinds.update(found)

    def as_json(self) -> dict[str, Any]:
        """The run's PUT figures (times in ms; ``requests``: upload requests the gate logged
        during the batches, listings of the mount left out but shown by kind)."""
        ms = [t / 1e6 for t in self.times_ns]
        return {
            "count": self.sent,
            "median_ms": None if not ms else round(statistics.median(ms), 3),
            "min_ms": None if not ms else round(min(ms), 3),
            "max_ms": None if not ms else round(max(ms), 3),
            "total_s": round(sum(ms) / 1000, 4),
            "times_ms": [round(v, 3) for v in ms],
            "requests": int(upload_requests(self.kinds)),
            "requests_by_kind": dict(self.kinds.most_common()),
        }
