"""The emulators as processes (start, reuse, stop, failures), their write-event logs, the
config they hand to skycore, and rclone through each gate."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests

from harness import emulator_registry as registry
from harness.accounts import OTHER, USER
from harness.emulators.azure import ACCOUNTS as AZURE_ACCOUNTS
from harness.emulators.azure import AzureEmulator, npm_dir
from harness.emulators.base import CAPABILITIES, state_file
from harness.emulators.fleet import (
    EmulatorError,
    RunningEmulator,
    start_all,
    status_all,
    stop_all,
)
from harness.emulators.gcs import GcsEmulator
from harness.emulators.s3 import S3Emulator
from harness.processes import Proc, free_port
from skycore.stores import get_store_class
from tests.integration.helpers import emulator_bucket
from tests.polling import wait_for

ALL = [
    pytest.param(store, marks=getattr(pytest.mark, cls.marker()), id=store)
    for store, cls in registry.emulator_classes().items()
]
S3_LIKE = [
    pytest.param(store, marks=getattr(pytest.mark, cls.marker()), id=store)
    for store, cls in registry.emulator_classes().items()
    if issubclass(cls, S3Emulator)
]
MiB = 1 << 20


# --- the registry ----------------------------------------------------------------------


def test_every_store_has_an_emulator_and_the_same_name() -> None:
    classes = registry.emulator_classes()
    assert {"s3", "gcs", "azure", "r2"} <= set(classes)
    for store, cls in classes.items():
        assert cls.store == store
        assert get_store_class(store).store_name == store  # the same name in skycore
        assert cls.public_dataset
        for capability in CAPABILITIES:
            assert isinstance(cls.supports(capability), bool)
    markers = [cls.marker() for cls in classes.values()]
    assert len(set(markers)) == len(markers)


def test_unknown_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(registry.UnknownEmulatorError) as info:
        registry.get_emulator_class("nosuchstore")
    message = str(info.value)
    assert "nosuchstore" in message
    for store in registry.store_names():
        assert store in message
    with pytest.raises(EmulatorError, match="nosuchstore"):
        start_all(tmp_path, stores=("nosuchstore",))
    with pytest.raises(ValueError, match="no_such_capability"):
        S3Emulator.supports("no_such_capability")


# --- config and buckets ----------------------------------------------------------------


@pytest.mark.parametrize("store_name", ALL)
def test_config_section_reaches_the_gate_as_user(
    emulators: dict[str, RunningEmulator], store_name: str
) -> None:
    emulator = emulators[store_name]
    section = emulator.config_section()
    assert isinstance(section, get_store_class(store_name).config_model)
    if isinstance(emulator, S3Emulator):
        assert section.endpoint_url == emulator.endpoint
        assert section.access_key_id == emulator.keys[USER].access_key_id
        assert section.region == emulator.region
    elif isinstance(emulator, GcsEmulator):
        assert section.api_endpoint == emulator.endpoint
        assert section.access_token == emulator.tokens[USER]
    else:
        assert isinstance(emulator, AzureEmulator)
        assert section.account_name == AZURE_ACCOUNTS[USER].name
        assert section.blob_endpoint("skyother") == f"{emulator.endpoint}/skyother"
    assert emulator.endpoint.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("store_name", ALL)
def test_make_and_delete_bucket(
    emulators: dict[str, RunningEmulator], unique_name: Callable[[str], str], store_name: str
) -> None:
    emulator = emulators[store_name]
    name = unique_name("eb")
    url = emulator.make_bucket(name, owner=OTHER, public=True, objects={"a/b.txt": b"ab"})
    expected = {
        "s3": f"s3://{name}",
        "gcs": f"gs://{name}",
        "azure": f"azure://skyother/{name}",
        "r2": f"r2://{name}",
    }
    assert url == expected.get(store_name, emulator.bucket_url(name, OTHER))
    assert url == emulator.bucket_url(name, OTHER)
    scheme = url.split("://", 1)[0]
    assert scheme in get_store_class(store_name).schemes  # a URL skycore parses
    assert emulator.bucket_owner(name) == OTHER
    assert emulator.bucket_exists(name, OTHER)
    assert emulator.list_keys(name, OTHER) == ["a/b.txt"]
    assert emulator.read_object(name, "a/b.txt", None) == b"ab"  # public: anonymous read
    assert [(e.key, e.size) for e in emulator.events(name)] == [("a/b.txt", 2)]
    emulator.delete_bucket(name)
    emulator.delete_bucket(name)  # deleting a missing bucket is not an error
    assert not emulator.bucket_exists(name, OTHER)


# --- the event log ---------------------------------------------------------------------


@pytest.mark.parametrize("store_name", ALL)
def test_sequential_writes_are_logged_in_order(
    emulators: dict[str, RunningEmulator], store_name: str
) -> None:
    emulator = emulators[store_name]
    with emulator_bucket(emulator, "ev") as (bucket, _):
        written = [(f"dir/file-{i:02d}.bin", 100 + 37 * i) for i in range(20)]
        for key, size in written:
            emulator.write_object(bucket, key, os.urandom(size))
        events = emulator.events(bucket)
        assert [(e.key, e.size) for e in events] == written
        assert {e.op for e in events} == {"put"}
        stamps = [e.t_ns for e in events]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


@pytest.mark.parametrize("store_name", S3_LIKE)
def test_s3_multipart_upload_is_one_event(
    emulators: dict[str, RunningEmulator],
    tmp_path: Path,
    store_name: str,
) -> None:
    from boto3.s3.transfer import TransferConfig

    s3 = emulators[store_name]
    with emulator_bucket(s3, "mp") as (bucket, _):
        src = tmp_path / "big.bin"
        src.write_bytes(os.urandom(20 * MiB))
        config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
        s3.client(USER).upload_file(str(src), bucket, "big.bin", Config=config)
        events = s3.events(bucket)
        assert [(e.key, e.size, e.op) for e in events] == [("big.bin", 20 * MiB, "multipart")]


@pytest.mark.gcp
def test_gcs_resumable_upload_is_one_event(emulators: dict[str, RunningEmulator]) -> None:
    gcs = emulators["gcs"]
    with emulator_bucket(gcs, "ru") as (bucket, _):
        data = os.urandom(20 * MiB)
        blob = gcs.client(USER).bucket(bucket).blob("big.bin", chunk_size=4 * MiB)
        blob.upload_from_string(data)
        events = gcs.events(bucket)
        assert [(e.key, e.size, e.op) for e in events] == [("big.bin", 20 * MiB, "resumable")]
        assert gcs.client(USER).bucket(bucket).blob("big.bin").download_as_bytes() == data


@pytest.mark.gcp
def test_gcs_rclone_chunked_upload_is_one_event(
    emulators: dict[str, RunningEmulator],
    tmp_path: Path,
    rclone: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """rclone uploads a big object as resumable chunks (each a POST with upload_id): the
    object is one write event, recorded when the last chunk completes, with its size."""
    gcs = emulators["gcs"]
    with emulator_bucket(gcs, "rc") as (bucket, _):
        data = os.urandom(20 * MiB)
        src = tmp_path / "big.bin"
        src.write_bytes(data)
        before = time.time_ns()
        done = rclone(
            gcs, "copyto", str(src), f"remote:{bucket}/big.bin", bucket=bucket, timeout=300
        )
        assert done.returncode == 0, done.stderr
        after = time.time_ns()
        events = gcs.events(bucket)
        assert [(e.key, e.size, e.op) for e in events] == [("big.bin", 20 * MiB, "resumable")]
        assert before < events[0].t_ns <= after
        assert gcs.read_object(bucket, "big.bin") == data


@pytest.mark.azure
def test_deleting_an_azure_container_drops_its_gate_row(
    emulators: dict[str, RunningEmulator], unique_name: Callable[[str], str]
) -> None:
    azure = emulators["azure"]
    bucket = unique_name("dr")
    azure.make_bucket(bucket, public=True)
    assert azure.bucket_owner(bucket) == USER
    azure.client(USER).delete_container(bucket)  # straight through the SDK, as skycore does
    assert azure.bucket_owner(bucket) is None


@pytest.mark.azure
def test_azure_block_upload_is_one_event(emulators: dict[str, RunningEmulator]) -> None:
    azure = emulators["azure"]
    assert isinstance(azure, AzureEmulator)
    with emulator_bucket(azure, "bl") as (bucket, _):
        from azure.storage.blob import BlobServiceClient

        user = AZURE_ACCOUNTS[USER]
        service = BlobServiceClient(  # small limits force staged blocks and one commit
            azure.account_url(user.name),
            credential={"account_name": user.name, "account_key": user.key},
            max_single_put_size=4 * MiB,
            max_block_size=4 * MiB,
        )
        service.get_container_client(bucket).upload_blob("big.bin", os.urandom(10 * MiB))
        events = azure.events(bucket)
        assert [(e.key, e.size, e.op) for e in events] == [("big.bin", 10 * MiB, "commit")]


@pytest.mark.parametrize("store_name", ALL)
def test_deletes_are_logged(emulators: dict[str, RunningEmulator], store_name: str) -> None:
    emulator = emulators[store_name]
    with emulator_bucket(emulator, "dl", objects={"gone.txt": b"bye"}) as (bucket, _):
        emulator.delete_object(bucket, "gone.txt")
        assert [(e.key, e.op) for e in emulator.events(bucket)] == [
            ("gone.txt", "put"),
            ("gone.txt", "delete"),
        ]


# --- rclone through the gates ----------------------------------------------------------


@pytest.mark.parametrize("store_name", ALL)
def test_rclone_through_the_gate(
    emulators: dict[str, RunningEmulator],
    rclone: Callable[..., Any],
    tmp_path: Path,
    store_name: str,
) -> None:
    emulator = emulators[store_name]
    public = {"owner": OTHER, "public": True, "objects": {"pub.txt": b"public\n"}}
    with (
        emulator_bucket(emulator, "rc") as (mine, _),
        emulator_bucket(emulator, "rcpub", **public) as (theirs, _),
    ):
        src = tmp_path / "src"
        (src / "sub").mkdir(parents=True)
        (src / "one.txt").write_bytes(b"one\n")
        (src / "sub" / "two.bin").write_bytes(os.urandom(3 * MiB))

        listed = rclone(emulator, "lsd", "remote:")
        assert listed.returncode == 0, listed.stderr
        assert mine in listed.stdout
        copied = rclone(emulator, "copy", str(src), f"remote:{mine}/data")
        assert copied.returncode == 0, copied.stderr
        tree = rclone(emulator, "ls", f"remote:{mine}")
        assert "data/one.txt" in tree.stdout and "data/sub/two.bin" in tree.stdout
        assert rclone(emulator, "cat", f"remote:{mine}/data/one.txt").stdout == "one\n"
        assert {e.key for e in emulator.events(mine)} == {"data/one.txt", "data/sub/two.bin"}

        # The other account's public bucket: readable, never writable, and refused promptly.
        # (The remote is made for that bucket: some stores keep it under its owner's account.)
        where = {"bucket": theirs}
        read = rclone(emulator, "cat", f"remote:{theirs}/pub.txt", **where)
        assert read.returncode == 0 and read.stdout == "public\n", read.stderr
        started = time.monotonic()
        write = rclone(emulator, "copy", str(src), f"remote:{theirs}/planted", **where)
        elapsed = time.monotonic() - started
        assert write.returncode != 0
        refusals = ("403", "AuthorizationFailure", "ResourceNotFound")
        assert any(r in write.stderr for r in refusals), write.stderr
        assert elapsed < 10, f"denied write took {elapsed:.1f} s"
        # Anonymous: the public bucket lists and reads, and refuses writes.
        anon = {"owner": None, **where}
        listed = rclone(emulator, "lsf", f"remote:{theirs}", **anon)
        assert listed.returncode == 0 and listed.stdout.split() == ["pub.txt"], listed.stderr
        assert rclone(emulator, "cat", f"remote:{theirs}/pub.txt", **anon).stdout == "public\n"
        anon_write = rclone(emulator, "copyto", str(src / "one.txt"), f"remote:{theirs}/x", **anon)
        assert anon_write.returncode != 0
        assert [e.key for e in emulator.events(theirs)] == ["pub.txt"]  # nothing was written


# --- processes -------------------------------------------------------------------------

REUSE_GUARD_S = 10.0  # a second start_all that reuses the processes (0.03-0.45 s measured)


def test_second_start_reuses_the_processes_quickly(
    emulators: dict[str, RunningEmulator],
) -> None:
    stores = tuple(emulators)
    started = time.monotonic()
    again = start_all(stores=stores)
    took = time.monotonic() - started
    # Reused: the same processes (a restart would start new ones). Quickly: a hang guard
    # (a reuse takes 0.03-0.45 s, a restart seconds).
    assert {s: e.procs for s, e in again.items()} == {s: e.procs for s, e in emulators.items()}
    assert took < REUSE_GUARD_S, f"second start_all took {took:.2f} s"
    status = status_all()
    for store in stores:
        assert status[store]["running"] is True
        assert status[store]["endpoint"] == emulators[store].endpoint
        assert Path(status[store]["log"]).exists()


@pytest.mark.slow
def test_start_reuse_restart_stop_in_a_fresh_home(
    emulators: dict[str, RunningEmulator], tmp_path: Path
) -> None:
    home = tmp_path / "harness"
    shared_npm = npm_dir(Path(os.environ.get("HARNESS_HOME", "~/.skycore-harness")).expanduser())
    if (shared_npm / "node_modules").exists():  # reuse the installed Azurite, not reinstall
        home.mkdir()
        npm_dir(home).symlink_to(shared_npm)
    stores = tuple(emulators)  # the selected stores
    try:
        first = start_all(home, stores=stores)
        second_started = time.monotonic()
        second = start_all(home, stores=stores)
        took = time.monotonic() - second_started
        # reused, as in test_second_start_reuses_the_processes_quickly
        assert {s: e.procs for s, e in second.items()} == {s: e.procs for s, e in first.items()}
        assert took < REUSE_GUARD_S, took
        # A dead emulator is restarted (on the same ports), the others are left alone.
        victim = stores[0]
        dead, _ = first[victim].procs
        os.kill(dead.pid, 9)
        _wait_gone(dead)
        third = start_all(home, stores=stores)
        assert third[victim].procs[0] != dead
        assert third[victim].endpoint == first[victim].endpoint
        for store in stores[1:]:
            assert third[store].procs == first[store].procs
    finally:
        stopped = stop_all(home)
    assert sorted(stopped) == sorted(stores)
    for emulator in (*first.values(), third[victim]):
        for proc in emulator.procs:
            assert not proc.alive(), f"{emulator.store} process {proc.pid} survived stop_all"
    assert not any((home / "emulators").glob("*.json")) or all(
        p.name.endswith("-gate-state.json") for p in (home / "emulators").glob("*.json")
    )
    assert all(not st["running"] for st in status_all(home).values())


def _wait_gone(proc: Proc) -> None:
    wait_for(f"process {proc.pid} to die", lambda: not proc.alive(), timeout=5, poll=0.05)


@pytest.mark.gcp
@pytest.mark.cloud  # starts emulator processes of its own
def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(EmulatorError, match=rf"port {port} .*already in use"):
            GcsEmulator.launch(tmp_path, ports=(port, free_port()))
    assert not (tmp_path / "emulators" / "gcs.json").exists()


class _DiesAtStart(GcsEmulator):
    """An emulator whose process exits at once, as a broken install would."""

    startup_timeout: ClassVar[float] = 10.0

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        return ["sh", "-c", "echo 'fatal: cannot open the data store' >&2; exit 3"], {}


@pytest.mark.gcp
@pytest.mark.cloud  # starts emulator processes of its own
def test_process_exiting_early_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmulatorError) as info:
        _DiesAtStart.launch(tmp_path)
    message = str(info.value)
    assert "exited during startup (exit code 3)" in message
    assert "fatal: cannot open the data store" in message  # the log's last lines
    assert str(tmp_path / "logs" / "gcs.log") in message
    assert not (tmp_path / "emulators" / "gcs.json").exists()


def _peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM:")))


@pytest.mark.slow
@pytest.mark.parametrize("store_name", S3_LIKE)
def test_gate_streams_large_uploads(
    emulators: dict[str, RunningEmulator],
    store_name: str,
) -> None:
    """A 64 MiB PUT through the gate arrives whole while the gate's peak memory grows by
    far less than the body: it streams, it does not buffer. (Its speed against moto's is a
    benchmark, bench/gate_throughput.py: a timing ratio here failed CI on a busy machine.)"""
    s3 = emulators[store_name]
    assert isinstance(s3, S3Emulator)
    with emulator_bucket(s3, "tp") as (bucket, _):
        data = os.urandom(64 * MiB)
        gate_pid = s3.procs[1].pid
        Path(f"/proc/{gate_pid}/clear_refs").write_text("5")  # peak RSS := current RSS
        before = _peak_rss_kib(gate_pid)
        s3.client(USER).put_object(Bucket=bucket, Key="big.bin", Body=data)
        grown_mib = (_peak_rss_kib(gate_pid) - before) / 1024
        print(f"gate peak RSS growth {grown_mib:.1f} MiB")
        got = s3.client(USER).get_object(Bucket=bucket, Key="big.bin")["Body"].read()
        assert got == data
        # Measured: ~10 MiB (aiohttp's buffers and the request's bookkeeping); a gate that holds
        # the body would grow by at least its 64 MiB.
        assert grown_mib < 32, f"the gate's peak RSS grew by {grown_mib:.1f} MiB for a 64 MiB PUT"


@pytest.mark.gcp
@pytest.mark.cloud  # starts emulator processes of its own
def test_gate_health_reports_a_dead_emulator(tmp_path: Path) -> None:
    emulator = GcsEmulator.launch(tmp_path)
    try:
        health = requests.get(f"{emulator.endpoint}/__gate__/health", timeout=10)
        assert health.status_code == 200 and health.json()["ok"] is True
        upstream, gate = emulator.procs
        os.kill(upstream.pid, 9)
        _wait_gone(upstream)
        health = requests.get(f"{emulator.endpoint}/__gate__/health", timeout=10)
        assert health.status_code == 503 and "does not answer" in health.json()["error"]
        assert not emulator.healthy() and gate.alive()
    finally:
        emulator.stop()
    assert not any(p.alive() for p in emulator.procs)


@pytest.mark.gcp
@pytest.mark.cloud  # starts emulator processes of its own
def test_a_dead_or_outdated_gate_is_restarted_alone(tmp_path: Path) -> None:
    """The emulator (and its buckets) survive; the gate reloads bucket ownership from its
    state file."""
    from google.api_core.exceptions import Forbidden

    try:
        first = start_all(tmp_path, stores=("gcs",))["gcs"]
        first.make_bucket("kept-bucket", owner=OTHER, public=False, objects={"k": b"v"})
        upstream, gate = first.procs
        os.kill(gate.pid, 9)
        _wait_gone(gate)
        second = start_all(tmp_path, stores=("gcs",))["gcs"]
        assert second.procs[0] == upstream and second.procs[1] != gate
        assert second.endpoint == first.endpoint
        assert second.bucket_owner("kept-bucket") == OTHER
        with pytest.raises(Forbidden):  # the reloaded ownership is enforced
            second.client(USER).bucket("kept-bucket").blob("k").download_as_bytes()
        assert second.client(OTHER).bucket("kept-bucket").blob("k").download_as_bytes() == b"v"

        path = state_file(tmp_path, "gcs")
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "gate_version": "older-code"}))
        third = start_all(tmp_path, stores=("gcs",))["gcs"]
        assert third.procs[0] == upstream and third.procs[1] != second.procs[1]
        assert third.bucket_owner("kept-bucket") == OTHER
    finally:
        stop_all(tmp_path)


@pytest.mark.gcp
@pytest.mark.cloud  # starts emulator processes of its own
def test_concurrent_starts_share_one_emulator(tmp_path: Path) -> None:
    """Several processes starting at once (pytest-xdist workers) end up with one emulator."""
    script = (
        "import sys\nfrom pathlib import Path\nfrom harness.emulators.fleet import start_all\n"
        "e = start_all(Path(sys.argv[1]), stores=('gcs',))['gcs']\n"
        "print(e.record.pid, e.record.gate_pid, e.endpoint)\n"
    )
    try:
        starters = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        outputs = {p.communicate(timeout=120)[0].strip() for p in starters}
        assert all(p.returncode == 0 for p in starters)
        assert len(outputs) == 1, outputs
    finally:
        stop_all(tmp_path)


# --- capabilities ----------------------------------------------------------------------

CAPABILITY_CONFTEST = """
from harness import emulator_registry as registry
from harness.emulators.gcs import GcsEmulator


