"""The ``stream-bandwidth`` fault through the real gates and SDKs: it paces each request's
body on its own (a request that starts while another is held back waits for nothing), both
ways, and says so in its own records of the streams it paced."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from harness.emulators.fleet import RunningEmulator
from tests.integration.helpers import emulator_bucket, stores_of_kind
from tests.polling import wait_for

SLOW_MIBPS = 0.25  # the held body takes 4 s: long enough for a small one to pass meanwhile
HANG_GUARD_S = 120.0


def _streams(emulator: RunningEmulator, fault: dict[str, Any]) -> list[Any]:
    """The fault's records of the streams it paced, in the order they started (the
    object's key is not always in the path: a GCS upload names it in its body)."""
    return list(emulator.fault(fault["id"])["streams"])


def _wait_flowing(emulator: RunningEmulator, fault: dict[str, Any]) -> None:
    """Wait until the gate has passed some request body under the fault."""
    wait_for(
        "a request body to reach the gate",
        lambda: any(s["request_bytes"] for s in _streams(emulator, fault)),
        HANG_GUARD_S,
        poll=0.025,
    )


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_stream_bandwidth_paces_each_request_on_its_own(
    emulators: dict[str, RunningEmulator], store_name: str
) -> None:
    """A big upload is held back to its cap; a small one that starts while the big one is
    in debt passes without waiting (under ``bandwidth``'s shared bucket it would wait) and
    ends first; a download is paced on the response side."""
    emulator = emulators[store_name]
    held, quick = os.urandom(1 << 20), os.urandom(16 << 10)
    with emulator_bucket(emulator, "sbw") as (bucket, _url), ThreadPoolExecutor(1) as pool:
        fault = emulator.add_fault("stream-bandwidth", mibps=SLOW_MIBPS, bucket=bucket)
        try:
            upload = pool.submit(emulator.write_object, bucket, "sbw-held", held)
            _wait_flowing(emulator, fault)
            emulator.write_object(bucket, "sbw-quick", quick)
            upload.result(timeout=HANG_GUARD_S)
            big, small = _streams(emulator, fault)
        finally:
            emulator.clear_faults(fault_id=fault["id"])
        assert big["request_bytes"] >= len(held) and big["waited_s"] > 0
        assert small["request_bytes"] >= len(quick) and small["waited_s"] == 0.0
        assert big["started_s"] < small["started_s"] < small["ended_s"] < big["ended_s"]
        assert emulator.fault(fault["id"])["hits"] == 2

        reads = emulator.add_fault("stream-bandwidth", mibps=1, bucket=bucket, method="GET")
        try:
            assert emulator.read_object(bucket, "sbw-held") == held
            got = _streams(emulator, reads)
        finally:
            emulator.clear_faults(fault_id=reads["id"])
        media = [s for s in got if s["response_bytes"] == len(held)]
        assert media and media[0]["waited_s"] > 0 and media[0]["request_bytes"] == 0, got
