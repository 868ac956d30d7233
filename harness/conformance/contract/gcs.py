"""The contract of a GCS stand-in (fake-gcs-server, any GcsEmulator subclass), probed with
google-cloud-storage through the gate. GCS has no multipart upload: its equivalents are
compose and resumable uploads (an unfinished resumable upload leaves no object); rclone
deletes a folder object by object, in parallel, so that is the batch delete probed."""

from __future__ import annotations

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
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

CHUNK = 256 * 1024
"""The resumable upload chunk GCS requires (a multiple of 256 KiB)."""


RELIANCE: dict[str, Reliance] = {
    **COMMON,
    "md5": every("rclone checks every upload against its md5Hash"),
    "compose and resumable upload": Reliance(
        ORDERED_BIG_FILES, "rclone sends a file bigger than its chunk as a resumable upload"
    ),
    "unfinished resumable upload": Reliance(
        SEEN_BEFORE_WHOLE, "an object listed before its upload finished is seen before it is whole"
    ),
    "parallel delete": every("each test's buckets are emptied object by object at its end"),
    "tokens": every("every test acts as the user or the other account"),
}
"""Which test modules rely on each check (harness.conformance.contract.reliance)."""


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def answer(e: BaseException) -> str:
    """A google.api_core error as status and message."""
    code = getattr(e, "code", None)
    return f"HTTP {code}: {getattr(e, 'message', e)}" if code else f"{type(e).__name__}: {e}"


def read_if(blob: Any, condition: dict[str, int]) -> bytes:
    """Read ``blob`` with ``condition`` (ifGenerationMatch or ifGenerationNotMatch)."""
    return bytes(blob.download_as_bytes(**condition))


def is_refusal(refusal: type[Exception], error: BaseException) -> bool:
    """True if ``error`` is the google.api_core ``refusal``."""
    return isinstance(error, refusal)


