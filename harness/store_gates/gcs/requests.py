"""GCS requests as the gate reads them: JSON API (and XML-style) paths classified into the
GCS permission each needs (``Access.action``), the buckets and objects it touches and what
it does to ACLs (``Access.detail``, a :class:`GcsDetail`). Two tables: :data:`SHAPES` names
the resource a path addresses, :data:`ROUTES` gives each resource's route by method and
query; :func:`classify_gcs` looks both up. Pure: no networking."""

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


_B = ("storage", "v1", "b", "{bucket}")
_O = (*_B, "o", "{key}")
_COPY = ("{_}", "{bucket}", "{_}", "{key+}")

SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("batch", "storage", "{_*}"), "batch"),
    (("download", "storage", "v1", "b", "{bucket}", "{_}", "{key+}"), "download object"),
    (("download", "storage", "v1", "b", "{bucket}", "{_*}"), "download bucket"),
    (("download", "{_*}"), "denied"),
    (("upload", "storage", "v1", "b", "{bucket}", "{_*}"), "upload"),
    (("upload", "{_*}"), "denied"),
    (("_internal", "{_*}"), "denied"),
    (("storage", "v1", "b"), "buckets"),
    (_B, "bucket"),
    ((*_B, "iam", "testPermissions"), "iam test"),
    ((*_B, "iam", "{_*}"), "iam"),
    ((*_B, "acl", "{_*}"), "bucket acl"),
    ((*_B, "defaultObjectAcl", "{_*}"), "bucket acl"),
    ((*_B, "o"), "objects"),
    (("storage", "v1", "b", "{source}", "o", "{source_key}", "rewriteTo", *_COPY), "rewrite"),
    (("storage", "v1", "b", "{source}", "o", "{source_key}", "copyTo", *_COPY), "copy"),
    ((*_O, "compose"), "compose"),
    ((*_O, "acl", "{entity*}"), "object acl"),
    (_O, "object"),
    ((*_O, "{_+}"), "object call"),
    ((*_B, "{_+}"), "bucket call"),
    (("storage", "{_*}"), "denied"),
    ((), "xml buckets"),
    (("{bucket}", "{key+}"), "xml object"),
    (("{bucket}",), "xml bucket"),
)
"""(path pattern, resource), first match wins. A pattern's segments are literal, ``{name}``
(one segment), ``{name*}`` (the rest, maybe none) or ``{name+}`` (the rest, one or more);
``_`` names a segment that is not kept."""


@dataclass(frozen=True)
class Route:
    """What a request on one resource is, for one method."""

    kind: Kind
    action: str | None = None
    """The GCS permission the request needs."""
    event: str | None = None
    needs_body: bool = False
    deletes_bucket: bool = False
    copies: str | None = None
    """``object`` (a copy or rewrite reads the source object) or ``bucket`` (a compose
    reads objects of its own bucket)."""
    predefined: str | None = None
    """The query parameter that names the object's predefined ACL."""
    named: bool = False
    """The object is the ``name`` query parameter (an upload)."""
    last_chunk: bool = False
    """The event is recorded only for the last chunk of a resumable upload."""
    iam: str | None = None
    acl_call: str | None = None


READ, ANY = "READ", "*"
"""A row's method: GET or HEAD; any method (or a row's query marker: any query)."""
_R, _W = Kind.READ, Kind.WRITE
_DENY = ((ANY, ANY, Route(Kind.DENY)),)


def _upload(event: str | None = None, last_chunk: bool = False) -> Route:
    """The route of an upload: its object is the ``name`` query parameter."""
    return Route(
        _W, _OBJ + "create", event, predefined="predefinedAcl", named=True, last_chunk=last_chunk
    )


_DEST = "destinationPredefinedAcl"

