"""Injected faults through the gate: errors and deny in the store's own API format, outage,
latency and expiry, bandwidth and resets under the SDKs, and ``harness fault``."""

from __future__ import annotations

import itertools
import os
import time
import uuid

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.emulators.fleet import RunningEmulator
from harness.emulators.gcs import GcsEmulator
from tests.integration.harness.gate.helpers import (
    Emulators,
    MatrixBucket,
    fault_cli,
    xml_error,
)
from tests.integration.helpers import stores_of_kind


def _raw_path(emulator: RunningEmulator, bucket: str, key: str) -> str:
    """The gate URL of ``key`` in ``bucket`` (XML-style path; Azure: in the other account)."""
    from harness.emulators.azure import ACCOUNTS, AzureEmulator

    if isinstance(emulator, AzureEmulator):
        return f"{emulator.endpoint}/{ACCOUNTS[OTHER].name}/{bucket}/{key}"
    return f"{emulator.endpoint}/{bucket}/{key}"


def _error_code(emulator: RunningEmulator, resp: requests.Response) -> str:
    """The API's error code of a response, read the way its SDK reads it."""
    from harness.emulators.azure import AzureEmulator

    if isinstance(emulator, GcsEmulator):
        return str(resp.json()["error"]["errors"][0]["reason"])
    code = xml_error(resp)[1]
    if isinstance(emulator, AzureEmulator):
        assert resp.headers["x-ms-error-code"] == code
    return code


EXPECTED_CODES = {  # (emulator class name, status) -> the service's own error code
    ("S3Emulator", 503): "SlowDown",
    ("S3Emulator", 500): "InternalError",
    ("S3Emulator", 403): "AccessDenied",
    ("GcsEmulator", 503): "backendError",
    ("GcsEmulator", 500): "backendError",
    ("GcsEmulator", 403): "forbidden",
    ("AzureEmulator", 503): "ServerBusy",
    ("AzureEmulator", 500): "InternalError",
    ("AzureEmulator", 403): "AuthenticationFailed",
}


