"""The S3 gate's bookkeeping after a successful response: bucket creation and deletion,
the access configuration mirrored into the gate state (ACLs, ownership, Block Public
Access), object ACLs of new objects, the ListBuckets answer and write events."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import partial
from html import unescape
from typing import Any

from harness.gate.access_features import AccessFeatures
from harness.gate.protocol import Exchange, Success
from harness.gate.rules import Access, Kind
from harness.store_gates.s3.access import NO_BLOCK, BucketAccess
from harness.store_gates.s3.acl import AclError, acl_to_xml
from harness.store_gates.s3.features import new_bucket
from harness.store_gates.s3.listing import list_buckets_xml
from harness.store_gates.s3.mirror import (
    ACCESS,
    SettingsCache,
    acl_meta,
    change_access,
    effective_object_acl,
    write_meta,
)
from harness.store_gates.s3.post import PostUpload
from harness.store_gates.s3.requests import S3Detail, operation
from harness.store_gates.s3.upstream import quoted_key, upstream_size

MIRRORED = frozenset(
    (
        "PutBucketAcl",
        "PutObjectAcl",
        "GetObjectAcl",
        "PutBucketOwnershipControls",
        "DeleteBucketOwnershipControls",
        "PutPublicAccessBlock",
        "DeletePublicAccessBlock",
    )
)
"""Operations whose success the gate mirrors into its state (or whose answer it rewrites)."""
_UPLOAD_ID = re.compile(rb"<UploadId>(.*?)</UploadId>", re.S)
_DELETED = re.compile(rb"<Deleted>(.*?)</Deleted>", re.S)
_DELETED_KEY = re.compile(rb"<Key>(.*?)</Key>", re.S)


def deleted_keys(body: bytes) -> list[tuple[str, bool]]:
    """(key, whether a version of it was named) of each <Deleted> entry of a
    DeleteObjects answer, in order; keys reported as <Error> are not in it."""
    found = []
    for entry in _DELETED.finditer(body):
        key = _DELETED_KEY.search(entry.group(1))
        if key is not None:
            found.append((unescape(key.group(1).decode()), b"<VersionId>" in entry.group(1)))
    return found


class S3Bookkeeping:
    """What the S3 gate records from successful responses (a base class of
    S3GateProtocol)."""

    settings: SettingsCache
    features: AccessFeatures

    def __init__(self) -> None:
        self._pending: dict[str, dict[str, Any]] = {}
        """upload id -> object metadata its CreateMultipartUpload asked for"""
        self._pending_lock = threading.Lock()

    def on_success(self, done: Success) -> bytes:
        ex, access, identity, data = done.ex, done.access, done.identity, done.data
        state = ex.state
        name = access.bucket or ""
        op = operation(access)
        if access.kind is Kind.CREATE_BUCKET and identity:
            if state.bucket(name) is None:
                detail = access.detail
                new = detail.config if isinstance(detail, S3Detail) else None
                settings = (new or new_bucket(self.features, identity)).to_json()
                state.set_bucket(name, identity, public=False, settings={ACCESS: settings})
            return data
        if access.kind is Kind.LIST_BUCKETS and identity:
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            return list_buckets_xml(data, identity, mine, ex.query)
        if access.deletes_bucket:
            state.drop_bucket(name)
            self.settings.forget(name)
            return data
        known = state.bucket(name)
        if known is None:
            return self._record(done)
        bucket = self.settings.access(name, known)
        if op in MIRRORED or op == "CreateMultipartUpload":
            return self._mirror(done, op, bucket)
        return self._record(done)

    def _mirror(self, done: Success, op: str, bucket: BucketAccess) -> bytes:
        """``bucket``: the settings the decision saw (for object ACLs; bucket settings are
        changed from the current ones, under the state's lock)."""
        ex, access, data = done.ex, done.access, done.data
        name, key = access.bucket or "", access.key or ""
        detail = access.detail
        config = detail.config if isinstance(detail, S3Detail) else None
        if op == "GetObjectAcl":
            meta = ex.state.object_meta(name, key)
            return acl_to_xml(effective_object_acl(bucket, meta, self.features))
        if op == "CreateMultipartUpload" and isinstance(detail, S3Detail) and detail.meta:
            found = _UPLOAD_ID.search(data)
            if found is not None:
                with self._pending_lock:
                    self._pending[unescape(found.group(1).decode())] = detail.meta
            return data
        self.apply_config(ex, op, name, key, bucket, config)
        return data

    def apply_config(
        self, ex: Exchange, op: str, name: str, key: str, bucket: BucketAccess, config: Any
    ) -> None:
        """Record an access configuration change (``op`` one of MIRRORED's Put/Delete
        calls, ``config`` as the request set it) in the gate state; the gate answers these
        calls itself (protocol.GATE_CONFIG_WRITES), so the server behind it need not know
        them."""
        changed: Callable[[BucketAccess], BucketAccess] | None = None
        if op == "PutObjectAcl" and config is not None:
            ex.state.set_object_meta(name, key, acl_meta(bucket, config))
        elif op == "PutBucketAcl" and config is not None:
            changed = partial(BucketAccess.with_acl, acl=config)
        elif op == "PutBucketOwnershipControls" and config is not None:
            changed = partial(BucketAccess.with_ownership, mode=config)
        elif op == "DeleteBucketOwnershipControls":
            changed = partial(BucketAccess.with_ownership, mode=None)
        elif op == "PutPublicAccessBlock" and config is not None:
            changed = partial(BucketAccess.with_block, block=config)
        elif op == "DeletePublicAccessBlock":
            changed = partial(BucketAccess.with_block, block=NO_BLOCK)
        if changed is not None:
            change_access(ex.state, name, bucket.owner, changed, self.features)

    def _record(self, done: Success) -> bytes:
        """Object metadata and write events of a completed write."""
        ex, access, identity, data = done.ex, done.access, done.identity, done.data
        state = ex.state
        name = access.bucket or ""
        if access.event is None:
            return data
        if access.event == "delete":
            if access.key is not None:
                if "versionId" not in ex.query:  # a version's deletion leaves the current
                    state.set_object_meta(name, access.key, None)
                state.record(name, access.key, 0, "delete")
                return data
            deleted = deleted_keys(data)
            cleared: dict[str, dict[str, Any] | None] = {
                key: None for key, version in deleted if not version
            }
            if cleared:
                state.set_objects_meta(name, cleared)
            for key, _ in deleted:
                state.record(name, key, 0, "delete")
            return data
        if b"<Error>" in data:  # S3 may report a failed copy/complete with status 200
            return data
        self._object_written(ex, access, identity)
        decoded = ex.header("x-amz-decoded-content-length")
        if isinstance(access.detail, PostUpload):
            size = access.detail.file_size
        elif access.event == "put" and (decoded or ex.header("content-length")):
            size = int(decoded or ex.header("content-length") or 0)
        else:
            size = upstream_size(ex, "/" + name + "/" + quoted_key(ex.path))
        state.record(name, access.key or "", size, access.event)
        return data

    def _object_written(self, ex: Exchange, access: Access, identity: str | None) -> None:
        known = ex.state.bucket(access.bucket) if access.bucket else None
        if known is None or access.key is None:
            return
        detail = access.detail
        meta: dict[str, Any] | None = None
        if isinstance(detail, S3Detail):
            if detail.op == "CompleteMultipartUpload":
                upload_id = (ex.query.get("uploadId") or [""])[0]
                with self._pending_lock:
                    meta = self._pending.pop(upload_id, None)
            else:
                meta = detail.meta
        elif isinstance(detail, PostUpload):
            bucket = self.settings.access(access.bucket or "", known)
            headers = {"x-amz-acl": detail.acl} if detail.acl else {}
            try:
                meta = write_meta(bucket, identity, headers)[1]
            except AclError:
                meta = None
        ex.state.set_object_meta(access.bucket or "", access.key, meta)
