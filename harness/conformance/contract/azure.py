"""The contract of an Azure Blob stand-in (Azurite, any AzureEmulator subclass), probed with
azure-storage-blob through the gate. Azure's multipart upload is blocks and a block list:
committing drops the blocks it does not name, and blocks never committed make no blob."""

from __future__ import annotations

import hashlib
import os
from contextlib import ExitStack
from typing import Any

from harness.accounts import OTHER, UNKNOWN, USER
from harness.conformance.contract import (
    ORDER,
    TREE,
    Check,
    ContractFailure,
    bucket,
    check_delimiter,
    check_paging,
    put_while_listing,
)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def hex_of(value: Any) -> str:
    return bytes(value).hex() if value else "none"


def answer(e: Exception) -> str:
    """An azure-core error as status, error code and the first line of its message."""
    status = getattr(e, "status_code", None)
    code = getattr(e, "error_code", None)
    message = str(getattr(e, "message", e)).splitlines()[0] if str(e) else ""
    return f"HTTP {status} {code}: {message}" if status else f"{type(e).__name__}: {e}"


class Probes:
    """The Azure checks of one emulator, in a container of the user's and one of the
    other's (each in its own storage account)."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self._stack = ExitStack()

    def __enter__(self) -> Probes:
        self.name = self._stack.enter_context(bucket(self.emulator, "az", USER))
        self.container = self.emulator.client(USER).get_container_client(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def checks(self) -> list[tuple[str, Check]]:
        return [
            ("content md5", self.content_md5),
            ("delimiter", self.delimiter),
            ("order", self.order),
            ("block list", self.block_list),
            ("uncommitted blocks", self.uncommitted),
            ("batch delete", self.batch_delete),
            ("conditional GET", self.conditional_get),
            ("ranged GET", self.ranged_get),
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
        bodies = {f"md5/{i:02d}": os.urandom(64 * 1024 * (1 + i % 4)) for i in range(12)}
        answers, seen = put_while_listing(self.put, lambda: self.listing("md5/"), bodies)
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
        for key, tag in [*seen, *self.listing("md5/").items()]:
            if tag != md5(bodies[key]):
                raise ContractFailure(
                    "lists a Content-MD5 that is not the body's MD5 (listing during puts)",
                    f"List Blobs prefix=md5/ (for {key}, MD5 {md5(bodies[key])})",
                    f"Content-MD5 {tag}",
                )

    def list_folder(self, prefix: str, page: int = 1000) -> tuple[list, list]:
        """(prefixes, names) of one folder with delimiter '/', every page, in page order."""
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

    def delimiter(self) -> None:
        """Every folder's listing with delimiter '/' has every prefix and blob."""
        for key in TREE:
            self.put(key, key.encode())
        check_delimiter(
            self.list_folder, lambda folder: f"List Blobs prefix={folder}", ("BlobPrefix", "Blob")
        )

    def order(self) -> None:
        """Listings are in name order, and every page size gives the same listing."""
        for key in ORDER:
            self.put(key, b"o")
        want = sorted(ORDER)
        for page in (1000, 2):
            pages = self.container.list_blobs(name_starts_with="order/", results_per_page=page)
            got = [b.name for p in pages.by_page() for b in p]
            if got != want:
                raise ContractFailure(
                    "lists blobs out of name order, or loses blobs across pages",
                    f"List Blobs prefix=order/ maxresults={page}, every page",
                    f"{got}, not {want}",
                )
        check_paging(
            lambda page: self.list_folder("tree/", page),
            lambda page: f"List Blobs prefix=tree/ maxresults={page}",
        )

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
        keys = [f"batch/{i:02d}" for i in range(12)]
        for key in keys:
            self.put(key, b"d")
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
        left = sorted(self.listing("batch/"))
        if left:
            raise ContractFailure("keeps deleted blobs", "List Blobs prefix=batch/", f"{left}")

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
        for tag, condition, refusal in cases:
            header = "If-Match" if condition == MatchConditions.IfNotModified else "If-None-Match"
            request = f"Get Blob {key} {header}: {tag} (ETag {etag})"
            want = f"HTTP {refusal}" if refusal else "the blob"
            try:
                got = blob.download_blob(etag=tag, match_condition=condition).readall()
            except Exception as e:
                if refusal is not None and getattr(e, "status_code", None) == refusal:
                    continue
                raise ContractFailure(
                    f"ignores a conditional GET (want {want})", request, answer(e)
                ) from e
            if refusal is not None or got != data:
                raise ContractFailure(
                    f"ignores a conditional GET (want {want})", request, f"{len(got)} bytes"
                )

    def ranged_get(self) -> None:
        """A ranged Get Blob gets those bytes."""
        key, data = "get/ranged", os.urandom(1000)
        self.put(key, data)
        got = self.container.get_blob_client(key).download_blob(offset=10, length=10).readall()
        if got != data[10:20]:
            raise ContractFailure(
                "serves a ranged GET wrongly",
                f"Get Blob {key} x-ms-range: bytes=10-19 (of {len(data)} bytes)",
                f"{len(got)} bytes",
            )

    def keys(self) -> None:
        """The user's and the other's account keys work; an unknown key is refused."""
        with bucket(self.emulator, "azo", OTHER) as theirs:
            other = self.emulator.client(OTHER).get_container_client(theirs)
            request = f"Put Blob and Get Blob {theirs}/k with the other account's key"
            try:
                other.upload_blob("k", b"theirs", overwrite=True)
                back = other.download_blob("k").readall()
            except Exception as e:
                raise ContractFailure("refuses a declared key", request, answer(e)) from e
            if back != b"theirs":
                raise ContractFailure("serves other data", request, f"{back!r}")
        stranger = self.emulator.client(UNKNOWN).get_container_client(self.name)
        request = f"List Blobs {self.name} with a key the emulator does not declare"
        try:
            list(stranger.list_blobs())
        except self.emulator.sdk_errors() as e:
            if getattr(e, "status_code", None) == self.emulator.invalid_credentials_status:
                return
            raise ContractFailure("answers an unknown key oddly", request, answer(e)) from e
        raise ContractFailure("accepts an unknown key", request, "HTTP 200")