class Probes(FolderChecks):
    """The GCS checks of one emulator, in a bucket of the user's and one of the other's."""

    credential = "token"
    list_request = "objects.list"
    folder_parts = ("prefixes", "items")
    entries = "objects"
    page_size = "maxResults"

    def answer(self, error: BaseException) -> str:
        return answer(error)

    def __enter__(self) -> Probes:
        self.name = self.own_bucket("gcs")
        self.gcs = self.emulator.client(USER)
        self.bucket = self.gcs.bucket(self.name)
        return self

    def checks(self) -> list[tuple[str, Check]]:
        return [
            ("md5", self.md5),
            *self.listing_checks(),
            ("compose and resumable upload", self.compose),
            ("unfinished resumable upload", self.unfinished),
            ("parallel delete", self.batch_delete),
            *self.read_checks(),
            ("tokens", self.tokens),
        ]

    def put(self, key: str, data: bytes) -> None:
        self.bucket.blob(key).upload_from_string(data)

    def listing(self, prefix: str) -> dict[str, str]:
        """name -> md5Hash of every object under ``prefix``."""
        return {b.name: b.md5_hash for b in self.gcs.list_blobs(self.name, prefix=prefix)}

    def md5(self) -> None:
        """Upload, metadata and listing MD5s are the body's, with listings running."""
        bodies = random_bodies("md5/", 12)
        _, seen = self.put_while_listing(self.put, lambda: self.listing("md5/"), bodies)
        for key, data in bodies.items():
            got = self.bucket.get_blob(key).md5_hash
            if got != md5_b64(data):
                raise ContractFailure(
                    "keeps an md5Hash that is not the body's MD5",
                    f"objects.get {key} ({len(data)} bytes, MD5 {md5_b64(data)})",
                    f"md5Hash {got}",
                )
        self.check_listed_digests(
            seen,
            "md5/",
            bodies,
            md5_b64,
            "lists an md5Hash that is not the body's MD5 (listing during uploads)",
            "md5Hash",
        )

    def list_folder(self, prefix: str, page: int = 1000) -> Folder:
        prefixes: list[str] = []
        names: list[str] = []
        pages = self.gcs.list_blobs(self.name, prefix=prefix, delimiter="/", page_size=page)
        for p in pages.pages:
            names += [b.name for b in p]
            prefixes += list(p.prefixes)
        return prefixes, names

    def order_keys(self, page: int) -> list[str]:
        self.put_order_keys()
        return [b.name for b in self.gcs.list_blobs(self.name, prefix="order/", page_size=page)]

    def paged_folder(self, page: int) -> Folder:
        """The folder tree/ listed ``page`` entries a page (prefixes come as a set per page)."""
        prefixes, names = self.list_folder("tree/", page)
        return sorted(prefixes), names

    def read_range(self, key: str, start: int, end: int | None) -> bytes:
        return bytes(self.bucket.blob(key).download_as_bytes(start=start, end=end))

    def range_request(self, key: str, byte_range: str) -> str:
        return f"objects.get {key} alt=media Range: {byte_range}"

    def compose(self) -> None:
        """Compose joins its sources; a chunked resumable upload is its chunks joined."""
        parts = [os.urandom(CHUNK), os.urandom(1000)]
        for i, data in enumerate(parts):
            self.put(f"compose/part-{i}", data)
        whole = b"".join(parts)
        target = self.bucket.blob("compose/whole")
        target.compose([self.bucket.blob(f"compose/part-{i}") for i in range(len(parts))])
        got = target.download_as_bytes()
        if got != whole:
            raise ContractFailure(
                "composes objects wrongly",
                "objects.compose compose/whole from 2 parts",
                f"{len(got)} bytes, not {len(whole)}",
            )
        data = os.urandom(2 * CHUNK + 500)
        blob = self.bucket.blob("resumable/object", chunk_size=CHUNK)
        blob.upload_from_string(data)
        got_md5 = self.bucket.get_blob("resumable/object").md5_hash
        back = self.bucket.blob("resumable/object").download_as_bytes()
        if back != data or got_md5 != md5_b64(data):
            raise ContractFailure(
                "assembles a resumable upload wrongly",
                f"resumable upload of {len(data)} bytes in chunks of {CHUNK}",
                f"{len(back)} bytes, md5Hash {got_md5} (want {md5_b64(data)})",
            )

    def unfinished(self) -> None:
        """A resumable upload given one chunk and never finished leaves no object."""
        blob = self.bucket.blob("resumable/unfinished")
        url = blob.create_resumable_upload_session()
        chunk = os.urandom(CHUNK)
        headers = {"Content-Range": f"bytes 0-{CHUNK - 1}/*"}
        sent = self.gcs._http.put(url, data=chunk, headers=headers)
        if sent.status_code != 308:
            raise ContractFailure(
                "does not take a resumable upload's first chunk",
                f"PUT {url} Content-Range: bytes 0-{CHUNK - 1}/*",
                f"HTTP {sent.status_code}: {sent.text[:200]}",
            )
        if "resumable/unfinished" in self.listing("resumable/"):
            raise ContractFailure(
                "shows an object of an unfinished resumable upload",
                "objects.list prefix=resumable/ after one chunk of an unfinished upload",
                "resumable/unfinished listed",
            )

    def batch_delete(self) -> None:
        """Deleting a folder's objects in parallel (as rclone does) leaves none."""
        keys = self.put_batch()
        with ThreadPoolExecutor(4) as pool:
            futures = {k: pool.submit(self.bucket.blob(k).delete) for k in keys}
            for key, future in futures.items():
                try:
                    future.result()
                except Exception as e:
                    raise ContractFailure(
                        "fails a delete among parallel deletes",
                        f"objects.delete {key} (12 under batch/, 4 at once)",
                        answer(e),
                    ) from e
        self.check_none_left("batch/", "keeps deleted objects")

    def conditional_get(self) -> None:
        """ifGenerationMatch and ifGenerationNotMatch of a read are honoured."""
        from google.api_core.exceptions import NotModified, PreconditionFailed

        key, data = "get/object", os.urandom(1000)
        self.put(key, data)
        generation = self.bucket.get_blob(key).generation
        cases: list[tuple[dict[str, int], type[Exception] | None]] = [
            ({"if_generation_match": generation}, None),
            ({"if_generation_match": generation + 1}, PreconditionFailed),
            ({"if_generation_not_match": generation}, NotModified),
            ({"if_generation_not_match": generation + 1}, None),
        ]
        reads = [
            ConditionalRead(
                f"objects.get {key} alt=media {kwargs} (generation {generation})",
                refusal.__name__ if refusal else "the object",
                partial(read_if, self.bucket.blob(key), kwargs),
                None if refusal is None else partial(is_refusal, refusal),
            )
            for kwargs, refusal in cases
        ]
        self.check_conditional_reads(reads, data)

    def tokens(self) -> None:
        """The user's and the other's tokens work; an unknown token is refused (401)."""

        def write_read(theirs: str, data: bytes) -> bytes:
            other = self.emulator.client(OTHER).bucket(theirs)
            other.blob("k").upload_from_string(data)
            return bytes(other.blob("k").download_as_bytes())

        self.check_other_account(
            "gcso",
            write_read,
            b"theirs",
            lambda theirs: f"upload and download {theirs}/k with the other account's token",
        )
        self.check_unknown_refused(
            lambda: list(self.emulator.client(UNKNOWN).list_blobs(self.name)),
            lambda e: getattr(e, "code", 401) == self.emulator.invalid_credentials_status,
            f"objects.list {self.name} with a token the emulator does not declare",
            self.emulator.sdk_errors(),
        )
