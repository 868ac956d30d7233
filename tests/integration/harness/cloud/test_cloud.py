"""The local cloud as a whole: up is idempotent, status tells the truth, down stops only
what up started."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from harness import emulator_registry as registry
from harness.cloud import bringup, cloud
from harness.emulators import fleet as emulators
from harness.processes import Proc


def test_second_up_is_a_no_op(local_cloud) -> None:
    before = {s: (e.record.pid, e.record.gate_pid) for s, e in emulators.start_all().items()}
    said: list[str] = []
    info = cloud.up(say=said.append)
    after = {s: (e.record.pid, e.record.gate_pid) for s, e in emulators.start_all().items()}
    assert after == before  # the same processes, nothing restarted
    assert not [line for line in said if "seeded" in line or "Starting" in line], said
    assert info.image == local_cloud.image and info.docker_host == local_cloud.docker_host


def test_cli_up_prints_one_timed_line_per_step(local_cloud) -> None:
    """Each step of ``harness up`` ends with one line: the time since up started, the step,
    its result and its own duration."""
    up = subprocess.run(
        [sys.executable, "-m", "harness.cli", "up"], capture_output=True, text=True, timeout=300
    )
    assert up.returncode == 0, up.stdout + up.stderr
    lines = up.stdout.splitlines()
    for step in bringup.plan(bringup.Bringup(registry.store_names(), True, cloud.seed_world)):
        timed = rf"\[ *\d+\.\d s\] {re.escape(step.name)}: .+ \(\d+\.\d s\)"
        assert len([line for line in lines if re.fullmatch(timed, line)]) == 1, (step, lines)
    assert "Local cloud is up" in up.stdout


def test_status_lists_every_component(local_cloud) -> None:
    from harness.cloud import status as cloud_status

    found = cloud_status.collect()
    assert found.dockerd.running and found.image.present and found.config_present
    assert found.image.tag == local_cloud.image
    assert [e.store for e in found.emulators] == list(registry.store_names())
    for row in found.emulators:
        record = emulators.get(row.store).record  # the gate's and the emulator's own pids
        assert row.running and (row.gate_pid, row.pid) == (record.gate_pid, record.pid)
        assert row.gate_pid != row.pid
        assert row.implementation == registry.get_emulator_class(row.store).implementation


def test_cli_status_and_env(local_cloud) -> None:
    harness = [sys.executable, "-m", "harness.cli"]
    status = subprocess.run([*harness, "status"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    for word in ("dockerd", "node image", *registry.store_names()):
        assert word in status.stdout
    env = subprocess.run([*harness, "env"], capture_output=True, text=True, timeout=60)
    assert f"export DOCKER_HOST={local_cloud.docker_host}" in env.stdout


def test_world_is_seeded(local_cloud) -> None:
    assert set(cloud.public_datasets()) == set(registry.store_names())
    for store, name in cloud.public_datasets().items():
        emu = emulators.get(store)
        assert emu.bucket_exists(name, "other"), (store, name)
        assert emu.bucket_owner(name) in ("other", None)  # or the other account itself
        assert "README.txt" in emu.list_keys(name, None)  # public: anonymous read
        for bucket, owner, public in cloud.demo_buckets(store):
            assert emu.bucket_exists(bucket, owner), (store, bucket)
            if owner != "other":
                assert emu.bucket_owner(bucket) == owner
                assert "existing.txt" in emu.list_keys(bucket, owner)
                if public:
                    assert "existing.txt" in emu.list_keys(bucket, None)


def test_config_has_a_section_per_store(local_cloud) -> None:
    from skycore.config import load_config
    from skycore.stores import get_store_class

    config = load_config()
    for store in registry.store_names():
        section = config.section(get_store_class(store).config_section)
        assert section is not None, store
        assert section == emulators.get(store).config_section()


def test_down_stops_only_what_up_started(local_cloud, tmp_path: Path, monkeypatch) -> None:
    shared = [p for e in emulators.start_all().values() for p in e.procs]
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "harness"))
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "skycore"))
    info = cloud.up(say=lambda _m: None, stores=("s3",), with_docker=False)
    assert (tmp_path / "skycore" / "config.yaml").exists()
    emu = emulators.get("s3")
    procs = emu.procs
    assert all(p.alive() for p in procs)
    assert info.endpoints["s3"] == emu.endpoint
    cloud.down(say=lambda _m: None)
    assert not any(Proc(p.pid, p.start_time).alive() for p in procs)
    assert all(p.alive() for p in shared)  # the shared local cloud is untouched


def test_down_of_one_store_stops_only_its_emulator_and_gate(
    local_cloud, tmp_path: Path, monkeypatch
) -> None:
    """``harness down --store s3`` in a harness home that runs s3 and gcs stops s3's
    emulator and gate; gcs, the shared local cloud and the engine keep running."""
    shared = [p for e in emulators.start_all().values() for p in e.procs]
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "harness"))
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "skycore"))
    cloud.up(say=lambda _m: None, stores=("s3", "gcs"), with_docker=False)
    s3, gcs = (emulators.get(store).procs for store in ("s3", "gcs"))
    harness = [sys.executable, "-m", "harness.cli"]
    down = subprocess.run(
        [*harness, "down", "--store", "s3"], capture_output=True, text=True, timeout=120
    )
    assert down.returncode == 0, down.stdout + down.stderr
    assert "s3: emulator and gate stopped." in down.stdout, down.stdout
    assert not any(Proc(p.pid, p.start_time).alive() for p in s3)
    assert all(p.alive() for p in gcs)
    again = subprocess.run(
        [*harness, "down", "--store", "s3"], capture_output=True, text=True, timeout=120
    )
    assert "s3: emulator and gate not running (nothing to stop)." in again.stdout, again.stdout
    cloud.down(say=lambda _m: None)
    assert not any(Proc(p.pid, p.start_time).alive() for p in gcs)
    assert all(p.alive() for p in shared)  # the shared local cloud is untouched
