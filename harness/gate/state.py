"""The gate's state: bucket ownership and access settings, object access metadata (persisted
in the state file), write events and resumable uploads (in memory). The same for every
store."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
    """Bucket ownership and access settings, object access metadata (persisted in the state
    file), write events and resumable uploads (in memory). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.create_lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}
        self._objects: dict[str, dict[str, dict[str, Any]]] = {}
        self._events: dict[str, list[Event]] = {}
        self._uploads: dict[str, tuple[str, str | None]] = {}
        if path.exists():
            data = json.loads(path.read_text() or "{}")
            for name, info in data.get("buckets", {}).items():
                self._buckets[name] = Bucket(
                    info["owner"], bool(info.get("public", False)), dict(info.get("settings", {}))
                )
            for name, objects in data.get("objects", {}).items():
                if name in self._buckets:
                    self._objects[name] = dict(objects)

    def buckets(self) -> dict[str, Bucket]:
        """A snapshot of the bucket table."""
        with self._lock:
            return dict(self._buckets)

    def bucket(self, name: str | None) -> Bucket | None:
        """One bucket of the table, None if the gate does not know it."""
        with self._lock:
            return self._buckets.get(name or "")

    def set_bucket(
        self, name: str, owner: str, public: bool, settings: dict[str, Any] | None = None
    ) -> None:
        """Record (or change) a bucket's owner, public flag and (if given) access settings."""
        with self._lock:
            known = self._buckets.get(name)
            kept = dict(known.settings) if known is not None and settings is None else {}
            self._buckets[name] = Bucket(owner, public, settings if settings is not None else kept)
            self._save()

    def update_settings(self, name: str, **changes: Any) -> None:
        """Change some access settings of a known bucket (a value of None removes the key)."""
        with self._lock:
            known = self._buckets.get(name)
            if known is None:
                return
            settings = dict(known.settings)
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            self._buckets[name] = replace(known, settings=settings)
            self._save()

    def drop_bucket(self, name: str) -> None:
        """Forget a deleted bucket and its objects' metadata."""
        with self._lock:
            had_objects = self._objects.pop(name, None) is not None
            if self._buckets.pop(name, None) is not None or had_objects:
                self._save()

    def object_meta(self, bucket: str, key: str) -> dict[str, Any] | None:
        """Access metadata of one object (its ACL, its owner), None if it has none."""
        with self._lock:
            meta = self._objects.get(bucket, {}).get(key)
            return dict(meta) if meta is not None else None

    def set_object_meta(self, bucket: str, key: str, meta: dict[str, Any] | None) -> None:
        """Record an object's access metadata; None removes it (the object has the
        defaults). Nothing is written when nothing changes."""
        with self._lock:
            objects = self._objects.get(bucket, {})
            if objects.get(key) == meta:
                return
            if meta is None:
                objects.pop(key, None)
                if not objects:
                    self._objects.pop(bucket, None)
            else:
                self._objects.setdefault(bucket, objects)[key] = dict(meta)
            self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        buckets = {
            name: {"owner": b.owner, "public": b.public, "settings": dict(b.settings)}
            for name, b in sorted(self._buckets.items())
        }
        data = {"buckets": buckets, "objects": self._objects}
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
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
