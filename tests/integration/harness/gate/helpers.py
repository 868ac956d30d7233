"""The gate tests' shared names: the seeded object, the matrix buckets' types and the
readers of an error answer (the fixtures are in conftest.py beside this module)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import requests

from harness.emulators.fleet import RunningEmulator

SEED_KEY = "seed/hello world.txt"
SEED = b"hello from the seed object\n"
Emulators = dict[str, RunningEmulator]
MatrixBucket = Callable[[str, str, bool], str]
"""``matrix_bucket(store, owner, public)`` -> the name of a seeded bucket"""


def fault_cli(store: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run(*args)``: ``harness fault STORE *args`` with this interpreter's ``harness``,
    its output captured as text."""
    harness = str(Path(sys.executable).parent / "harness")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [harness, "fault", store, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    return run


def status_of(error: BaseException) -> int | None:
    """The HTTP status of an SDK's error (botocore, google, azure), None if it has none."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore
        return int(response["ResponseMetadata"]["HTTPStatusCode"])
    code = getattr(error, "code", None) or getattr(error, "status_code", None)
    return int(code) if code is not None else None


def xml_error(resp: requests.Response) -> tuple[int, str]:
    """(HTTP status, the XML error document's Code) of an answer."""
    code = re.search(rb"<Code>(.*?)</Code>", resp.content)
    return resp.status_code, code.group(1).decode() if code else ""
