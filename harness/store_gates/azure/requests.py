"""Azure Blob requests as the gate reads them: ``/<account>/<container>/<blob>`` classified
into the Blob REST operation (named as in Azure's REST reference) by one table,
:data:`OPERATIONS`, keyed by the resource the path names, the method and ``comp``. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import unquote

from harness.gate.rules import Access, Kind, header, split_path
from harness.store_gates.azure.access import public_level

Query = Mapping[str, list[str]]

OPERATIONS: dict[tuple[str, str, str], str] = {
    ("service", "GET", "list"): "ListContainers",
    ("container", "GET", ""): "GetContainerProperties",
    ("container", "HEAD", ""): "GetContainerProperties",
    ("container", "GET", "metadata"): "GetContainerMetadata",
    ("container", "HEAD", "metadata"): "GetContainerMetadata",
    ("container", "GET", "list"): "ListBlobs",
    ("container", "GET", "acl"): "GetContainerACL",
    ("container", "HEAD", "acl"): "GetContainerACL",
    ("container", "PUT", ""): "CreateContainer",
    ("container", "PUT", "acl"): "SetContainerACL",
    ("container", "PUT", "metadata"): "SetContainerMetadata",
    ("container", "DELETE", ""): "DeleteContainer",
    ("blob", "GET", ""): "GetBlob",
    ("blob", "HEAD", ""): "GetBlobProperties",
    ("blob", "GET", "metadata"): "GetBlobMetadata",
    ("blob", "HEAD", "metadata"): "GetBlobMetadata",
    ("blob", "GET", "blocklist"): "GetBlockList",
    ("blob", "PUT", ""): "PutBlob",
    ("blob", "PUT", "block"): "PutBlock",
    ("blob", "PUT", "blocklist"): "PutBlockList",
    ("blob", "DELETE", ""): "DeleteBlob",
}
"""(resource, method, comp) -> operation: the resource is ``service`` (no container),
``container`` (with ``restype=container``) or ``blob``."""

UNLISTED = {"service": "ServiceOperation", "container": "Other", "blob": "Other"}
"""The operation of a request :data:`OPERATIONS` does not list, by resource."""

VARIANTS: dict[str, tuple[Callable[[Query, Mapping[str, str]], bool], str]] = {
    "GetBlockList": (
        lambda query, _: query.get("blocklisttype", ["committed"])[0].lower() != "committed",
        "GetUncommittedBlockList",
    ),
    "PutBlob": (lambda _, headers: bool(header(headers, "x-ms-copy-source")), "CopyBlob"),
}
"""operation -> (the test of a request, the operation it is when the test holds)."""

EVENTS = {"PutBlob": "put", "CopyBlob": "copy", "PutBlockList": "commit", "DeleteBlob": "delete"}
"""The write event a blob operation records on success."""


def _resource(segs: list[str], query: Query) -> str:
    if len(segs) < 2 or not segs[1]:
        return "service"
    if len(segs) < 3 or not segs[2]:
        restype = query.get("restype", [""])[0].lower()
        return "container" if restype == "container" else "other"
    return "blob"


def operation(method: str, path: str, headers: Mapping[str, str]) -> str:
    """The Blob REST operation of a request (``GetBlob``, ``ListBlobs``, ``SetContainerACL``,
    ...), named as in Azure's REST reference; ``Other`` for the rest."""
    raw_path, query = split_path(path)
    resource = _resource(raw_path.lstrip("/").split("/", 2), query)
    comp = query.get("comp", [""])[0].lower()
    found = OPERATIONS.get((resource, method.upper(), comp), UNLISTED.get(resource, "Other"))
    variant = VARIANTS.get(found)
    if variant is not None and variant[0](query, headers):
        return variant[1]
    return found


def classify_azure(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an Azure Blob request (``/<account>/<container>/<blob>``): every request
    passes the generic rules (Azurite and the protocol's decide enforce access); ``action``
    is the REST operation, ``detail`` the public level a container creation or ACL change
    sets, ``event`` the write event recorded on success."""
    action = operation(method, path, headers)
    raw_path, _ = split_path(path)
    segs = raw_path.lstrip("/").split("/", 2)
    if len(segs) < 3 or not segs[2]:
        container = unquote(segs[1]) if len(segs) > 1 and segs[1] else None
        level = None
        if action in ("CreateContainer", "SetContainerACL"):
            level = public_level(header(headers, "x-ms-blob-public-access"))
        deletes = action == "DeleteContainer"
        return Access(Kind.PASS, container, deletes_bucket=deletes, action=action, detail=level)
    return Access(
        Kind.PASS, unquote(segs[1]), unquote(segs[2]), event=EVENTS.get(action), action=action
    )
