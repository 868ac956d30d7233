"""The contract of an S3 stand-in (moto, ``rclone serve s3``, any S3Emulator subclass),
probed with boto3 through the gate. Server errors (5xx) that botocore would retry away are
recorded and reported too: a store sees the same race."""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from harness.accounts import OTHER, UNKNOWN, USER
from harness.conformance.contract import Check, ContractFailure
from harness.conformance.contract.held_put import Account, put_in_two_parts
from harness.conformance.contract.probes import BaseProbes, random_bodies
from harness.conformance.contract.reliance import (
    COMMON,
    ORDERED_BIG_FILES,
    SEEN_BEFORE_WHOLE,
    Reliance,
    every,
    finding,
)
from harness.conformance.contract.s3_reads import RangedReads

PART = 5 * 1024 * 1024
"""The smallest part S3 takes but for the last."""
HOLD_S = 1.5
"""How long the unfinished PUT check holds a PUT's second half back, listing meanwhile."""


RELIANCE: dict[str, Reliance] = {
    **COMMON,
    "etag": every(
        "rclone checks every upload against its ETag, and a listed ETag tells it whether a "
        "file changed"
    ),
    "unfinished PUT": Reliance(
        SEEN_BEFORE_WHOLE, "an object listed before its PUT completed is seen before it is whole"
    ),
    "multipart": Reliance(
        ORDERED_BIG_FILES, "an ordered MOUNT_CACHED mount sends files over 5 MiB in parts"
    ),
    "abort": Reliance(
        ORDERED_BIG_FILES, "rclone aborts the multipart upload of a file it must send again"
    ),
    "aborted upload's parts": finding("rclone never lists the parts of an upload it aborted"),
    "batch delete": every("each test's buckets are emptied with DeleteObjects at its end"),
    "suffix range": finding("rclone never asks for the last N bytes (Range: bytes=-N)"),
    "keys": every("every test acts as the user or the other account"),
    "server errors": finding(
        "botocore and rclone retry a 5xx, so a store that answers some is still tested"
    ),
}
"""Which test modules rely on each check (harness.conformance.contract.reliance)."""


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def answer(e: BaseException) -> str:
    """A botocore error as status, code and message."""
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return f"{type(e).__name__}: {e}"
    error = response.get("Error", {})
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return f"HTTP {status} {error.get('Code', '')}: {error.get('Message', '')}".rstrip(": ")


