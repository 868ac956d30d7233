"""A PutObject whose body the probe sends in two parts, with a pause it controls in between:
while the second part is held back the PUT is surely unfinished (nobody has the whole body),
so whatever the server shows meanwhile is what it shows of an unfinished PUT. Signed with
SigV4 (payload unsigned, as S3 allows), sent over plain HTTP to the gate."""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

T = TypeVar("T")

TIMEOUT_S = 60.0
"""A hang guard for the PUT's connection."""


@dataclass(frozen=True)
class Account:
    """Where and as whom to PUT: the endpoint (``http://host:port``), the region and an
    access key."""

    endpoint: str
    region: str
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class HeldPutResult(Generic[T]):
    """The PUT's answer (status, ETag without quotes, '' if none) and what was seen while
    it was held."""

    status: int
    etag: str
    meanwhile: T


def put_in_two_parts(
    account: Account,
    bucket: str,
    key: str,
    body: bytes,
    first: int,
    meanwhile: Callable[[], T],
) -> HeldPutResult[T]:
    """PUT ``body`` to ``bucket/key``: send the headers and ``body[:first]``, call
    ``meanwhile()``, then send the rest and read the answer."""
    url = f"{account.endpoint.rstrip('/')}/{bucket}/{quote(key)}"
    request = AWSRequest(
        "PUT",
        url,
        headers={"Content-Length": str(len(body)), "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"},
    )
    credentials = Credentials(account.access_key_id, account.secret_access_key)
    S3SigV4Auth(credentials, "s3", account.region).add_auth(request)
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"not a plain HTTP endpoint: {account.endpoint}")
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_S)
    try:
        connection.putrequest("PUT", parts.path, skip_accept_encoding=True)
        for name, value in request.headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(body[:first])
        seen = meanwhile()
        # A server that answered early (a refusal) may have closed its side: read that answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.send(body[first:])
        response = connection.getresponse()
        response.read()
        etag = (response.getheader("ETag") or "").strip('"')
        return HeldPutResult(response.status, etag, seen)
    finally:
        connection.close()
