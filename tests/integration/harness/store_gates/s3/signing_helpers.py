"""Plain helpers of the S3 signing tests: clients that sign each way, the gate's answers
read back (their seeded ``bucket`` fixture is in conftest.py here)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import requests

from harness.accounts import USER
from harness.emulators.s3 import S3Emulator


def signing_client(
    s3: S3Emulator, version: str, secret: str | None = None, owner: str = USER
) -> Any:
    """A boto3 client signing with ``version`` ('s3v4' or 's3') as ``owner`` (path style);
    ``secret`` replaces the owner's secret."""
    import boto3
    from botocore.config import Config

    key = s3.keys[owner]
    return boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name=s3.region,
        aws_access_key_id=key.access_key_id,
        aws_secret_access_key=secret or key.secret_access_key,
        config=Config(
            signature_version=version,
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
        ),
    )


def xml_error(resp: requests.Response) -> tuple[int, str]:
    """(HTTP status, the XML error document's Code) of an answer."""
    code = re.search(rb"<Code>(.*?)</Code>", resp.content)
    return resp.status_code, code.group(1).decode() if code else ""


def xml_message(resp: requests.Response) -> str:
    """The XML error document's Message of an answer."""
    found = re.search(rb"<Message>(.*?)</Message>", resp.content, re.S)
    return found.group(1).decode() if found else ""


def sdk_error(call: Callable[[], Any]) -> tuple[int, str]:
    """(HTTP status, S3 error code) of a boto3 call that must fail."""
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as info:
        call()
    response = info.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def send(request: Any) -> requests.Response:
    """Send a botocore AWSRequest as it was signed."""
    prepared = request.prepare()
    return requests.request(
        prepared.method,
        prepared.url,
        headers=dict(prepared.headers),
        data=prepared.body,
        timeout=10,
    )


def flip(char: str) -> str:
    """Another hex digit than ``char``: a signature with it flipped is forged."""
    return "1" if char == "0" else "0"
