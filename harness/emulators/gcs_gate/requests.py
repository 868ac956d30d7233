"""GCS requests as the gate reads them: JSON API (and XML-style) paths classified into the
GCS permission each needs (``Access.action``), the buckets and objects it touches and what
it does to ACLs (``Access.detail``, a :class:`GcsDetail`). Pure: no networking."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.gate.rules import Access, Kind, header, split_path

_OBJ = "storage.objects."
_BKT = "storage.buckets."


@dataclass
class GcsDetail:
    """What the GCS protocol carries from classification to decision and bookkeeping."""

    sources: tuple[tuple[str, str | None], ...] = ()
    """(bucket, object) read by a copy, rewrite or compose."""
    predefined: str | None = None
    """The predefinedAcl (destinationPredefinedAcl) of an object write."""
    body: dict[str, Any] = field(default_factory=dict)
    """The small JSON body of a metadata call (bucket insert/patch, object patch, ACL)."""
    sets_acl: bool = False
    """The request changes an object's ACL (predefined ACL, ``acl`` in the body, /acl)."""
    acl_call: str | None = None
    """``get``/``set``/``delete`` of ``/o/{object}/acl[/{entity}]``, ``bucket`` for bucket ACLs."""
    entity: str | None = None
    new_acl: list[list[str]] | None = None
    """The object ACL the request sets (computed and checked by the decision)."""
    iam: str | None = None
    """``get``/``set``/``test`` of ``/b/{bucket}/iam[/testPermissions]``."""
    xml: bool = False
    """A signed URL (an XML API request): errors in XML."""


def detail_of(access: Access) -> GcsDetail:
    """The request's :class:`GcsDetail`, attached (empty) first if it has none."""
    if not isinstance(access.detail, GcsDetail):
        access.detail = GcsDetail()
    return access.detail


