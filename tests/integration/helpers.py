"""Plain helpers of the integration tests (their fixtures are in conftest.py)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from harness import emulator_registry as registry
from harness.emulators.fleet import RunningEmulator
from skycore.task import Task
from tests.names import unique_name

REPO = Path(__file__).resolve().parents[2]
"""The repository's root."""


def stores_of_kind(kind: type[RunningEmulator] = RunningEmulator) -> list[Any]:
    """A pytest.param per registered store whose emulator is a ``kind``, marked with the
    store's marker (so ``--store`` selects it); for tests that use ``emulators[store_name]``."""
    return [
        pytest.param(store, marks=getattr(pytest.mark, cls.marker()), id=store)
        for store, cls in registry.emulator_classes().items()
        if issubclass(cls, kind)
    ]


def stores_with_s3_access(kind: type[RunningEmulator] = RunningEmulator) -> list[Any]:
    """:func:`stores_of_kind`, only the stores that declare every S3 access mechanism
    (bucket policies, ACLs, Block Public Access, Object Ownership): for tests of S3's model."""
    from harness.gate.access_features import S3_FEATURES

    wanted = S3_FEATURES.mechanisms
    return [
        param
        for param in stores_of_kind(kind)
        if wanted <= registry.get_emulator_class(param.values[0]).access_features.mechanisms
    ]


def s3_error(call: Callable[[], Any]) -> tuple[int, str, str]:
    """(HTTP status, error code, message) of a boto3 call that must fail."""
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as info:
        call()
    response = info.value.response
    error = response.get("Error", {})
    return response["ResponseMetadata"]["HTTPStatusCode"], error["Code"], error["Message"]


def quiet() -> Console:
    """A console that prints nowhere (its text: ``console.file.getvalue()``)."""
    return Console(file=io.StringIO(), width=200)


def task_maker(folder: Path) -> Callable[..., Task]:
    """``make(**fields)``: the fields written as a task YAML of its own in ``folder``, loaded."""

    def make(**fields: Any) -> Task:
        path = folder / f"{unique_name('task', 6)}.yaml"
        path.write_text(yaml.safe_dump(fields))
        return Task.from_yaml(path)

    return make


@contextlib.contextmanager
def emulator_bucket(
    emulator: RunningEmulator, prefix: str, **make: Any
) -> Iterator[tuple[str, str]]:
    """(name, url) of a new bucket on ``emulator`` (``make_bucket``'s keywords: owner,
    public, objects), deleted when the block ends, whatever happened in it."""
    name = unique_name(prefix)
    url = emulator.make_bucket(name, **make)
    try:
        yield name, url
    finally:
        emulator.delete_bucket(name)
