"""The contract of an Azure Blob stand-in (Azurite, any AzureEmulator subclass), probed with
azure-storage-blob through the gate. Azure's multipart upload is blocks and a block list:
committing drops the blocks it does not name, and blocks never committed make no blob."""

from __future__ import annotations

import hashlib
import os
from functools import partial
from typing import Any

from harness.accounts import OTHER, UNKNOWN, USER
from harness.conformance.contract import Check, ContractFailure
from harness.conformance.contract.folder_checks import FolderChecks
from harness.conformance.contract.probes import ConditionalRead, Folder, random_bodies
from harness.conformance.contract.reliance import (
    COMMON,
    ORDERED_BIG_FILES,
    SEEN_BEFORE_WHOLE,
    Reliance,
    every,
)

RELIANCE: dict[str, Reliance] = {
    **COMMON,
    "content md5": every("rclone checks every upload against its Content-MD5"),
    "block list": Reliance(
        ORDERED_BIG_FILES, "an ordered MOUNT_CACHED mount stages a big file's blocks at once"
    ),
    "uncommitted blocks": Reliance(
        SEEN_BEFORE_WHOLE, "a blob listed before its block list was committed is seen early"
    ),
    "batch delete": every("each test's containers are emptied at its end"),
    "keys": every("every test acts as the user or the other account"),
}
"""Which test modules rely on each check (harness.conformance.contract.reliance)."""


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def hex_of(value: Any) -> str:
    return bytes(value).hex() if value else "none"


def answer(e: BaseException) -> str:
    """An azure-core error as status, error code and the first line of its message."""
    status = getattr(e, "status_code", None)
    code = getattr(e, "error_code", None)
    message = str(getattr(e, "message", e)).splitlines()[0] if str(e) else ""
    return f"HTTP {status} {code}: {message}" if status else f"{type(e).__name__}: {e}"


def has_status(status: int, error: BaseException) -> bool:
    """True if ``error`` is an azure-core error of HTTP ``status``."""
    return getattr(error, "status_code", None) == status


def header(condition: Any) -> str:
    """The header of a Get Blob with ``condition`` (an azure.core MatchConditions)."""
    from azure.core import MatchConditions

    return "If-Match" if condition == MatchConditions.IfNotModified else "If-None-Match"


def read_if(blob: Any, tag: str, condition: Any) -> bytes:
    """Get Blob with ``condition`` on ETag ``tag``."""
    return bytes(blob.download_blob(etag=tag, match_condition=condition).readall())


