"""Faults that end on events (``max_hits``, StoreFaults.hold / wait_hits) and the ``corrupt``
fault, through the real gates: the SDKs see the wrong checksums while the objects stay
intact, and rclone deletes a corrupted upload and uploads it again."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.cloud.chaos import ChaosError
from harness.cloud.store_faults import StoreFaults
from harness.emulators.fleet import RunningEmulator
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from tests.conftest import RcloneRunner
from tests.integration.harness.gate.helpers import fault_cli
from tests.integration.helpers import emulator_bucket, stores_of_kind

Emulators = dict[str, RunningEmulator]


@pytest.fixture
def faults() -> Iterator[StoreFaults]:
    """A StoreFaults whose faults are cleared after the test (the ``store_faults`` fixture
    without the rest of the local cloud)."""
    made = StoreFaults()
    yield made
    made.clear_all()


def _raw_path(emulator: RunningEmulator, bucket: str, key: str) -> str:
    """The gate URL of ``key`` in ``bucket`` (XML-style path; Azure: in the other account)."""
    from harness.emulators.azure import ACCOUNTS, AzureEmulator

    if isinstance(emulator, AzureEmulator):
        return f"{emulator.endpoint}/{ACCOUNTS[OTHER].name}/{bucket}/{key}"
    return f"{emulator.endpoint}/{bucket}/{key}"


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data).digest()


# --- ending on events ------------------------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_max_hits_ends_the_fault_after_exactly_n_requests(
    emulators: Emulators, faults: StoreFaults, store_name: str
) -> None:
    """errors with max_hits=3 refuses exactly the first three matching requests and ends by
    itself (its end logged with ended "hits"); an outage with max_hits=2 holds the first
    request until the second arrives, and wait_hits sees the first one held."""
    emulator = emulators[store_name]
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    url = _raw_path(emulator, bucket, "k")
    baseline = requests.get(url, timeout=10).status_code
    assert baseline != 503
    with faults.hold(store_name, "errors", bucket=bucket, method="GET", max_hits=3) as fault:
        statuses = [requests.get(url, timeout=10).status_code for _ in range(5)]
        state = faults.state(store_name, fault)
    assert statuses == [503, 503, 503, baseline, baseline]
    assert (state["hits"], state["ended"], state["max_hits"]) == (3, "hits", 3)
    log = [e for e in emulator.fault_log(bucket) if e["id"] == fault["id"]]
    assert [(e["phase"], e["ended"], e["hits"]) for e in log] == [
        ("start", None, 0),
        ("end", "hits", 3),
    ]

    with faults.hold(store_name, "outage", bucket=bucket, max_hits=2) as outage:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(requests.get, url, timeout=120)
            held = faults.wait_hits(store_name, outage, 1, timeout=60)
            # the outage lasts until its second hit: the first request is still unanswered
            assert held["ended"] is None and not first.done()
            second = requests.get(url, timeout=60)
            assert first.result().status_code == baseline == second.status_code
        assert faults.state(store_name, outage)["ended"] == "hits"


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_wait_hits_and_hold_refuse_what_cannot_happen(
    emulators: Emulators, faults: StoreFaults, store_name: str
) -> None:
    """wait_hits on a fault that ended short of the hits says so instead of waiting; hold
    takes no seconds; a bad max_hits is refused naming the field."""
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    fault = faults.start(store_name, "errors", bucket=bucket, method="DELETE")
    faults.stop(store_name, fault)
    with pytest.raises(ChaosError, match=r"ended \(cleared\) after 0 of the 1"):
        faults.wait_hits(store_name, fault, 1, timeout=60)
    with pytest.raises(ChaosError, match="takes no seconds"):
        faults.hold(store_name, "outage", bucket=bucket, seconds=5)
    with pytest.raises(ChaosError, match="max_hits must be a positive integer"):
        faults.start(store_name, "errors", bucket=bucket, max_hits=0)
    with pytest.raises(ChaosError, match="no fault with id"):
        faults.state(store_name, 10**9)


def test_fault_cli_max_hits_and_corrupt(emulators: Emulators) -> None:
    """``harness fault STORE corrupt --max-hits N``: started, listed with its hits; a bad
    --max-hits is refused naming the option."""
    store = next(iter(emulators))
    bucket = f"fx-{uuid.uuid4().hex[:10]}"
    run = fault_cli(store)

    try:
        started = run("corrupt", "--max-hits", "2", "--rate", "0.5", "--bucket", bucket)
        assert started.returncode == 0, started.stderr
        assert "corrupt" in started.stdout and "hits=0/2" in started.stdout
        listed = [line for line in run("list").stdout.splitlines() if bucket in line]
        assert len(listed) == 1 and "rate=0.5" in listed[0] and "hits=0/2" in listed[0]
        bad = run("errors", "--max-hits", "0", "--bucket", bucket)
        assert bad.returncode != 0 and "--max-hits" in bad.stderr
    finally:
        assert run("clear", "--bucket", bucket).returncode == 0
    assert bucket not in run("list").stdout


# --- corrupt ---------------------------------------------------------------------------------


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_corrupt_s3_answers_wrong_etags_and_keeps_the_object(
    emulators: Emulators, faults: StoreFaults, store_name: str
) -> None:
    """corrupt with max_hits=1: the PUT is written whole but answered with a wrong (well
    formed) ETag, which HEAD shows too until the object is written again; the fault ends
    after that one write. CopyObject's XML ETag and the md5chksum metadata rclone sets on
    multipart uploads are made wrong as well; clearing the fault makes the reads right."""
    s3 = emulators[store_name]
    assert isinstance(s3, S3Emulator)
    client = s3.client()
    data = os.urandom(64 << 10)
    right = f'"{hashlib.md5(data).hexdigest()}"'
    b64 = base64.b64encode(_md5(data)).decode()
    with emulator_bucket(s3, "fxc") as (bucket, _):
        with faults.hold(store_name, "corrupt", bucket=bucket, max_hits=1) as fault:
            put = client.put_object(Bucket=bucket, Key="k", Body=data)
            assert put["ETag"] != right and re.fullmatch(r'"[0-9a-f]{32}"', put["ETag"])
            assert client.head_object(Bucket=bucket, Key="k")["ETag"] == put["ETag"]
            assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == data
            state = faults.state(store_name, fault)
            assert (state["hits"], state["ended"]) == (1, "hits")
            again = client.put_object(Bucket=bucket, Key="k", Body=data)  # the fault is over
            assert again["ETag"] == right
            assert client.head_object(Bucket=bucket, Key="k")["ETag"] == right
        with faults.hold(store_name, "corrupt", bucket=bucket, method="PUT") as fault:
            client.put_object(Bucket=bucket, Key="m", Body=data, Metadata={"md5chksum": b64})
            assert client.head_object(Bucket=bucket, Key="m")["Metadata"]["md5chksum"] != b64
            copy = client.copy_object(
                Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "k"}
            )
            wrong = copy["CopyObjectResult"]["ETag"]
            assert wrong != right and re.fullmatch(r'"[0-9a-f]{32}"', wrong)
            assert faults.state(store_name, fault)["hits"] == 2
        assert client.head_object(Bucket=bucket, Key="c")["ETag"] == right
        assert client.head_object(Bucket=bucket, Key="m")["Metadata"]["md5chksum"] == b64
        ops = [(e.key, e.op) for e in s3.events(bucket)]
        assert ops == [("k", "put"), ("k", "put"), ("m", "put"), ("c", "copy")]


@pytest.mark.gcp
def test_corrupt_gcs_answers_wrong_json_hashes_and_keeps_the_object(
    emulators: Emulators, faults: StoreFaults
) -> None:
    """GCS: a JSON upload (the object named in the query, or in the body of a multipart
    upload) is answered with wrong md5Hash and crc32c, and so is the object's metadata
    until it is deleted; the media itself is intact."""
    gcs = emulators["gcs"]
    auth = {"Authorization": f"Bearer {GcsEmulator.tokens[USER]}"}
    data = os.urandom(64 << 10)
    with emulator_bucket(gcs, "fxc") as (bucket, _):
        upload = f"{gcs.endpoint}/upload/storage/v1/b/{bucket}/o"
        meta = f"{gcs.endpoint}/storage/v1/b/{bucket}/o"

        def media(name: str) -> dict[str, Any]:
            resp = requests.post(
                upload, params={"uploadType": "media", "name": name}, data=data, headers=auth
            )
            assert resp.status_code == 200, resp.text
            return dict(resp.json())

        def multipart(name: str) -> dict[str, Any]:
            boundary = "fx-boundary"
            body = (
                (
                    f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
                    f"{json.dumps({'name': name})}\r\n--{boundary}\r\n"
                    "Content-Type: application/octet-stream\r\n\r\n"
                ).encode()
                + data
                + f"\r\n--{boundary}--\r\n".encode()
            )
            headers = {**auth, "Content-Type": f"multipart/related; boundary={boundary}"}
            resp = requests.post(
                upload, params={"uploadType": "multipart"}, data=body, headers=headers
            )
            assert resp.status_code == 200, resp.text
            return dict(resp.json())

        right = media("right")
        assert base64.b64decode(right["md5Hash"]) == _md5(data)
        hashes = [f for f in ("md5Hash", "crc32c") if f in right]
        with faults.hold("gcs", "corrupt", bucket=bucket, max_hits=2) as fault:
            answers = [media("a"), multipart("b")]
            state = faults.state("gcs", fault)
            assert (state["hits"], state["ended"]) == (2, "hits")
            for name, answer in zip("ab", answers, strict=True):
                assert answer["name"] == name
                for field in hashes:
                    assert answer[field] != right[field], (name, field)
                    wrong = base64.b64decode(answer[field])
                    assert len(wrong) == len(base64.b64decode(right[field]))
                shown = requests.get(f"{meta}/{name}", headers=auth, timeout=10).json()
                assert all(shown[f] == answer[f] for f in hashes), shown
                got = requests.get(f"{meta}/{name}", params={"alt": "media"}, headers=auth)
                assert got.content == data
            assert requests.delete(f"{meta}/b", headers=auth, timeout=10).ok
            again = multipart("b")  # the fault is over and the deletion ended the mark
            assert all(again[f] == right[f] for f in hashes)
            shown = requests.get(f"{meta}/b", headers=auth, timeout=10).json()
            assert all(shown[f] == right[f] for f in hashes)
        # the end of the block (the fault cleared) ends the marks it left
        shown = requests.get(f"{meta}/a", headers=auth, timeout=10).json()
        assert all(shown[f] == right[f] for f in hashes)


@pytest.mark.azure
def test_corrupt_azure_answers_wrong_content_md5_and_keeps_the_blob(
    emulators: Emulators, faults: StoreFaults
) -> None:
    """Azure: a Put Blob is answered with a wrong Content-MD5, and Get Blob Properties (what
    rclone reads after an upload) shows it too until the blob is written again; the blob
    itself is intact."""
    from azure.storage.blob import ContentSettings

    azure = emulators["azure"]
    data = os.urandom(64 << 10)
    with emulator_bucket(azure, "fxc") as (bucket, _):
        blob = azure.client(USER).get_container_client(bucket).get_blob_client("k")
        settings = ContentSettings(content_md5=bytearray(_md5(data)))
        with faults.hold("azure", "corrupt", bucket=bucket, max_hits=1) as fault:
            put = blob.upload_blob(data, overwrite=True, content_settings=settings)
            state = faults.state("azure", fault)
            assert (state["hits"], state["ended"]) == (1, "hits")
            if put.get("content_md5") is not None:
                assert bytes(put["content_md5"]) != _md5(data)
            shown = blob.get_blob_properties().content_settings.content_md5
            assert shown is not None and len(shown) == 16 and bytes(shown) != _md5(data)
            assert blob.download_blob().readall() == data
            blob.upload_blob(data, overwrite=True, content_settings=settings)
            assert bytes(blob.get_blob_properties().content_settings.content_md5) == _md5(data)


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_corrupt_rclone_deletes_the_upload_and_uploads_it_again(
    emulators: Emulators,
    faults: StoreFaults,
    rclone: RcloneRunner,
    tmp_path: Path,
    store_name: str,
) -> None:
    """rclone copyto through corrupt with max_hits=1: rclone finds the upload "corrupted on
    transfer", deletes it and uploads it again (the gate's events: put, delete, put); the
    object is intact at the end."""
    emulator = emulators[store_name]
    data = os.urandom(256 << 10)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    with emulator_bucket(emulator, "fxr") as (bucket, _):
        with faults.hold(store_name, "corrupt", bucket=bucket, max_hits=1) as fault:
            done = rclone(
                emulator,
                "copyto",
                str(src),
                f"remote:{bucket}/dir/obj.bin",
                "--retries",
                "3",
                bucket=bucket,
                timeout=180,
            )
            state = faults.state(store_name, fault)
        assert done.returncode == 0, done.stderr
        assert "corrupted on transfer" in done.stderr, done.stderr
        assert (state["hits"], state["ended"]) == (1, "hits")
        ops = [e.op for e in emulator.events(bucket) if e.key == "dir/obj.bin"]
        assert len(ops) == 3 and ops[1] == "delete" and ops[0] == ops[2] != "delete", ops
        assert emulator.read_object(bucket, "dir/obj.bin") == data
