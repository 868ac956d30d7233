"""The GCS gate's bookkeeping after a successful response: bucket creation and deletion,
``iamConfiguration`` changes mirrored into the gate state, the ACLs of new objects, the
bucket listing filtered to the caller's buckets, resumable uploads and write events; and the
parsed access settings of a bucket, cached while they do not change."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.gate.protocol import Exchange, Success
from harness.gate.rules import Access, Bucket, Kind
from harness.gate.state import GateState
from harness.store_gates.gcs import access as ga
from harness.store_gates.gcs.requests import GcsDetail, detail_of, json_object

_BKT = "storage.buckets."


class GcsBookkeeping:
    """What the GCS gate records from successful responses (a base class of
    GcsGateProtocol), and the parsed access settings both decisions and bookkeeping read."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[Bucket, ga.BucketAccess]] = {}
        self._upload_acls: dict[str, str] = {}
        """resumable upload id -> the predefinedAcl its start asked for"""

    def bucket_access(self, state: GateState, name: str | None) -> ga.BucketAccess | None:
        """The parsed access settings of a known bucket (cached while they do not change)."""
        bucket = state.bucket(name or "")
        if bucket is None:
            return None
        cached = self._parsed.get(name or "")
        if cached is not None and cached[0] is bucket:
            return cached[1]
        parsed = ga.BucketAccess.parse(bucket.owner, bucket.settings, bucket.public)
        self._parsed[name or ""] = (bucket, parsed)
        return parsed

    def object_acl(self, state: GateState, bucket: str, key: str, known: ga.BucketAccess) -> ga.Acl:
        """An object's ACL as the gate knows it (the default one unless recorded)."""
        meta = state.object_meta(bucket, key)
        if meta and isinstance(meta.get("acl"), list):
            return [list(e) for e in meta["acl"]]
        return ga.default_acl(known, known.owner)

    def wants_whole_response(self, ex: Exchange, access: Access) -> bool:
        """Resumable upload starts (their upload id), ACL calls and writes that set an ACL
        (the resource gets the gate's ACL) and bucket resources in JSON (the gate's
        ``iamConfiguration``)."""
        if "uploadType=resumable" in ex.path:
            return True
        detail = access.detail if isinstance(access.detail, GcsDetail) else None
        if detail is not None and (detail.acl_call in ("get", "set") or detail.sets_acl):
            return True
        if (
            access.bucket
            and access.key is None
            and access.action in (_BKT + "get", _BKT + "update")
        ):
            return not (detail and detail.xml)
        return False

    def on_success(self, done: Success) -> bytes:
        """Record what a successful request changed; returns the body for the client."""
        ex, access, identity, data = done.ex, done.access, done.identity, done.data
        state, detail = ex.state, detail_of(access)
        obj = json_object(data)
        if access.kind is Kind.CREATE_BUCKET and identity:
            name = obj.get("name") or access.bucket
            if isinstance(name, str) and state.bucket(name) is None:
                predefined_default = ex.query.get("predefinedDefaultObjectAcl", [None])[0]
                settings = ga.new_bucket_settings(
                    detail.body, detail.predefined, predefined_default
                )
                state.set_bucket(name, identity, public=False, settings=settings)
            return self._bucket_resource(state, obj, data)
        if access.kind is Kind.LIST_BUCKETS and identity and isinstance(obj.get("items"), list):
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            obj["items"] = [i for i in obj["items"] if i.get("name") in mine]
            return json.dumps(obj).encode()
        if access.deletes_bucket:
            state.drop_bucket(access.bucket or "")
            self._parsed.pop(access.bucket or "", None)
            return data
        if access.key is None and access.action in (_BKT + "get", _BKT + "update"):
            config = detail.body.get("iamConfiguration")
            if access.action == _BKT + "update" and config is not None:
                state.modify_settings(access.bucket or "", configured(config))
            return self._bucket_resource(state, obj, data)
        if access.event is None and "uploadType=resumable" in ex.path and ex.method == "POST":
            location = done.up.header("Location") or ""
            upload_id = parse_qs(urlsplit(location).query).get("upload_id", [None])[0]
            if upload_id and access.bucket:
                state.add_upload(upload_id, access.bucket, identity)
                if detail.predefined:
                    self._upload_acls[upload_id] = detail.predefined
            return data
        if access.event == "delete":
            state.record(access.bucket or "", access.key or "", 0, "delete")
            state.set_object_meta(access.bucket or "", access.key or "", None)
            return data
        if access.event is None:
            if detail.new_acl is not None and obj.get("name"):
                return self._object_resource(state, access, obj, detail.new_acl)
            return data
        return self._written(done, obj)

    def _written(self, done: Success, obj: dict[str, Any]) -> bytes:
        """A new object (upload, copy, rewrite, compose): its write event and its ACL."""
        ex, access, identity, data = done.ex, done.access, done.identity, done.data
        state, detail = ex.state, detail_of(access)
        if access.event == "rewrite":
            if not obj.get("done"):
                return data
            obj = obj.get("resource") or {}
        name = obj.get("name")
        if not isinstance(name, str):
            if access.event == "put" and access.key and not obj:  # XML-style PUT /bucket/key
                state.record(access.bucket or "", access.key, ex.content_length(), "put")
                self._record_new_acl(state, access.bucket or "", access.key, identity, None)
            return data
        try:
            size = int(obj.get("size", -1))
        except (TypeError, ValueError):
            size = -1
        bucket = str(obj.get("bucket") or access.bucket)
        state.record(bucket, name, size, access.event or "put")
        predefined = detail.predefined
        if access.event == "resumable":
            upload_id = ex.query.get("upload_id", [""])[0]
            state.finish_upload(upload_id)
            predefined = self._upload_acls.pop(upload_id, None)
        acl = detail.new_acl
        if acl is None and predefined:
            acl = ga.predefined_acl(predefined, identity)
        self._record_new_acl(state, bucket, name, identity, acl)
        if acl is None or access.event == "rewrite":
            return data  # the upload's own response, unchanged (the data path stays cheap)
        return self._object_resource(state, access, obj, acl)

    def _record_new_acl(
        self, state: GateState, bucket: str, key: str, writer: str | None, acl: ga.Acl | None
    ) -> None:
        """Record a new object's ACL (its writer's default unless ``acl``)."""
        known = self.bucket_access(state, bucket)
        if known is not None:
            acl = acl if acl is not None else ga.default_acl(known, writer)
            state.set_object_meta(bucket, key, ga.stored_acl(known, acl))

    def _object_resource(
        self, state: GateState, access: Access, obj: dict[str, Any], acl: ga.Acl
    ) -> bytes:
        """An object resource whose ``acl`` is the gate's (none under uniform access)."""
        known = self.bucket_access(state, obj.get("bucket") or access.bucket)
        if known is None:
            return json.dumps(obj).encode()
        if access.event is None:  # a metadata update (new objects are recorded already)
            state.set_object_meta(
                str(obj.get("bucket")), str(obj["name"]), ga.stored_acl(known, acl)
            )
        obj.pop("acl", None)
        if not known.uniform:
            obj["acl"] = ga.acl_resource(acl, str(obj.get("bucket")), str(obj["name"]))
        return json.dumps(obj).encode()

    def _bucket_resource(self, state: GateState, obj: dict[str, Any], data: bytes) -> bytes:
        """A bucket resource with the gate's ``iamConfiguration``."""
        known = self.bucket_access(state, obj.get("name"))
        if known is None:
            return data
        obj["iamConfiguration"] = ga.iam_configuration_resource(known)
        return json.dumps(obj).encode()


Change = Callable[[dict[str, Any]], dict[str, Any]]
"""A change of a bucket's settings, for GateState.modify_settings."""


def configured(config: Any) -> Change:
    """The settings change applying a bucket resource's
    ``iamConfiguration`` to the bucket's current uniform access and prevention. Raises
    AccessError for an invalid value (the decision checks that first)."""

    def change(settings: dict[str, Any]) -> dict[str, Any]:
        uniform = bool(settings.get("uniform", False))
        prevention = str(settings.get("prevention", "inherited"))
        uniform, prevention = ga.iam_configuration(config, uniform, prevention)
        return {**settings, "uniform": uniform, "prevention": prevention}

    return change
