"""Buckets for tests: the four kinds the smoke matrix covers, readable from the store itself.

A ``TestBucket`` knows its store, kind and seeded objects, builds its ``file_mounts`` entry
for a mode, and reads keys straight from the emulator (with the owner's credentials), so a
test checks what really reached the store, not what a node's cache shows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.accounts import OTHER, USER
from harness.emulators import fleet
from harness.emulators.base import PublicAccessUnavailable
from harness.testing import access

SKY_MANAGED = "sky_managed"
PRIVATE_BY_USER = "external_private_by_user"
PUBLIC_BY_USER = "external_public_by_user"
PUBLIC_NOT_BY_USER = "public_not_by_user"
KINDS = (SKY_MANAGED, PRIVATE_BY_USER, PUBLIC_BY_USER, PUBLIC_NOT_BY_USER)
WRITABLE_KINDS = (SKY_MANAGED, PRIVATE_BY_USER, PUBLIC_BY_USER)

SEED_KEY = "seed/hello.txt"


def unique_name(prefix: str) -> str:
    """A bucket name valid in every store: lowercase, digits and dashes, <= 63 chars. In a
    target run it starts with the run's ``PREFIX-RUNID`` (so clean-up finds it)."""
    tag = access.bucket_tag()
    if tag:
        return f"{tag}-{prefix[:30].rstrip('-')}-{uuid.uuid4().hex[:8]}".lower()
    return f"{prefix[:40]}-{uuid.uuid4().hex[:10]}".lower()


@dataclass
class TestBucket:
    """A bucket made for one test (or one module's cluster)."""

    __test__ = False  # not a pytest test class

    store: str
    kind: str
    name: str
    seed: dict[str, bytes]
    source_dir: Path | None = None
    owner: str = USER
    url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def writable(self) -> bool:
        """True if the user's credentials may write to it."""
        return self.kind in WRITABLE_KINDS

    def mount_entry(self, mode: str, **options: Any) -> dict[str, Any]:
        """The task's file_mounts value for this bucket in ``mode``."""
        if self.kind == SKY_MANAGED:
            entry: dict[str, Any] = {
                "name": self.name,
                "source": str(self.source_dir),
                "store": self.store,
                "mode": mode,
            }
        else:
            entry = {"source": self.url, "mode": mode}
        entry.update(options)
        return entry

    def list_keys(self) -> list[str]:
        """Every key in the bucket, read from the store."""
        return list_keys(self.store, self.name, self.owner)

    def read(self, key: str) -> bytes:
        """The content of ``key``, read from the store."""
        return read_object(self.store, self.name, key, self.owner)

    def events(self) -> list[fleet.WriteEvent]:
        """Completed writes to this bucket, in completion order (from the gate)."""
        return access.store_access(self.store).events(self.name)

    def delete(self) -> None:
        """Remove the bucket and its objects (no error if it is gone)."""
        access.store_access(self.store).delete_bucket(self.name)


def list_keys(store: str, bucket: str, owner: str | None = USER) -> list[str]:
    """Every key of ``bucket`` in ``store``, listed with ``owner``'s credentials."""
    return access.store_access(store).list_keys(bucket, owner)


def read_object(store: str, bucket: str, key: str, owner: str | None = USER) -> bytes:
    """The content of ``key`` in ``bucket``, read from the store with ``owner``'s credentials."""
    return access.store_access(store).read_object(bucket, key, owner)


def write_object(store: str, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
    """Write ``data`` to ``key`` in ``bucket`` of ``store`` with ``owner``'s credentials."""
    access.store_access(store).write_object(bucket, key, data, owner)


def public_unavailable(store: str) -> str | None:
    """Why this run cannot make a bucket of ``store`` public through its API (the store's
    PublicAccessUnavailable message, naming the fix), or None if it can."""
    try:
        access.store_access(store).check_public_possible()
    except PublicAccessUnavailable as e:
        return str(e)
    return None


def needs_public(kind: str) -> bool:
    """True for the bucket kinds the harness makes public before a task runs."""
    return kind not in (SKY_MANAGED, PRIVATE_BY_USER)


def make_test_bucket(store: str, kind: str, workdir: Path, prefix: str = "t") -> TestBucket:
    """Create a bucket of ``kind`` in ``store`` seeded with one object.

    Sky-managed buckets are only named here (skycore creates them from ``source_dir`` at
    launch); the other kinds are created now, as they would exist before a task runs, public
    by the store's own mechanism (its emulator's ``make_public``). Skipped, with the reason,
    where the store cannot make a bucket public through its API in this run.
    """
    name = unique_name(f"{prefix}-{store}-{kind.replace('_', '-')[:18]}")
    seed = {SEED_KEY: f"seeded into {name}\n".encode()}
    if kind == SKY_MANAGED:
        source = workdir / name
        (source / "seed").mkdir(parents=True, exist_ok=True)
        (source / SEED_KEY).write_bytes(seed[SEED_KEY])
        url = access.store_access(store).bucket_url(name, USER)
        return TestBucket(store, kind, name, seed, source_dir=source, url=url)
    owner = OTHER if kind == PUBLIC_NOT_BY_USER else USER
    target = access.target()
    if owner == OTHER and target is not None and not target.has_other:
        import pytest

        pytest.skip(access.NO_OTHER_ACCOUNT)
    public = needs_public(kind)
    reason = public_unavailable(store) if public else None
    if reason:  # the store makes buckets public only outside its API
        import pytest

        pytest.skip(reason)
    url = access.store_access(store).make_bucket(name, owner=owner, public=public, objects=seed)
    return TestBucket(store, kind, name, seed, owner=owner, url=url)
