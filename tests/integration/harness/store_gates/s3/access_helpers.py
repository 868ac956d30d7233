"""Plain helpers of the S3 access tests (their ``make`` fixture is in conftest.py here)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from harness.store_gates.s3.acl import S3_ACCOUNTS

Maker = Callable[..., str]
"""``make(owner=USER, acls=False, block=True, prefix="ac")`` -> a new bucket's name"""


def error_of(call: Callable[[], Any]) -> tuple[int, str]:
    """(HTTP status, S3 error code) of a call that must fail."""
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as info:
        call()
    response = info.value.response
    return int(response["ResponseMetadata"]["HTTPStatusCode"]), response["Error"].get("Code", "")


def read_body(client: Any, bucket: str, key: str) -> bytes:
    """The body of ``key`` read through ``client``."""
    return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def policy_doc(*statements: dict[str, Any]) -> str:
    """A bucket policy of ``statements``, as JSON."""
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def everyone_may(action: str | list[str], bucket: str) -> dict[str, Any]:
    """A policy statement letting everyone (anonymous callers too) do ``action`` on every
    object of ``bucket``."""
    return {
        "Effect": "Allow",
        "Principal": "*",
        "Action": action,
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }


def account_principal(owner: str) -> dict[str, str]:
    """The policy principal of ``owner``'s account (its root)."""
    return {"AWS": f"arn:aws:iam::{S3_ACCOUNTS[owner].account_id}:root"}
