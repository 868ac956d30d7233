"""The gate's state: bucket ownership (persisted in the state file), write events and
resumable uploads (in memory). The same for every store."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.gate.rules import Bucket

MAX_EVENTS_PER_BUCKET = 200_000  # the oldest go first beyond this


@dataclass(frozen=True)
class Event:
    """A completed write seen by the gate."""

    bucket: str
    key: str
    size: int
    op: str
    t_ns: int


class GateState:
    """Bucket ownership (persisted in the state file), write events and resumable uploads
    (in memory). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.create_lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}
        self._events: dict[str, list[Event]] = {}
        self._uploads: dict[str, tuple[str, str | None]] = {}
        if path.exists():
            data = json.loads(path.read_text() or "{}")
            for name, info in data.get("buckets", {}).items():
                self._buckets[name] = Bucket(info["owner"], bool(info.get("public", False)))

    def buckets(self) -> dict[str, Bucket]:
        """A snapshot of the bucket table."""
        with self._lock:
            return dict(self._buckets)

    def set_bucket(self, name: str, owner: str, public: bool) -> None:
        """Record (or change) a bucket's owner and public flag."""
        with self._lock:
            self._buckets[name] = Bucket(owner, public)
            self._save()

    def drop_bucket(self, name: str) -> None:
        """Forget a deleted bucket."""
        with self._lock:
            if self._buckets.pop(name, None) is not None:
                self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        data = {"buckets": {k: asdict(v) for k, v in sorted(self._buckets.items())}}
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)

    def record(self, bucket: str, key: str, size: int, op: str) -> None:
        """Append a write event stamped now; the list stays in completion order."""
        with self._lock:
            event = Event(bucket, key, size, op, time.time_ns())
            events = self._events.setdefault(bucket, [])
            events.append(event)
            if len(events) > MAX_EVENTS_PER_BUCKET:
                del events[: len(events) - MAX_EVENTS_PER_BUCKET]

    def events(self, bucket: str | None) -> list[Event]:
        """Events of one bucket (all buckets if None), oldest first."""
        with self._lock:
            if bucket is not None:
                return list(self._events.get(bucket, ()))
            return sorted((e for events in self._events.values() for e in events), key=_t_ns)

    def add_upload(self, upload_id: str, bucket: str, owner: str | None) -> None:
        """Remember who started a resumable upload (its id is its credential)."""
        with self._lock:
            self._uploads[upload_id] = (bucket, owner)

    def upload(self, upload_id: str) -> tuple[str, str | None] | None:
        """Bucket and initiator of a resumable upload started through the gate."""
        with self._lock:
            return self._uploads.get(upload_id)

    def finish_upload(self, upload_id: str) -> None:
        """Forget a resumable upload that completed."""
        with self._lock:
            self._uploads.pop(upload_id, None)


def _t_ns(event: Event) -> int:
    return event.t_ns