def classify_gcs(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify a GCS JSON API request (or an XML-style ``/bucket/object`` request); its
    ``action`` is the GCS permission the request needs."""
    raw_path, query = split_path(path)
    segs = [unquote(s) for s in raw_path.strip("/").split("/")] if raw_path.strip("/") else []
    method = method.upper()
    reading = method in ("GET", "HEAD")
    if segs[:2] == ["batch", "storage"]:
        return Access(Kind.WRITE, needs_body=True)
    if segs[:1] == ["download"]:
        segs = segs[1:]
        if segs[:3] == ["storage", "v1", "b"] and len(segs) >= 4 and reading:
            key = "/".join(segs[5:]) or None
            return Access(Kind.READ, segs[3], key, action=_OBJ + ("get" if key else "list"))
        return Access(Kind.DENY)
    if segs[:1] == ["upload"]:
        if segs[:3] != ["upload", "storage", "v1"] or len(segs) < 5 or segs[3] != "b":
            return Access(Kind.DENY)
        access = _classify_upload(method, segs[4], query, headers)
        access.action = _OBJ + "create"
        detail_of(access).predefined = query.get("predefinedAcl", [None])[0]
        return access
    if segs[:1] == ["_internal"]:
        return Access(Kind.DENY)
    if segs[:1] == ["storage"]:
        if segs[:3] != ["storage", "v1", "b"]:
            return Access(Kind.DENY)
        return _classify_gcs_json(method, segs[3:], query)
    return _classify_xml(method, segs)


def _classify_upload(
    method: str, bucket: str, query: Mapping[str, list[str]], headers: Mapping[str, str]
) -> Access:
    upload_type = query.get("uploadType", [""])[0]
    if method in ("PUT", "POST") and "upload_id" in query:
        # a chunk of a resumable upload (rclone POSTs them, the Python SDK PUTs them):
        # the object is written when the last chunk (one with the total size) completes
        span = (header(headers, "content-range") or "").strip()
        last = not span.endswith("/*") and not span.startswith("bytes */")
        name = query.get("name", [None])[0]
        return Access(Kind.WRITE, bucket, name, event="resumable" if last else None)
    if method == "POST" and upload_type == "resumable":
        return Access(Kind.WRITE, bucket, query.get("name", [None])[0])
    if method == "POST":
        return Access(Kind.WRITE, bucket, query.get("name", [None])[0], event="put")
    return Access(Kind.WRITE, bucket)


def _classify_xml(method: str, segs: list[str]) -> Access:
    """XML-style paths served by fake-gcs-server: /bucket/object."""
    reading = method in ("GET", "HEAD")
    if not segs:
        return Access(Kind.LIST_BUCKETS if reading else Kind.DENY, action=_BKT + "list")
    bucket, key = segs[0], "/".join(segs[1:]) or None
    if reading:
        return Access(Kind.READ, bucket, key, action=_OBJ + ("get" if key else "list"))
    if key is None:
        return Access(
            Kind.WRITE, bucket, action=_BKT + ("delete" if method == "DELETE" else "update")
        )
    event = {"PUT": "put", "DELETE": "delete"}.get(method)
    action = _OBJ + ("delete" if method == "DELETE" else "create")
    return Access(Kind.WRITE, bucket, key, event=event, action=action)


def _classify_gcs_json(method: str, rest: list[str], query: Mapping[str, list[str]]) -> Access:
    """Classify ``/storage/v1/b/<rest...>`` (rest already percent-decoded per segment)."""
    reading = method in ("GET", "HEAD")
    if not rest:
        if reading:
            return Access(Kind.LIST_BUCKETS, action=_BKT + "list")
        if method == "POST":
            return Access(Kind.CREATE_BUCKET, needs_body=True, action=_BKT + "create")
        return Access(Kind.DENY)
    bucket = rest[0]
    if len(rest) == 1:
        if reading:
            return Access(Kind.READ, bucket, action=_BKT + "get")
        if method == "DELETE":
            return Access(Kind.WRITE, bucket, deletes_bucket=True, action=_BKT + "delete")
        return Access(Kind.WRITE, bucket, action=_BKT + "update", needs_body=True)
    if rest[1] == "iam":
        what = "test" if rest[2:] == ["testPermissions"] else ("get" if reading else "set")
        perm = {"get": "getIamPolicy", "set": "setIamPolicy", "test": "get"}[what]
        access = Access(Kind.READ if reading else Kind.WRITE, bucket, action=_BKT + perm)
        detail_of(access).iam = what
        return access
    if rest[1] in ("acl", "defaultObjectAcl"):
        perm = "getIamPolicy" if reading else "setIamPolicy"
        access = Access(Kind.READ if reading else Kind.WRITE, bucket, action=_BKT + perm)
        detail_of(access).acl_call = "bucket"
        return access
    if rest[1] != "o":
        return Access(Kind.READ if reading else Kind.WRITE, bucket, action=_BKT + "update")
    if len(rest) == 2:
        if reading:
            return Access(Kind.READ, bucket, action=_OBJ + "list")
        event = "put" if method == "POST" else None
        return Access(Kind.WRITE, bucket, event=event, action=_OBJ + "create")
    return _classify_object(method, bucket, rest[2], rest[3:], query)


def _classify_object(
    method: str, bucket: str, obj: str, tail: list[str], query: Mapping[str, list[str]]
) -> Access:
    reading = method in ("GET", "HEAD")
    dest_acl = query.get("destinationPredefinedAcl", [None])[0]
    if tail[:1] in (["rewriteTo"], ["copyTo"]) and len(tail) >= 5:
        dest_bucket, dest_key = tail[2], "/".join(tail[4:])
        event = "rewrite" if tail[0] == "rewriteTo" else "copy"
        access = Access(
            Kind.WRITE,
            dest_bucket,
            dest_key,
            sources=(bucket,),
            event=event,
            action=_OBJ + "create",
        )
        access.detail = GcsDetail(sources=((bucket, obj),), predefined=dest_acl)
        return access
    if tail == ["compose"]:
        access = Access(
            Kind.WRITE, bucket, obj, sources=(bucket,), event="compose", action=_OBJ + "create"
        )
        access.detail = GcsDetail(sources=((bucket, None),), predefined=dest_acl)
        return access
    if tail[:1] == ["acl"]:
        call = "get" if reading else ("delete" if method == "DELETE" else "set")
        perm = "getIamPolicy" if reading else "setIamPolicy"
        access = Access(Kind.READ if reading else Kind.WRITE, bucket, obj, action=_OBJ + perm)
        access.needs_body = call == "set"
        access.detail = GcsDetail(acl_call=call, entity="/".join(tail[1:]) or None)
        return access
    if reading:
        return Access(Kind.READ, bucket, obj, action=_OBJ + "get")
    if not tail and method == "DELETE":
        return Access(Kind.WRITE, bucket, obj, event="delete", action=_OBJ + "delete")
    access = Access(Kind.WRITE, bucket, obj, action=_OBJ + "update", needs_body=not tail)
    access.detail = GcsDetail(predefined=query.get("predefinedAcl", [None])[0])
    return access


_BATCH_LINE = re.compile(rb"^(GET|HEAD|POST|PUT|PATCH|DELETE) (\S+) HTTP/1\.[01]\r?$", re.M)


def classify_gcs_batch(body: bytes) -> Access:
    """Classify a GCS batch request by the sub-requests in its multipart body."""
    parts = [
        classify_gcs(m.group(1).decode(), _strip_origin(m.group(2).decode()), {})
        for m in _BATCH_LINE.finditer(body)
    ]
    if not parts:
        return Access(Kind.DENY)
    return Access(Kind.WRITE, sub=parts)


def _strip_origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme:
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return url


def gcs_bucket_from_insert(body: bytes) -> str | None:
    """The bucket name in a GCS bucket-insert body (JSON ``{"name": ...}``)."""
    name = json_object(body).get("name")
    return name if isinstance(name, str) else None


def json_object(data: bytes) -> dict[str, Any]:
    """A JSON body as a dict: {} when empty, malformed or not an object."""
    try:
        obj = json.loads(data or b"{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}