def status_of(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode") if response else None


class Probes(RangedReads, BaseProbes):
    """The S3 checks of one emulator, in a bucket of the user's and one of the other's."""

    list_request = "ListObjectsV2"

    def __init__(self, emulator: Any) -> None:
        super().__init__(emulator)
        self.errors: list[str] = []

    def answer(self, error: BaseException) -> str:
        return answer(error)

    def __enter__(self) -> Probes:
        self.bucket = self.own_bucket("s3")
        self.s3 = self.client(USER)
        return self

    def client(self, owner: str) -> Any:
        """``owner``'s boto3 client (the emulator's helper), recording every 5xx answer."""
        client = self.emulator.client(owner)

        def record(response: Any = None, operation: Any = None, **_: Any) -> None:
            if response is None:
                return
            http, parsed = response
            if http.status_code >= 500:
                code = parsed.get("Error", {}).get("Code", "")
                self.errors.append(f"{operation.name} -> HTTP {http.status_code} {code}")

        client.meta.events.register("needs-retry.s3", record)
        return client

    def checks(self) -> list[tuple[str, Check]]:
        return [
            ("etag", self.etag),
            ("unfinished PUT", self.unfinished_put),
            ("delimiter", self.delimiter),
            ("order", self.order),
            ("paging", self.paging),
            ("multipart", self.multipart),
            ("abort", self.abort),
            ("aborted upload's parts", self.aborted_parts),
            ("batch delete", self.batch_delete),
            ("conditional GET", self.conditional_get),
            ("ranged GET", self.ranged_get),
            ("suffix range", self.suffix_range),
            ("range past the end", self.range_past_end),
            ("keys", self.keys),
            ("server errors", self.server_errors),
        ]

    def put(self, key: str, data: bytes) -> str:
        return str(self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)["ETag"]).strip('"')

    def listing(self, prefix: str) -> dict[str, str]:
        """key -> ETag of every key under ``prefix`` (ListObjectsV2, every page)."""
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"]: o["ETag"].strip('"') for p in pages for o in p.get("Contents", [])}

    def etag(self) -> None:
        """PUT, HEAD and listing ETags are the body's MD5, with listings running meanwhile."""
        bodies = random_bodies("etag/", 16)
        got, seen = self.put_while_listing(self.put, lambda: self.listing("etag/"), bodies)
        for key, data in bodies.items():
            size = f"PutObject {key} ({len(data)} bytes, MD5 {md5(data)})"
            if got[key] != md5(data):
                raise ContractFailure(
                    "answers a PUT with an ETag that is not the body's MD5 (while the "
                    "bucket was being listed)",
                    size,
                    f"HTTP 200 with ETag {got[key]}",
                )
            head = str(self.s3.head_object(Bucket=self.bucket, Key=key)["ETag"]).strip('"')
            if head != md5(data):
                raise ContractFailure(
                    "keeps an ETag that is not the body's MD5", f"HeadObject {key}", head
                )
        # An object listed while its PUT was unanswered may have no ETag yet (rclone serve s3
        # lists it so while it moves the upload into place); one listed before its body is
        # whole is the unfinished PUT check's.
        self.check_listed_digests(
            seen,
            "etag/",
            bodies,
            md5,
            "lists an ETag that is not the body's MD5 (listing during PUTs)",
            "ETag",
            unanswered_may_lack=True,
        )

    def unfinished_put(self) -> None:
        """A PUT whose body is half sent is not listed (S3 lists an object once its PUT
        completed); sent whole, it is answered with the body's MD5."""
        key, data = "unfinished/object", os.urandom(256 * 1024)
        half = len(data) // 2
        section = self.emulator.config_section(USER)
        account = Account(
            section.endpoint_url, section.region, section.access_key_id, section.secret_access_key
        )

        def while_held() -> dict[str, str]:
            deadline = time.monotonic() + HOLD_S
            while time.monotonic() < deadline:
                if listed := self.listing("unfinished/"):
                    return listed
                time.sleep(0.1)
            return {}

        result = put_in_two_parts(account, self.bucket, key, data, half, while_held)
        if result.meanwhile:
            raise ContractFailure(
                "lists an object before its PUT completed",
                f"ListObjectsV2 prefix=unfinished/ while PutObject {key} had sent {half} of "
                f"{len(data)} bytes",
                ", ".join(f"{k} with ETag '{tag}'" for k, tag in result.meanwhile.items()),
            )
        if result.status != 200 or result.etag != md5(data):
            raise ContractFailure(
                "answers a PUT sent in two parts wrongly",
                f"PutObject {key} ({len(data)} bytes in two parts, MD5 {md5(data)})",
                f"HTTP {result.status} with ETag '{result.etag}'",
            )

    def list_folder(self, prefix: str, v1: bool = False, page: int = 1000) -> tuple[list, list]:
        """(common prefixes, keys) of one folder with delimiter '/', every page, in the
        order the pages give them."""
        prefixes: list[str] = []
        keys: list[str] = []
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
        op = "list_objects" if v1 else "list_objects_v2"
        for p in self.s3.get_paginator(op).paginate(**args, PaginationConfig={"PageSize": page}):
            prefixes += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
            keys += [o["Key"] for o in p.get("Contents", [])]
        return prefixes, keys

    def list_keys(self, operation: str, prefix: str, page: int) -> list[str]:
        """Every key under ``prefix`` listed by ``operation`` (list_objects or
        list_objects_v2) ``page`` keys a page."""
        pages = self.s3.get_paginator(operation).paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": page}
        )
        return [o["Key"] for p in pages for o in p.get("Contents", [])]

    def delimiter(self) -> None:
        """Every folder's listing with delimiter '/' has every common prefix and key."""
        self.put_tree()
        for v1, op in ((False, "ListObjectsV2"), (True, "ListObjects")):
            self.check_delimiter(
                lambda folder: self.list_folder(folder, v1),  # noqa: B023 (called at once)
                lambda folder: f"{op} prefix={folder}",  # noqa: B023
                ("CommonPrefixes", "Contents"),
            )

    def order(self) -> None:
        """Listings (V2 and V1) are in UTF-8 key order."""
        self.put_order_keys()
        for op, name in (("ListObjectsV2", "list_objects_v2"), ("ListObjects", "list_objects")):
            self.check_order(
                partial(self.list_keys, name, "order/"),
                "lists keys out of UTF-8 key order",
                f"{op} prefix=order/",
            )

    def paging(self) -> None:
        """Every page size gives the same listing, with and without a delimiter."""
        self.put_order_keys()
        self.put_tree()
        for op in ("ListObjectsV2", "ListObjects"):
            name = "list_objects_v2" if op == "ListObjectsV2" else "list_objects"
            self.check_key_paging(
                partial(self.list_keys, name, "order/"),
                lambda page: f"{op} prefix=order/ max-keys={page}, every page",  # noqa: B023
            )
        self.check_paging(
            lambda page: self.list_folder("tree/", page=page),
            lambda page: f"ListObjectsV2 prefix=tree/ max-keys={page}",
        )

    def multipart(self) -> None:
        """Create, two parts, complete: the object is the parts, its ETag a valid one."""
        key, parts = "multipart/object", [os.urandom(PART), os.urandom(1024)]
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        done = []
        for number, data in enumerate(parts, 1):
            tag = self.s3.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number, Body=data
            )["ETag"]
            if tag.strip('"') != md5(data):
                raise ContractFailure(
                    "answers UploadPart with an ETag that is not the part's MD5",
                    f"UploadPart {key} part {number} ({len(data)} bytes, MD5 {md5(data)})",
                    f"ETag {tag}",
                )
            done.append({"PartNumber": number, "ETag": tag})
        result = self.s3.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done}
        )
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        whole = b"".join(parts)
        if body != whole:
            raise ContractFailure(
                "serves a completed multipart object that is not its parts joined",
                f"GetObject {key} after CompleteMultipartUpload of 2 parts ({len(whole)} B)",
                f"{len(body)} bytes, MD5 {md5(body)} (want {md5(whole)})",
            )
        joined = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
        tag = str(result["ETag"]).strip('"')
        if tag not in (f"{joined}-2", md5(whole)):
            raise ContractFailure(
                "answers CompleteMultipartUpload with an ETag that is neither S3's "
                "MD5-of-part-MD5s-N nor the body's MD5",
                f"CompleteMultipartUpload {key} (2 parts)",
                f"ETag {tag}, not {joined}-2",
            )

    def abort(self) -> None:
        """AbortMultipartUpload succeeds (204) and leaves no upload and no object."""
        key = "multipart/aborted"
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        self.s3.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"part"
        )
        request = f"AbortMultipartUpload {key} uploadId={upload}"
        try:
            status = self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)[
                "ResponseMetadata"
            ]["HTTPStatusCode"]
        except Exception as e:
            raise ContractFailure("refuses to abort a multipart upload", request, answer(e)) from e
        if status != 204:
            raise ContractFailure("aborts a multipart upload oddly", request, f"HTTP {status}")
        if key in self.listing("multipart/"):
            raise ContractFailure(
                "keeps an object of an aborted upload", "ListObjectsV2 prefix=multipart/", key
            )

    def aborted_parts(self) -> None:
        """ListParts of an aborted upload answers 404 (NoSuchUpload)."""
        key = "multipart/aborted-parts"
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        self.s3.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"part"
        )
        self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
        try:
            self.s3.list_parts(Bucket=self.bucket, Key=key, UploadId=upload)
        except Exception as e:
            if status_of(e) == 404:
                return
            raise ContractFailure(
                "answers ListParts of an aborted upload oddly", f"ListParts {key}", answer(e)
            ) from e
        raise ContractFailure(
            "keeps an aborted multipart upload", f"ListParts {key} after abort", "HTTP 200"
        )

    def batch_delete(self) -> None:
        """DeleteObjects of one folder's keys, twice at once: both succeed, nothing left."""
        keys = self.put_batch()
        objects = {"Objects": [{"Key": k} for k in keys], "Quiet": False}
        request = f"DeleteObjects of {len(keys)} keys under batch/ (two at once)"
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(self.s3.delete_objects, Bucket=self.bucket, Delete=objects)
                for _ in range(2)
            ]
            try:
                results = [f.result() for f in futures]
            except Exception as e:
                raise ContractFailure("fails a batch delete", request, answer(e)) from e
        for result in results:
            if result.get("Errors"):
                raise ContractFailure(
                    "reports errors deleting keys", request, f"Errors {result['Errors']}"
                )
        self.check_none_left("batch/", "keeps keys a batch delete deleted")

    def conditional_get(self) -> None:
        """If-Match and If-None-Match are honoured."""
        key, data = "get/object", os.urandom(1000)
        tag = f'"{self.put(key, data)}"'
        cases = [
            ({"IfMatch": tag}, 200),
            ({"IfMatch": '"0123456789abcdef0123456789abcdef"'}, 412),
            ({"IfNoneMatch": tag}, 304),
            ({"IfNoneMatch": '"0123456789abcdef0123456789abcdef"'}, 200),
        ]
        for headers, want in cases:
            try:
                got = self.s3.get_object(Bucket=self.bucket, Key=key, **headers)
                status = got["ResponseMetadata"]["HTTPStatusCode"]
                text = f"HTTP {status}"
            except Exception as e:
                status, text = status_of(e), answer(e)
            if status != want:
                raise ContractFailure(
                    f"ignores a conditional GET (want HTTP {want})",
                    f"GetObject {key} {headers} (ETag {tag})",
                    text,
                )

    def keys(self) -> None:
        """The user's and the other's keys work (each in its own bucket); unknown and
        wrong-secret keys are refused with 403."""
        theirs_bucket = self.other_bucket("s3o")  # None: the target has no other
        if theirs_bucket is not None:
            with theirs_bucket as theirs:
                other = self.client(OTHER)

                def write_read(data: bytes) -> bytes:
                    other.put_object(Bucket=theirs, Key="k", Body=data)
                    return bytes(other.get_object(Bucket=theirs, Key="k")["Body"].read())

                self.check_declared(
                    write_read,
                    b"other's object",
                    f"PutObject/GetObject {theirs}/k with the other account's key",
                )
                other.delete_object(Bucket=theirs, Key="k")
        stranger = self.emulator.client(UNKNOWN)
        self.check_unknown_refused(
            lambda: stranger.list_objects_v2(Bucket=self.bucket),
            lambda e: status_of(e) == 403,
            f"ListObjectsV2 {self.bucket} with a key the emulator does not declare",
        )

    def server_errors(self) -> None:
        """No request of the checks above was answered with a 5xx (even if a retry won)."""
        if self.errors:
            raise ContractFailure(
                "answers with server errors (botocore retried them)",
                ", ".join(sorted(set(self.errors))),
                f"{len(self.errors)} times",
            )
