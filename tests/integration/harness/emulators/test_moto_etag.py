"""Our moto launch (harness.emulators.moto_server): a listing that reads a key's ETag while
the PUT's own response is computing it gets, and leaves cached, the MD5 of the key's bytes.

moto's backend objects are driven in-process (no server); the PUT's ETag computation is held
between moto's seek(0) and its read of the key's file while the listing runs."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.s3.models import FakeKey, S3Backend

from harness.emulators import moto_server
from harness.emulators.r2 import R2Emulator
from harness.emulators.s3 import S3Emulator

ACCOUNT = "123456789012"
HANG_GUARD = 10.0
"""Seconds; the threads need milliseconds."""


class _HeldFile:
    """A key's temporary file whose first read waits for ``release`` (``reached`` is set
    when it starts waiting); later reads go straight through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reached = threading.Event()
        self.release = threading.Event()

    def read(self, size: int = -1) -> bytes:
        if not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(HANG_GUARD), "never released"
        return bytes(self.inner.read(size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _WatchedLock:
    """A key's lock that sets ``contended`` when a thread must wait for it."""

    def __init__(self, inner: threading.Lock, contended: threading.Event) -> None:
        self.inner = inner
        self.contended = contended

    def __enter__(self) -> None:
        if not self.inner.acquire(blocking=False):
            self.contended.set()
            assert self.inner.acquire(timeout=HANG_GUARD), "lock never freed"

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


@pytest.fixture(
    params=[
        "patched",
        pytest.param(
            "moto",
            marks=pytest.mark.xfail(
                strict=True,
                raises=AssertionError,
                reason="moto computes a key's ETag without the key's lock",
            ),
        ),
    ]
)
def launch(request: pytest.FixtureRequest) -> Iterator[str]:
    """moto as our launch patches it, or moto as it is (the race the patch removes)."""
    if request.param == "patched":
        moto_server.patch_moto()
    try:
        yield request.param
    finally:
        moto_server.unpatch_moto()


def _run(target: Any, done: threading.Event | None = None) -> tuple[threading.Thread, list[Any]]:
    """``target()`` in a thread; its result (or exception) lands in the returned list."""
    out: list[Any] = []

    def body() -> None:
        try:
            out.append(target())
        except BaseException as e:  # handed to the test
            out.append(e)
        finally:
            if done is not None:
                done.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def backend() -> Iterator[S3Backend]:
    """An S3 backend of its own with the bucket ``etag-race`` (bucket names are global in
    moto's process: it is deleted afterwards)."""
    backend = S3Backend("us-east-1", ACCOUNT)
    backend.create_bucket("etag-race", "us-east-1")
    try:
        yield backend
    finally:
        backend.delete_object("etag-race", "object")
        backend.delete_bucket("etag-race")


def test_listing_during_the_puts_etag_sees_the_md5_of_the_bytes(
    launch: str, backend: S3Backend
) -> None:
    data = bytes(range(256)) * 64
    bucket = backend.get_bucket("etag-race")
    key: FakeKey = backend.put_object("etag-race", "object", data)  # visible, no ETag yet
    real_file, real_lock = key._value_buffer, key.lock
    held = _HeldFile(real_file)
    listed = threading.Event()  # the listing is done or waits for the key's lock
    key._value_buffer = held  # type: ignore[assignment]
    key.lock = _WatchedLock(real_lock, listed)  # type: ignore[assignment]
    try:
        # The PUT's response (moto's put_object handler) reads the ETag: held after seek(0).
        put, put_out = _run(lambda: key.response_dict["ETag"])
        assert held.reached.wait(HANG_GUARD)

        def listing() -> list[str]:
            keys, _, _, _ = backend.list_objects(bucket, None, None, None, 1000)
            return [k.etag for k in keys]

        lister, list_out = _run(listing, done=listed)
        assert listed.wait(HANG_GUARD)
        held.release.set()
        put.join(HANG_GUARD)
        lister.join(HANG_GUARD)
        assert not put.is_alive() and not lister.is_alive()
    finally:
        held.release.set()
        key._value_buffer, key.lock = real_file, real_lock
    md5 = f'"{hashlib.md5(data).hexdigest()}"'
    assert {"put": put_out, "list": list_out, "cached": key.etag} == {
        "put": [md5],
        "list": [[md5]],
        "cached": md5,
    }


@pytest.mark.parametrize("emulator", [S3Emulator, R2Emulator])
def test_s3_and_r2_run_moto_through_the_patched_launch(
    emulator: type[S3Emulator], tmp_path: Path
) -> None:
    argv, env = emulator.command(tmp_path, 10001, 10002)
    assert argv[1:3] == ["-m", moto_server.__name__]
    tree = Path(moto_server.__file__).resolve().parents[2]
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tree)
