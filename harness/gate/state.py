"""The gate's state: bucket ownership and access settings, object access metadata (persisted
in the state file), write events and resumable uploads (in memory). The same for every
store."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
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
    file), write events and resumable uploads (in memory). Thread-safe; the file is written
    outside the lock that readers take, so a save never holds up a decision."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._version = 0
        self._saved_version = 0
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
        """Record (or change) a bucket's owner, public flag and (if given) access settings.
        Without ``settings`` a bucket keeps its settings, unless its owner changes: a bucket
        given to another account starts with none (its ACLs and policies were the old
        owner's), as do its objects."""
        with self._lock:
            known = self._buckets.get(name)
            same_owner = known is not None and known.owner == owner
            if settings is None:
                settings = dict(known.settings) if known is not None and same_owner else {}
            if known is not None and not same_owner:
                self._objects.pop(name, None)
            self._buckets[name] = Bucket(owner, public, settings)
            snapshot = self._changed()
        self._save(snapshot)

    def update_settings(self, name: str, **changes: Any) -> None:
        """Change some access settings of a known bucket (a value of None removes the key)."""

        def apply(settings: dict[str, Any]) -> dict[str, Any]:
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            return settings

        self.modify_settings(name, apply)

    def modify_settings(
        self,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        owner: str | None = None,
    ) -> dict[str, Any] | None:
        """Replace a known bucket's settings by ``change(a copy of them)``, atomically (two
        configuration calls on one bucket cannot lose each other's change); returns the new
        settings, None if the bucket is unknown or (with ``owner``) owned by someone else
        by now. ``change`` must be quick and must not call back into the state."""
        with self._lock:
            known = self._buckets.get(name)
            if known is None or (owner is not None and known.owner != owner):
                return None
            settings = change(dict(known.settings))
            self._buckets[name] = replace(known, settings=settings)
            snapshot = self._changed()
        self._save(snapshot)
        return dict(settings)

    def drop_bucket(self, name: str) -> None:
        """Forget a deleted bucket and its objects' metadata."""
        with self._lock:
            had_objects = self._objects.pop(name, None) is not None
            if self._buckets.pop(name, None) is None and not had_objects:
                return
            snapshot = self._changed()
        self._save(snapshot)

    def object_meta(self, bucket: str, key: str) -> dict[str, Any] | None:
        """Access metadata of one object (its ACL, its owner), None if it has none."""
        with self._lock:
            meta = self._objects.get(bucket, {}).get(key)
            return dict(meta) if meta is not None else None

    def set_object_meta(self, bucket: str, key: str, meta: dict[str, Any] | None) -> None:
        """Record an object's access metadata; None removes it (the object has the
        defaults). Nothing is written when nothing changes."""
        self.set_objects_meta(bucket, {key: meta})

    def set_objects_meta(self, bucket: str, metas: dict[str, dict[str, Any] | None]) -> None:
        """:meth:`set_object_meta` for several objects of ``bucket``, with one save."""
        with self._lock:
            objects = self._objects.get(bucket, {})
            changed = False
            for key, meta in metas.items():
                if objects.get(key) == meta:
                    continue
                changed = True
                if meta is None:
                    objects.pop(key, None)
                else:
                    objects[key] = dict(meta)
            if not changed:
                return
            if objects:
                self._objects[bucket] = objects
            else:
                self._objects.pop(bucket, None)
            snapshot = self._changed()
        self._save(snapshot)

    def _changed(self) -> tuple[int, dict[str, Any]]:
        """A new version of the persisted part and its snapshot (call with the lock held)."""
        self._version += 1
        buckets = {
            name: {"owner": b.owner, "public": b.public, "settings": dict(b.settings)}
            for name, b in sorted(self._buckets.items())
        }
        objects = {name: dict(keys) for name, keys in self._objects.items()}
        return self._version, {"buckets": buckets, "objects": objects}

    def _save(self, snapshot: tuple[int, dict[str, Any]]) -> None:
        """Write a snapshot unless a newer one was written already (saves of two threads
        may finish in any order; the file always ends with the newest)."""
        version, data = snapshot
        text = json.dumps(data, indent=1, sort_keys=True)
        with self._save_lock:
            if version <= self._saved_version:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            tmp.replace(self.path)
            self._saved_version = version

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