class NoEventsEmulator(GcsEmulator):
    store = "noevents"
    cli_alias = None
    records_events = False


registry.add_emulator(NoEventsEmulator)
"""

CAPABILITY_TESTS = """
import pytest


@pytest.mark.requires_capability("records_events")
def test_needs_events(store):
    assert store != "noevents", "ran on an emulator without the capability"
"""


def test_a_missing_capability_skips_with_the_reason(tmp_path: Path) -> None:
    """A test that needs a capability is skipped, with the reason shown, on an emulator that
    lacks it, and runs on the others; it never passes there silently."""
    (tmp_path / "conftest.py").write_text(CAPABILITY_CONFTEST)
    (tmp_path / "test_capability.py").write_text(CAPABILITY_TESTS)
    argv = [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist"]
    result = subprocess.run(
        [*argv, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "lacks capability 'records_events'" in out
    assert f"{len(registry.store_names())} passed, 1 skipped" in out, out


def test_events_of_an_emulator_without_the_capability_is_an_error(tmp_path: Path) -> None:
    class NoEvents(GcsEmulator):
        records_events = False

    record = json.loads(json.dumps({"store": "gcs", "port": 1, "pid": 1, "start_time": 0}))
    emulator = NoEvents.__new__(NoEvents)
    emulator.home, emulator.record = tmp_path, record
    with pytest.raises(EmulatorError, match="does not record write events"):
        emulator.events("any-bucket")