def _expected_code(emulator: RunningEmulator, status: int) -> str:
    for cls in type(emulator).__mro__:
        if (cls.__name__, status) in EXPECTED_CODES:
            return EXPECTED_CODES[(cls.__name__, status)]
    raise AssertionError(f"no expected error code for {type(emulator).__name__} {status}")


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_errors_and_deny_in_the_api_format(emulators: Emulators, store_name: str) -> None:
    """errors (503, 500) and deny answer in the store's own format, only on the fault's
    bucket and method; each start and end is in the fault log."""
    emulator = emulators[store_name]
    target, bystander = (f"fx-{uuid.uuid4().hex[:10]}" for _ in range(2))
    before = time.time_ns()
    try:
        for kind, status in (("errors", 503), ("errors", 500), ("deny", 403)):
            options = {"status": status} if kind == "errors" else {}
            fault = emulator.add_fault(kind, bucket=target, method="GET", **options)
            expected = (status, _expected_code(emulator, status))

            def answer(resp: requests.Response) -> tuple[int, str]:
                try:
                    return resp.status_code, _error_code(emulator, resp)
                except (ValueError, KeyError, AssertionError):
                    return resp.status_code, ""

            assert answer(requests.get(_raw_path(emulator, target, "k"), timeout=10)) == expected
            # another bucket, another method, the fault cleared: the emulator's own answers
            other = requests.get(_raw_path(emulator, bystander, "k"), timeout=10)
            assert answer(other) != expected
            put = requests.put(_raw_path(emulator, target, "k"), data=b"x", timeout=10)
            assert answer(put) != expected or kind == "deny"
            emulator.clear_faults(fault_id=fault["id"])
            after = requests.get(_raw_path(emulator, target, "k"), timeout=10)
            assert answer(after) != expected
    finally:
        emulator.clear_faults(bucket=target)
    log = [e for e in emulator.fault_log(target) if e["t_ns"] >= before and e["bucket"] == target]
    phases = [(e["kind"], e["phase"]) for e in log]
    assert phases == [(k, p) for k in ("errors", "errors", "deny") for p in ("start", "end")]
    assert all(a["t_ns"] <= b["t_ns"] for a, b in itertools.pairwise(log))


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_outage_latency_and_expiry(emulators: Emulators, store_name: str) -> None:
    """An outage holds requests (no answer) until it ends, then they are served; latency
    delays each request; a timed fault ends by itself and logs its end at its end time."""
    emulator = emulators[store_name]
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    url = _raw_path(emulator, bucket, "k")
    baseline = requests.get(url, timeout=10).status_code
    fault = emulator.add_fault("outage", seconds=1.5, bucket=bucket)
    started = time.monotonic()
    assert requests.get(url, timeout=30).status_code == baseline
    assert time.monotonic() - started >= 1.2
    ends = [e for e in emulator.fault_log(bucket) if e["id"] == fault["id"]]
    assert [e["phase"] for e in ends] == ["start", "end"]
    assert ends[1]["t_ns"] == fault["ends_at_ns"]
    # until cleared: a request stays unanswered, then goes through after 'clear'
    emulator.add_fault("outage", bucket=bucket)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(url, timeout=1.0)
    # (other tests' faults on the shared emulator are scoped to their own buckets)
    assert [f["kind"] for f in emulator.faults() if f["bucket"] == bucket] == ["outage"]
    emulator.clear_faults(bucket=bucket)
    assert requests.get(url, timeout=10).status_code == baseline
    with_latency = emulator.add_fault("latency", ms=400, bucket=bucket)
    started = time.monotonic()
    requests.get(url, timeout=10)
    assert time.monotonic() - started >= 0.4
    emulator.clear_faults(fault_id=with_latency["id"])
    # Cleared, it delays nothing more: the requests after it meet no fault (its hits stop at
    # the one request above, and none of the bucket's faults is left).
    for _ in range(3):
        requests.get(url, timeout=10)
    ended = [e for e in emulator.fault_log(bucket) if e["id"] == with_latency["id"]]
    assert [(e["phase"], e["hits"]) for e in ended] == [("start", 0), ("end", 1)], ended
    assert not [f for f in emulator.faults() if f["bucket"] == bucket]


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_fault_bandwidth_and_resets_with_the_sdk(
    emulators: Emulators, matrix_bucket: MatrixBucket, store_name: str
) -> None:
    """bandwidth caps bodies both ways; reset cuts connections mid-body (a raw client sees
    the connection broken); under resets and 503s the SDK's retries deliver the object
    whole."""
    import hashlib

    emulator = emulators[store_name]
    bucket = matrix_bucket(store_name, USER, False)
    data = os.urandom(2 << 20)
    try:
        with_bw = emulator.add_fault("bandwidth", mibps=2, bucket=bucket)
        started = time.monotonic()
        emulator.write_object(bucket, "fx/slow", data)
        assert time.monotonic() - started >= 0.9  # 2 MiB at 2 MiB/s
        started = time.monotonic()
        assert emulator.read_object(bucket, "fx/slow") == data
        assert time.monotonic() - started >= 0.9
        emulator.clear_faults(fault_id=with_bw["id"])
        emulator.add_fault("reset", rate=1.0, bucket=bucket, method="PUT")
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.put(_raw_path(emulator, bucket, "fx/raw"), data=data, timeout=30)
        emulator.clear_faults(bucket=bucket)
        # low rates: every SDK gives up after a few attempts (Azure's back off 15 s each)
        emulator.add_fault("reset", rate=0.15, bucket=bucket)
        emulator.add_fault("errors", rate=0.15, bucket=bucket)
        emulator.write_object(bucket, "fx/retried", data)
        emulator.clear_faults(bucket=bucket)
        got = emulator.read_object(bucket, "fx/retried")
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    finally:
        emulator.clear_faults(bucket=bucket)


def test_fault_cli(emulators: Emulators) -> None:
    """``harness fault STORE ...``: start, list, clear; bad options are a clear error."""
    store = next(iter(emulators))
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    run = fault_cli(store)

    started = run("errors", "--rate", "0.5", "--seconds", "60", "--bucket", bucket)
    assert started.returncode == 0, started.stderr
    assert "errors" in started.stdout and bucket in started.stdout
    listed = run("list")
    assert bucket in listed.stdout and "rate=0.5" in listed.stdout
    bad = run("latency", "--bucket", bucket)
    assert bad.returncode != 0 and "ms" in bad.stderr
    cleared = run("clear", "--bucket", bucket)
    assert cleared.returncode == 0 and "Cleared 1" in cleared.stdout
    assert bucket not in run("list").stdout
