"""What the Azure gate keeps: the local cloud's storage accounts and their keys, each
container's owner (the storage account of its path) and public access level, learnt from
the real Create Container and Set Container ACL requests, and blob writes (sizes read with
the storage account's key)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from harness.accounts import OTHER, USER
from harness.gate.protocol import Exchange, Success
from harness.gate.rules import Access
from harness.store_gates.azure.access import public_level


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


def path_account(path: str) -> tuple[str | None, StorageAccount | None]:
    """The owner (user, other) and the storage account a request path (and query) names
    in its first segment; (None, None) for an account that is not the local cloud's."""
    name = path.partition("?")[0].lstrip("/").split("/", 1)[0]
    return next(((o, a) for o, a in ACCOUNTS.items() if a.name == name), (None, None))


def account_owner(path: str) -> str | None:
    """The owner (user, other) of the storage account a request path names, if any."""
    return path_account(path)[0]


class AzureBookkeeping:
    """What the Azure gate records from successful responses, and the container levels it
    decides by (a base class of AzureGateProtocol)."""

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
