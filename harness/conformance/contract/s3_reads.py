"""The S3 contract's ranged reads (a mixin of the S3 probes): a first-last range, a suffix
range and a range past the object's end."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from harness.conformance.contract import ContractFailure


class RangedReads:
    """Checks of GetObject with a Range; the probes give ``s3`` (a boto3 client),
    ``bucket``, ``put(key, data)`` and ``check_range_past_end``."""

    s3: Any
    bucket: str

    if TYPE_CHECKING:  # given by the probes class and BaseProbes

        def put(self, key: str, data: bytes) -> str: ...

        def check_range_past_end(self, read: Any, refused: int, request: str) -> None: ...

    def ranged_get(self) -> None:
        """Range: bytes=first-last gets those bytes with 206."""
        self.check_range("get/ranged", "bytes=10-19", slice(10, 20))

    def suffix_range(self) -> None:
        """Range: bytes=-N gets the last N bytes with 206."""
        self.check_range("get/suffix", "bytes=-5", slice(-5, None))

    def range_past_end(self) -> None:
        """Range: bytes=SIZE- is refused with 416 (InvalidRange)."""
        key = "get/past-end"
        self.put(key, os.urandom(1000))
        self.check_range_past_end(
            lambda: bytes(
                self.s3.get_object(Bucket=self.bucket, Key=key, Range="bytes=1000-")["Body"].read()
            ),
            416,
            f"GetObject {key} Range: bytes=1000- (of 1000 bytes)",
        )

    def check_range(self, key: str, rng: str, want: slice) -> None:
        """A GET of ``key`` with Range ``rng`` answers 206 with ``data[want]``."""
        data = os.urandom(1000)
        self.put(key, data)
        request = f"GetObject {key} Range: {rng} (of {len(data)} bytes)"
        try:
            got = self.s3.get_object(Bucket=self.bucket, Key=key, Range=rng)
            status = got["ResponseMetadata"]["HTTPStatusCode"]
            body = got["Body"].read()
        except Exception as e:
            if type(e).__name__ != "FlexibleChecksumError":
                raise
            raise ContractFailure(
                "answers a ranged GET with a checksum header (x-amz-checksum-*) that is "
                "not the range's (S3 sends none for a range), so the SDK rejects the body",
                request,
                str(e),
            ) from e
        if status != 206 or body != data[want]:
            raise ContractFailure(
                "serves a ranged GET wrongly",
                request,
                f"HTTP {status}, {len(body)} bytes, Content-Range {got.get('ContentRange')}",
            )
