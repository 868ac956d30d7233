"""Fixtures of the S3 gate's tests: ``make``, a new bucket made through the API as on AWS;
``bucket``, the signing tests' seeded bucket."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from harness.accounts import USER
from harness.emulators.s3 import S3Emulator
from tests.integration.harness.store_gates.s3.access_helpers import Maker


@pytest.fixture
def make(s3: S3Emulator) -> Iterator[Maker]:
    """``make(owner=USER, acls=False, block=True, prefix="ac")``: a new bucket, created
    through the API as on AWS (acls: ObjectWriter ownership; block=False: its Block Public
    Access removed); deleted after the test."""
    made: list[str] = []

    def create(
        owner: str = USER, acls: bool = False, block: bool = True, prefix: str = "ac"
    ) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client = s3.client(owner)
        if acls:
            client.create_bucket(Bucket=name, ObjectOwnership="ObjectWriter")
        else:
            client.create_bucket(Bucket=name)
        made.append(name)
        if not block:
            client.delete_public_access_block(Bucket=name)
        return name

    yield create
    for name in made:
        s3.delete_bucket(name)


@pytest.fixture
def bucket(s3: S3Emulator) -> Iterator[str]:
    """The name (not the URL, as the suite's ``bucket`` gives) of a private bucket of the
    user's holding one object, ``seed``; deleted after the test."""
    name = f"sig-{uuid.uuid4().hex[:12]}"
    s3.make_bucket(name, owner=USER, public=False, objects={"seed": b"seed"})
    yield name
    s3.delete_bucket(name)