class Probes(FolderChecks):
    """The Azure checks of one emulator, in a container of the user's and one of the
    other's (each in its own storage account)."""

    list_request = "List Blobs"
    folder_parts = ("BlobPrefix", "Blob")
    entries = "blobs"
    page_size = "maxresults"

    def answer(self, error: BaseException) -> str:
        return answer(error)

    def __enter__(self) -> Probes:
        self.name = self.own_bucket("az")
        self.container = self.emulator.client(USER).get_container_client(self.name)
        return self

    def checks(self) -> list[tuple[str, Check]]:
        return [
            ("content md5", self.content_md5),
            *self.listing_checks(),
            ("block list", self.block_list),
            ("uncommitted blocks", self.uncommitted),
            ("batch delete", self.batch_delete),
            *self.read_checks(),
            ("keys", self.keys),
        ]

    def put(self, key: str, data: bytes) -> dict[str, Any]:
        """Put Blob ``key``; the response's properties (``etag``, ``content_md5``, ...)."""
        blob = self.container.get_blob_client(key)
        return dict(blob.upload_blob(data, overwrite=True))

    def listing(self, prefix: str) -> dict[str, str]:
        """name -> Content-MD5 (hex) of every blob under ``prefix``."""
        return {
            b.name: hex_of(b.content_settings.content_md5)
            for b in self.container.list_blobs(name_starts_with=prefix)
        }

    def content_md5(self) -> None:
        """Put Blob's, the properties' and the listing's Content-MD5 are the body's MD5,
        with listings running meanwhile."""
        bodies = random_bodies("md5/", 12)
        answers, seen = self.put_while_listing(self.put, lambda: self.listing("md5/"), bodies)
        got = {key: hex_of(answer.get("content_md5")) for key, answer in answers.items()}
        for key, data in bodies.items():
            request = f"Put Blob {key} ({len(data)} bytes, MD5 {md5(data)})"
            if got[key] != md5(data):
                raise ContractFailure(
                    "answers Put Blob with a Content-MD5 that is not the body's MD5",
                    request,
                    f"Content-MD5 {got[key]}",
                )
            props = self.container.get_blob_client(key).get_blob_properties()
            if hex_of(props.content_settings.content_md5) != md5(data):
                raise ContractFailure(
                    "keeps a Content-MD5 that is not the body's MD5",
                    f"Get Blob Properties {key}",
                    f"Content-MD5 {hex_of(props.content_settings.content_md5)}",
                )
        self.check_listed_digests(
            seen,
            "md5/",
            bodies,
            md5,
            "lists a Content-MD5 that is not the body's MD5 (listing during puts)",
            "Content-MD5",
        )

    def list_folder(self, prefix: str, page: int = 1000) -> Folder:
        prefixes: list[str] = []
        names: list[str] = []
        pages = self.container.walk_blobs(
            name_starts_with=prefix, delimiter="/", results_per_page=page
        ).by_page()
        for p in pages:
            for item in p:
                is_prefix = type(item).__name__ == "BlobPrefix"
                (prefixes if is_prefix else names).append(item.name)
        return prefixes, names

    def order_keys(self, page: int) -> list[str]:
        self.put_order_keys()
        pages = self.container.list_blobs(name_starts_with="order/", results_per_page=page)
        return [b.name for p in pages.by_page() for b in p]

    def read_range(self, key: str, start: int, end: int | None) -> bytes:
        length = None if end is None else end - start + 1
        blob = self.container.get_blob_client(key)
        return bytes(blob.download_blob(offset=start, length=length).readall())

    def range_request(self, key: str, byte_range: str) -> str:
        return f"Get Blob {key} x-ms-range: {byte_range}"

    def block_list(self) -> None:
        """Put Block x3, Put Block List of two: the blob is those two, the third dropped."""
        from azure.storage.blob import BlobBlock

        blob = self.container.get_blob_client("blocks/object")
        blocks = {f"block-{i}": os.urandom(100_000 + i) for i in range(3)}
        for block_id, data in blocks.items():
            blob.stage_block(block_id, data)
        blob.commit_block_list([BlobBlock(block_id="block-0"), BlobBlock(block_id="block-1")])
        whole = blocks["block-0"] + blocks["block-1"]
        got = blob.download_blob().readall()
        if got != whole:
            raise ContractFailure(
                "serves a committed block list that is not its blocks joined",
                "Get Blob blocks/object after Put Block List [block-0, block-1]",
                f"{len(got)} bytes, MD5 {md5(got)} (want {len(whole)}, {md5(whole)})",
            )
        committed, uncommitted = blob.get_block_list("all")
        if [b.id for b in committed] != ["block-0", "block-1"] or uncommitted:
            raise ContractFailure(
                "keeps blocks a block list left out",
                "Get Block List blocks/object blocklisttype=all after the commit",
                f"committed {[b.id for b in committed]}, uncommitted {[b.id for b in uncommitted]}",
            )

    def uncommitted(self) -> None:
        """Blocks staged and never committed make no blob."""
        from azure.core.exceptions import ResourceNotFoundError

        blob = self.container.get_blob_client("blocks/never-committed")
        blob.stage_block("block-0", b"staged")
        if "blocks/never-committed" in self.listing("blocks/"):
            raise ContractFailure(
                "lists a blob that has only uncommitted blocks",
                "List Blobs prefix=blocks/ after Put Block without Put Block List",
                "blocks/never-committed listed",
            )
        try:
            blob.download_blob().readall()
        except ResourceNotFoundError:
            return
        raise ContractFailure(
            "serves a blob that has only uncommitted blocks",
            "Get Blob blocks/never-committed",
            "HTTP 200",
        )

    def batch_delete(self) -> None:
        """Blob Batch delete of one folder's blobs: each sub-request 202, nothing left."""
        keys = self.put_batch()
        request = f"Blob Batch of {len(keys)} Delete Blob under batch/"
        try:
            results = list(self.container.delete_blobs(*keys, raise_on_any_failure=False))
        except Exception as e:
            raise ContractFailure("fails a batch delete", request, answer(e)) from e
        bad = [r.status_code for r in results if r.status_code != 202]
        if bad or len(results) != len(keys):
            raise ContractFailure(
                "answers a batch delete's sub-requests oddly",
                request,
                f"{len(results)} answers, statuses other than 202: {bad}",
            )
        self.check_none_left("batch/", "keeps deleted blobs")

    def conditional_get(self) -> None:
        """If-Match and If-None-Match of Get Blob are honoured (412 and 304)."""
        from azure.core import MatchConditions

        key, data = "get/object", os.urandom(1000)
        etag = self.put(key, data)["etag"]
        wrong = '"0x8DEADBEEF000000"'
        blob = self.container.get_blob_client(key)
        cases: list[tuple[str, Any, int | None]] = [
            (etag, MatchConditions.IfNotModified, None),
            (wrong, MatchConditions.IfNotModified, 412),
            (etag, MatchConditions.IfModified, 304),
            (wrong, MatchConditions.IfModified, None),
        ]
        reads = [
            ConditionalRead(
                f"Get Blob {key} {header(condition)}: {tag} (ETag {etag})",
                f"HTTP {refusal}" if refusal else "the blob",
                partial(read_if, blob, tag, condition),
                None if refusal is None else partial(has_status, refusal),
            )
            for tag, condition, refusal in cases
        ]
        self.check_conditional_reads(reads, data)

    def keys(self) -> None:
        """The user's and the other's account keys work; an unknown key is refused."""

        def write_read(theirs: str, data: bytes) -> bytes:
            other = self.emulator.client(OTHER).get_container_client(theirs)
            other.upload_blob("k", data, overwrite=True)
            return bytes(other.download_blob("k").readall())

        self.check_other_account(
            "azo",
            write_read,
            b"theirs",
            lambda theirs: f"Put Blob and Get Blob {theirs}/k with the other account's key",
        )
        stranger = self.emulator.client(UNKNOWN).get_container_client(self.name)
        self.check_unknown_refused(
            lambda: list(stranger.list_blobs()),
            partial(has_status, self.emulator.invalid_credentials_status),
            f"List Blobs {self.name} with a key the emulator does not declare",
            self.emulator.sdk_errors(),
        )
