"""Helpers for the S3 access model's unit tests: a decision as a bool, and a bucket given a
policy document."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ParamSpec

from harness.gate.rules import Verdict
from harness.store_gates.s3.access import BucketAccess, authorize
from harness.store_gates.s3.policy import BucketPolicy

P = ParamSpec("P")


def allowing(decide: Callable[P, Verdict]) -> Callable[P, bool]:
    """``decide`` answering only whether it allows, with the same parameters."""

    def allows(*args: P.args, **kwargs: P.kwargs) -> bool:
        return decide(*args, **kwargs).allowed

    return allows


allowed = allowing(authorize)
"""Whether authorize() allows the request (authorize's own parameters)."""


def with_policy(bucket: BucketAccess, *statements: dict[str, Any]) -> BucketAccess:
    """``bucket`` with a policy of ``statements``, named for the bucket "bk"."""
    text = json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
    return bucket.with_policy(BucketPolicy.parse(text, "bk"))