ROUTES: dict[str, tuple[tuple[str, str, Route], ...]] = {
    "batch": ((ANY, ANY, Route(_W, needs_body=True)),),
    "denied": _DENY,
    "download object": ((READ, ANY, Route(_R, _OBJ + "get")), *_DENY),
    "download bucket": ((READ, ANY, Route(_R, _OBJ + "list")), *_DENY),
    "upload": (
        ("PUT", "upload_id", _upload("resumable", last_chunk=True)),
        ("POST", "upload_id", _upload("resumable", last_chunk=True)),
        ("POST", "uploadType=resumable", _upload()),
        ("POST", ANY, _upload("put")),
        (ANY, ANY, Route(_W, _OBJ + "create", predefined="predefinedAcl")),
    ),
    "buckets": (
        (READ, ANY, Route(Kind.LIST_BUCKETS, _BKT + "list")),
        ("POST", ANY, Route(Kind.CREATE_BUCKET, _BKT + "create", needs_body=True)),
        *_DENY,
    ),
    "bucket": (
        (READ, ANY, Route(_R, _BKT + "get")),
        ("DELETE", ANY, Route(_W, _BKT + "delete", deletes_bucket=True)),
        (ANY, ANY, Route(_W, _BKT + "update", needs_body=True)),
    ),
    "iam test": (
        (READ, ANY, Route(_R, _BKT + "get", iam="test")),
        (ANY, ANY, Route(_W, _BKT + "get", iam="test")),
    ),
    "iam": (
        (READ, ANY, Route(_R, _BKT + "getIamPolicy", iam="get")),
        (ANY, ANY, Route(_W, _BKT + "setIamPolicy", iam="set")),
    ),
    "bucket acl": (
        (READ, ANY, Route(_R, _BKT + "getIamPolicy", acl_call="bucket")),
        (ANY, ANY, Route(_W, _BKT + "setIamPolicy", acl_call="bucket")),
    ),
    "bucket call": (
        (READ, ANY, Route(_R, _BKT + "update")),
        (ANY, ANY, Route(_W, _BKT + "update")),
    ),
    "objects": (
        (READ, ANY, Route(_R, _OBJ + "list")),
        ("POST", ANY, Route(_W, _OBJ + "create", "put")),
        (ANY, ANY, Route(_W, _OBJ + "create")),
    ),
    "rewrite": (
        (ANY, ANY, Route(_W, _OBJ + "create", "rewrite", copies="object", predefined=_DEST)),
    ),
    "copy": ((ANY, ANY, Route(_W, _OBJ + "create", "copy", copies="object", predefined=_DEST)),),
    "compose": (
        (ANY, ANY, Route(_W, _OBJ + "create", "compose", copies="bucket", predefined=_DEST)),
    ),
    "object acl": (
        (READ, ANY, Route(_R, _OBJ + "getIamPolicy", acl_call="get")),
        ("DELETE", ANY, Route(_W, _OBJ + "setIamPolicy", acl_call="delete")),
        (ANY, ANY, Route(_W, _OBJ + "setIamPolicy", needs_body=True, acl_call="set")),
    ),
    "object": (
        (READ, ANY, Route(_R, _OBJ + "get")),
        ("DELETE", ANY, Route(_W, _OBJ + "delete", "delete")),
        (ANY, ANY, Route(_W, _OBJ + "update", needs_body=True, predefined="predefinedAcl")),
    ),
    "object call": (
        (READ, ANY, Route(_R, _OBJ + "get")),
        (ANY, ANY, Route(_W, _OBJ + "update", predefined="predefinedAcl")),
    ),
    "xml buckets": (
        (READ, ANY, Route(Kind.LIST_BUCKETS, _BKT + "list")),
        (ANY, ANY, Route(Kind.DENY, _BKT + "list")),
    ),
    "xml bucket": (
        (READ, ANY, Route(_R, _OBJ + "list")),
        ("DELETE", ANY, Route(_W, _BKT + "delete")),
        (ANY, ANY, Route(_W, _BKT + "update")),
    ),
    "xml object": (
        (READ, ANY, Route(_R, _OBJ + "get")),
        ("PUT", ANY, Route(_W, _OBJ + "create", "put")),
        ("DELETE", ANY, Route(_W, _OBJ + "delete", "delete")),
        (ANY, ANY, Route(_W, _OBJ + "create")),
    ),
}
"""resource -> rows of (method, query marker, route), first match wins: a marker is a query
parameter the request has (``name``) or has with a value (``name=value``), or ANY."""


def match(pattern: tuple[str, ...], segs: list[str]) -> dict[str, str] | None:
    """The named segments of ``segs`` if they match ``pattern`` (see :data:`SHAPES`)."""
    found: dict[str, str] = {}
    for i, token in enumerate(pattern):
        if token.endswith(("*}", "+}")):
            if token.endswith("+}") and i >= len(segs):
                return None
            found[token[1:-2]] = "/".join(segs[i:])
            return found
        if i >= len(segs) or (not token.startswith("{") and token != segs[i]):
            return None
        found[token[1:-1]] = segs[i]
    return found if len(pattern) == len(segs) else None


def route(
    method: str, segs: list[str], query: Mapping[str, list[str]]
) -> tuple[Route, dict[str, str]]:
    """The route of a request and the named segments of its path (the two tables)."""
    shape, params = next((s, p) for pattern, s in SHAPES if (p := match(pattern, segs)) is not None)
    for want, marker, found in ROUTES[shape]:
        if want not in (method, ANY) and not (want == READ and method in ("GET", "HEAD")):
            continue
        name, is_value, value = marker.partition("=")
        if marker == ANY or (query.get(name, [""])[0] == value if is_value else name in query):
            return found, params
    raise LookupError(f"no route for {method} {shape}")  # every resource ends with ANY


def classify_gcs(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify a GCS JSON API request (or an XML-style ``/bucket/object`` request); its
    ``action`` is the GCS permission the request needs."""
    raw_path, query = split_path(path)
    segs = [unquote(s) for s in raw_path.strip("/").split("/")] if raw_path.strip("/") else []
    found, params = route(method.upper(), segs, query)
    if found.kind is Kind.DENY:
        return Access(Kind.DENY, action=found.action)
    bucket, key = params.get("bucket"), params.get("key") or None
    if found.named:
        key = query.get("name", [None])[0]
    event = found.event
    if found.last_chunk:  # rclone POSTs chunks, the Python SDK PUTs them
        span = (header(headers, "content-range") or "").strip()
        event = event if not span.endswith("/*") and not span.startswith("bytes */") else None
    sources: tuple[str, ...] = ()
    detail = None
    if found.predefined or found.iam or found.acl_call:
        detail = GcsDetail(
            predefined=query.get(found.predefined, [None])[0] if found.predefined else None,
            iam=found.iam,
            acl_call=found.acl_call,
            entity=params.get("entity") or None,
        )
    if found.copies == "object" and detail is not None:
        sources, detail.sources = (params["source"],), ((params["source"], params["source_key"]),)
    elif found.copies == "bucket" and detail is not None and bucket is not None:
        sources, detail.sources = (bucket,), ((bucket, None),)
    return Access(
        found.kind,
        bucket,
        key,
        sources=sources,
        event=event,
        deletes_bucket=found.deletes_bucket,
        needs_body=found.needs_body,
        action=found.action,
        detail=detail,
    )


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
