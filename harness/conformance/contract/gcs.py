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
from harness.conformance.contract.probes import (
    TREE,
    BaseProbes,
    ConditionalRead,
    Folder,
    random_bodies,
)
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


class Probes(BaseProbes):
    """The GCS checks of one emulator, in a bucket of the user's and one of the other's."""

    credential = "token"

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
            ("delimiter", self.delimiter),
            ("order", self.order),
            ("paging", self.paging),
            ("compose and resumable upload", self.compose),
            ("unfinished resumable upload", self.unfinished),
            ("parallel delete", self.batch_delete),
            ("conditional GET", self.conditional_get),
            ("ranged GET", self.ranged_get),
            ("range past the end", self.range_past_end),
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
            self.listing("md5/"),
            bodies,
            md5_b64,
            "lists an md5Hash that is not the body's MD5 (listing during uploads)",
            "objects.list prefix=md5/",
            "md5Hash",
        )

    def list_folder(self, prefix: str, page: int = 1000) -> tuple[list, list]:
        """(prefixes, names) of one folder with delimiter '/', every page, in page order."""
        prefixes: list[str] = []
        names: list[str] = []
        pages = self.gcs.list_blobs(self.name, prefix=prefix, delimiter="/", page_size=page)
        for p in pages.pages:
            names += [b.name for b in p]
            prefixes += list(p.prefixes)
        return prefixes, names

    def delimiter(self) -> None:
        """Every folder's listing with delimiter '/' has every prefix and object."""
        for key in TREE:
            self.put(key, key.encode())
        self.check_delimiter(
            self.list_folder, lambda folder: f"objects.list prefix={folder}", ("prefixes", "items")
        )

    def order_keys(self, page: int) -> list[str]:
        """The names under order/ (put once), listed ``page`` a page, every page."""
        self.put_order_keys()
        return [b.name for b in self.gcs.list_blobs(self.name, prefix="order/", page_size=page)]

    def order(self) -> None:
        """Listings are in name order."""
        self.check_order(
            self.order_keys, "lists objects out of name order", "objects.list prefix=order/"
        )

    def paging(self) -> None:
        """Every page size gives the same listing, with and without a delimiter."""
        for key in TREE:
            self.put(key, key.encode())
        self.check_key_paging(
            self.order_keys, lambda page: f"objects.list prefix=order/ maxResults={page}"
        )

        def folder_by_pages(page: int) -> Folder:  # prefixes come as a set per page
            prefixes, names = self.list_folder("tree/", page)
            return sorted(prefixes), names

        self.check_paging(
            folder_by_pages, lambda page: f"objects.list prefix=tree/ maxResults={page}"
        )

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
        keys = [f"batch/{i:02d}" for i in range(12)]
        for key in keys:
            self.put(key, b"d")
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
        left = sorted(self.listing("batch/"))
        if left:
            raise ContractFailure("keeps deleted objects", "objects.list prefix=batch/", f"{left}")

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

    def ranged_get(self) -> None:
        """A ranged read gets those bytes."""
        key, data = "get/ranged", os.urandom(1000)
        self.put(key, data)
        got = self.bucket.blob(key).download_as_bytes(start=10, end=19)
        if got != data[10:20]:
            raise ContractFailure(
                "serves a ranged GET wrongly",
                f"objects.get {key} alt=media Range: bytes=10-19 (of {len(data)} bytes)",
                f"{len(got)} bytes",
            )

    def range_past_end(self) -> None:
        """A read from the object's end is refused with 416."""
        key = "get/past-end"
        self.put(key, os.urandom(1000))
        self.check_range_past_end(
            lambda: bytes(self.bucket.blob(key).download_as_bytes(start=1000)),
            416,
            f"objects.get {key} alt=media Range: bytes=1000- (of 1000 bytes)",
        )

    def tokens(self) -> None:
        """The user's and the other's tokens work; an unknown token is refused (401)."""
        theirs_bucket = self.other_bucket("gcso")  # None: the target has no other
        if theirs_bucket is not None:
            with theirs_bucket as theirs:
                other = self.emulator.client(OTHER).bucket(theirs)

                def write_read(data: bytes) -> bytes:
                    other.blob("k").upload_from_string(data)
                    return bytes(other.blob("k").download_as_bytes())

                self.check_declared(
                    write_read,
                    b"theirs",
                    f"upload and download {theirs}/k with the other account's token",
                )
        self.check_unknown_refused(
            lambda: list(self.emulator.client(UNKNOWN).list_blobs(self.name)),
            lambda e: getattr(e, "code", 401) == self.emulator.invalid_credentials_status,
            f"objects.list {self.name} with a token the emulator does not declare",
            self.emulator.sdk_errors(),
        )
