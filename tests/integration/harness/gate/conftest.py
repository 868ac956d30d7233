"""Fixtures of the gate tests: the seeded buckets of the allow/deny matrix."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.accounts import USER
from tests.integration.harness.gate.helpers import SEED, SEED_KEY, Emulators, MatrixBucket


@pytest.fixture(scope="module")
def matrix_bucket(emulators: Emulators) -> Iterator[Callable[[str, str, bool], str]]:
    """``matrix_bucket(store, owner, public)``: one seeded bucket per combination, made once
    per module (and worker) and deleted at the end."""
    made: dict[tuple[str, str, bool], str] = {}

    def get(store: str, owner: str, public: bool) -> str:
        key = (store, owner, public)
        if key not in made:
            name = f"gm-{owner}-{'pub' if public else 'prv'}-{uuid.uuid4().hex[:10]}"
            emulators[store].make_bucket(name, owner=owner, public=public, objects={SEED_KEY: SEED})
            made[key] = name
        return made[key]

    yield get
    for (store, _, _), name in made.items():
        emulators[store].delete_bucket(name)


@pytest.fixture
def own_bucket(matrix_bucket: MatrixBucket, store_name: str) -> str:
    """USER's private seeded bucket in the test's store."""
    return matrix_bucket(store_name, USER, False)
