"""The Azure Blob gate protocol (runs inside the gate).

Azurite enforces SAS permissions and container public access, but it serves a public
container to wrong keys and expired or altered SAS, accepts user-delegation SAS minted with a
key written in its source, and answers in its own terms. The gate therefore:

- verifies every Shared Key header and SAS against the key of the storage account the
  request addresses (harness.emulators.azure_gate.signatures) and refuses forgeries with Azure's
  403 AuthenticationFailed; user-delegation SAS is always refused (no Entra ID here, so no
  delegation key exists);
- learns each container's owner (the storage account of the path) and public access level
  (off, blob, container) from the real Create Container and Set Container ACL requests it
  forwards, and decides anonymous requests by that level (:data:`ANONYMOUS_OPERATIONS`),
  refusing with Azure's 404 ResourceNotFound (Azurite: 403 AuthorizationFailure);
- records blob writes (sizes read with the storage account's key) and answers injected faults
  as Azure's XML errors.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

from harness.accounts import OTHER, USER
from harness.emulators.azure_gate.signatures import (
    check_sas,
    check_shared_key,
    is_user_delegation_sas,
)
from harness.gate.corrupt import wrong_headers
from harness.gate.protocol import Corrupted, Exchange, GateProtocol, Success, UpstreamResponse
from harness.gate.rules import ALLOW, Access, Kind, Verdict, header, query_pairs, split_path


@dataclass(frozen=True)
class StorageAccount:
    """An Azure storage account and its key."""

    name: str
    key: str


def account_key(seed: str) -> str:
    """A storage account key (base64 of 64 bytes) made from ``seed``."""
    return base64.b64encode((seed * 8).encode()[:64]).decode()


ACCOUNTS: dict[str, StorageAccount] = {
    USER: StorageAccount("skyuser", account_key("skycore-user-")),
    OTHER: StorageAccount("skyother", account_key("skycore-other")),
}
"""owner -> storage account; the ``unknown`` caller signs with a key of no account."""

LEVELS = ("off", "blob", "container")
"""Container public access levels (``x-ms-blob-public-access``; absent: off)."""

ANONYMOUS_OPERATIONS: dict[str, frozenset[str]] = {
    "off": frozenset(),
    "blob": frozenset({"GetBlob", "GetBlobProperties", "GetBlobMetadata", "GetBlockList"}),
    "container": frozenset(
        {
            "GetBlob",
            "GetBlobProperties",
            "GetBlobMetadata",
            "GetBlockList",
            "GetContainerProperties",
            "GetContainerMetadata",
            "ListBlobs",
        }
    ),
}
"""The operations an anonymous caller may call at each level (Azure's "Features available to
anonymous users" table; Get Block List: committed blocks only)."""

HIDDEN = Verdict(False, 404, "ResourceNotFound", "The specified resource does not exist.")
"""Azure's answer to an anonymous request its container's level does not open: the same as
for a container that does not exist, so that nobody can probe for private containers."""
AUTHENTICATION_FAILED = (
    "Server failed to authenticate the request. Make sure the value of Authorization header "
    "is formed correctly including the signature."
)


def public_level(value: str | None) -> str:
    """The level an ``x-ms-blob-public-access`` header sets (absent or unknown: off)."""
    value = (value or "").strip().lower()
    return value if value in LEVELS else "off"


def operation(method: str, path: str, headers: Mapping[str, str]) -> str:
    """The Blob REST operation of a request (``GetBlob``, ``ListBlobs``, ``SetContainerACL``,
    ...), named as in Azure's REST reference; ``Other`` for the rest."""
    raw_path, query = split_path(path)
    segs = raw_path.lstrip("/").split("/", 2)
    method = method.upper()
    comp = query.get("comp", [""])[0].lower()
    if len(segs) < 2 or not segs[1]:
        return "ListContainers" if method == "GET" and comp == "list" else "ServiceOperation"
    reads = method in ("GET", "HEAD")
    if len(segs) < 3 or not segs[2]:
        if query.get("restype", [""])[0].lower() != "container":
            return "Other"
        container_ops = {
            ("GET", ""): "GetContainerProperties",
            ("HEAD", ""): "GetContainerProperties",
            ("GET", "metadata"): "GetContainerMetadata",
            ("HEAD", "metadata"): "GetContainerMetadata",
            ("GET", "list"): "ListBlobs",
            ("GET", "acl"): "GetContainerACL",
            ("HEAD", "acl"): "GetContainerACL",
            ("PUT", ""): "CreateContainer",
            ("PUT", "acl"): "SetContainerACL",
            ("PUT", "metadata"): "SetContainerMetadata",
            ("DELETE", ""): "DeleteContainer",
        }
        return container_ops.get((method, comp), "Other")
    if reads and not comp:
        return "GetBlob" if method == "GET" else "GetBlobProperties"
    if reads and comp == "metadata":
        return "GetBlobMetadata"
    if method == "GET" and comp == "blocklist":
        listed = query.get("blocklisttype", ["committed"])[0].lower()
        return "GetBlockList" if listed == "committed" else "GetUncommittedBlockList"
    if method == "PUT" and not comp:
        return "CopyBlob" if header(headers, "x-ms-copy-source") else "PutBlob"
    blob_ops = {
        ("PUT", "block"): "PutBlock",
        ("PUT", "blocklist"): "PutBlockList",
        ("DELETE", ""): "DeleteBlob",
    }
    return blob_ops.get((method, comp), "Other")


def classify_azure(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an Azure Blob request (``/<account>/<container>/<blob>``): every request
    passes the generic rules (Azurite and :meth:`AzureGateProtocol.decide` enforce access);
    ``action`` is the REST operation, ``detail`` the public level a container creation or
    ACL change sets, ``event`` the write event recorded on success."""
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
    events = {
        "PutBlob": "put",
        "CopyBlob": "copy",
        "PutBlockList": "commit",
        "DeleteBlob": "delete",
    }
    return Access(
        Kind.PASS, unquote(segs[1]), unquote(segs[2]), event=events.get(action), action=action
    )


def anonymous_allowed(level: str, action: str | None) -> bool:
    """True if an anonymous caller may call ``action`` on a container at ``level``."""
    return action in ANONYMOUS_OPERATIONS.get(level, frozenset())


def path_account(path: str) -> tuple[str | None, StorageAccount | None]:
    """The owner (user, other) and the storage account a request path (and query) names
    in its first segment; (None, None) for an account that is not the local cloud's."""
    name = path.partition("?")[0].lstrip("/").split("/", 1)[0]
    return next(((o, a) for o, a in ACCOUNTS.items() if a.name == name), (None, None))


def account_owner(path: str) -> str | None:
    """The owner (user, other) of the storage account a request path names, if any."""
    return path_account(path)[0]


def authentication_verdict(ex: Exchange, now: datetime) -> Verdict | None:
    """None if the request is anonymous or its credentials are authentic for the storage
    account it addresses (or that account is not one of the local cloud's: the emulator
    answers), else Azure's 403 AuthenticationFailed with the reason."""
    raw_path, _, raw_query = ex.path.partition("?")
    segs = raw_path.lstrip("/").split("/", 2)
    account = path_account(raw_path)[1]
    if account is None or is_anonymous(ex):
        return None
    if ex.header("authorization"):
        reason = check_shared_key(
            ex.method, raw_path, raw_query, ex.headers, account.name, account.key, now
        )
    else:
        params = {name: value for name, value in query_pairs(raw_query)}
        container = unquote(segs[1]) if len(segs) > 1 and segs[1] else None
        blob = unquote(segs[2]) if len(segs) > 2 and segs[2] else None
        if is_user_delegation_sas(params):
            reason = (
                "User delegation SAS: the local cloud has no Microsoft Entra ID, so it issues "
                "no user delegation keys and no such SAS can be valid."
            )
        else:
            reason = check_sas(params, account.name, account.key, container, blob, now)
    if reason is None:
        return None
    return Verdict(False, 403, "AuthenticationFailed", f"{AUTHENTICATION_FAILED}\n{reason}")


def is_anonymous(ex: Exchange) -> bool:
    """True if a request carries no credentials (no Authorization header, no SAS)."""
    return not ex.header("authorization") and "sig" not in ex.query


class AzureGateProtocol(GateProtocol):
    """Azure Blob: the gate verifies Shared Key and SAS signatures (Azurite then checks SAS
    permissions), decides anonymous access by the container's public level, and records blob
    writes and the containers' owners and levels."""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_azure(ex.method, ex.path, ex.headers), None

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """Verify the request's Shared Key header or SAS the way Azure does, against the key
        of the storage account it addresses (Azurite alone serves a public container to
        wrong keys and expired or altered SAS, and accepts user-delegation SAS minted with
        a key written in its source)."""
        return authentication_verdict(ex, datetime.now(UTC))

    def decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        """Credentialed requests go to Azurite, which checks them. Anonymous ones on a
        container the gate knows are allowed only for the operations its public level opens
        (Azurite alone would also serve Get Container ACL at level container)."""
        if access.bucket is None or not is_anonymous(ex):
            return ALLOW
        level = self.container_level(ex, access.bucket)
        if level is None or anonymous_allowed(level, access.action):
            return ALLOW
        return HIDDEN

    def container_level(self, ex: Exchange, container: str) -> str | None:
        """The public level of ``container`` in the path's storage account, None if the gate
        does not know that container there."""
        known = ex.state.bucket(container)
        if known is None or known.owner != account_owner(ex.path):
            return None
        level = known.settings.get("public_access")
        if level is None:
            return "container" if known.public else "off"
        return public_level(str(level))

    def wants_whole_response(self, ex: Exchange, access: Access) -> bool:
        return access.action in ("CreateContainer", "SetContainerACL")

    def corrupt_answer(
        self, ex: Exchange, access: Access, up: UpstreamResponse, body: bytes | None
    ) -> Corrupted | None:
        """rclone reads an uploaded blob's MD5 from the Content-MD5 of the Get Blob
        Properties (HEAD) after the upload, which the mark of the write makes wrong; the
        write's own answer has its transactional Content-MD5 / x-ms-content-crc64 wrong.
        The ETag is an opaque version, not a checksum."""
        headers = wrong_headers(
            up.header, digests=("Content-MD5", "x-ms-blob-content-md5", "x-ms-content-crc64")
        )
        return Corrupted(headers) if headers else None

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        message, _, detail = verdict.message.partition("\n")
        extra = f"<AuthenticationErrorDetail>{escape(detail)}</AuthenticationErrorDetail>"
        xml = (
            '<?xml version="1.0" encoding="utf-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{escape(message)}</Message>"
            f"{extra if detail else ''}</Error>"
        )
        return "application/xml", xml.encode()

    def fault_verdict(self, status: int) -> Verdict:
        codes = {
            503: (
                "ServerBusy",
                "The server is currently unable to receive requests. Please retry your request.",
            ),
            500: (
                "InternalError",
                "The server encountered an internal error. Please retry the request.",
            ),
            403: ("AuthenticationFailed", AUTHENTICATION_FAILED),
        }
        code, message = codes.get(status, ("ServerBusy", "The server is busy."))
        return Verdict(False, status, code, message)

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        return {"x-ms-error-code": verdict.code}

    def on_success(self, done: Success) -> bytes:
        ex, access, data = done.ex, done.access, done.data
        if access.bucket is not None and access.key is None:
            self._container_changed(ex, access)
            return data
        if access.event is None or access.bucket is None or access.key is None:
            return data
        size = 0
        if access.event == "put":
            size = ex.content_length()
        elif access.event != "delete":
            size = _blob_size(ex)
        ex.state.record(access.bucket, access.key, size, access.event)
        return data

    def _container_changed(self, ex: Exchange, access: Access) -> None:
        """Record a created container, a changed public level or a deleted container (in the
        storage account of the path) in the bucket table. A container's settings are its
        ACL's public access level, which Create Container and Set Container ACL replace
        whole: the new settings never depend on the old ones (no update can be lost).
        Containers are keyed by name alone (two accounts' containers of one name share an
        entry: a known gap, docs/local-cloud.md)."""
        name, owner = access.bucket or "", account_owner(ex.path)
        if access.deletes_bucket:
            known = ex.state.bucket(name)
            if known is not None and known.owner == owner:
                ex.state.drop_bucket(name)
            return
        if owner is None or access.action not in ("CreateContainer", "SetContainerACL"):
            return
        level = public_level(access.detail)
        ex.state.set_bucket(name, owner, level != "off", settings={"public_access": level})


def _blob_size(ex: Exchange) -> int:
    """Blob size via the SDK, signed with the storage account's key."""
    segs = urlsplit(ex.path).path.lstrip("/").split("/", 2)
    account = path_account(ex.path)[1]
    if account is None or len(segs) < 3:
        return -1
    from azure.storage.blob import BlobClient

    host, port = ex.upstream
    blob = BlobClient(
        f"http://{host}:{port}/{account.name}",
        container_name=unquote(segs[1]),
        blob_name=unquote(segs[2]),
        credential={"account_name": account.name, "account_key": account.key},
        retry_total=0,
    )
    try:
        return int(blob.get_blob_properties().size)
    except Exception:
        return -1
