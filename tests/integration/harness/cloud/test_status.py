"""``harness status`` on the running local cloud: ``--json`` lists every running emulator
with its recorded processes, the node containers on the engine and the faults active in
each gate; the plain output fits 100 columns (COLUMNS=100, and piped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from harness.cloud.store_faults import StoreFaults
from harness.emulators import fleet
from skycore.provision.docker_engine import LABEL_CLUSTER, LABEL_RANK
from tests.names import unique_name


def harness_status(*args: str, columns: str | None = None) -> str:
    """The stdout of ``harness status ARGS`` run as its own process, piped."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "status", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture
def faults() -> Iterator[StoreFaults]:
    """A StoreFaults whose faults are cleared after the test, pass or fail."""
    made = StoreFaults()
    try:
        yield made
    finally:
        made.clear_all()


@pytest.fixture
def labelled_node(local_cloud: Any) -> Iterator[tuple[str, str]]:
    """A node container of a cluster of its own (created from the node image, never
    started): (container name, cluster). Removed after the test."""
    cluster = unique_name("st")
    client = docker.DockerClient(base_url=local_cloud.docker_host, version="auto", timeout=60)
    container = client.containers.create(
        local_cloud.image,
        command=["true"],
        name=f"skycore-{cluster}-0",
        labels={LABEL_CLUSTER: cluster, LABEL_RANK: "0"},
    )
    try:
        yield f"skycore-{cluster}-0", cluster
    finally:
        container.remove(force=True)
        client.close()


def test_json_lists_every_running_emulator_and_the_nodes(
    local_cloud: Any, labelled_node: tuple[str, str]
) -> None:
    status = json.loads(harness_status("--json"))
    assert status["dockerd"]["running"] is True
    assert status["dockerd"]["host"] == local_cloud.docker_host
    assert status["image"] == {"tag": local_cloud.image, "present": True, "problem": None}
    rows = {e["store"]: e for e in status["emulators"]}
    assert set(rows) == set(fleet.stores())
    for store, row in rows.items():
        emulator = fleet.get(store)
        assert row["state"] == "running" and row["running"], row
        assert row["endpoint"] == emulator.endpoint and row["pid"] == emulator.record.pid
        assert row["gate_pid"] == emulator.record.gate_pid != row["pid"]
        assert row["implementation"] == emulator.implementation
    name, cluster = labelled_node
    assert {"name": name, "cluster": cluster, "rank": 0, "state": "created"} in status["nodes"]
    assert {f["store"] for f in status["faults"]} == set(rows)
    assert all(f["known"] for f in status["faults"]), status["faults"]


def test_an_injected_fault_appears_until_cleared(local_cloud: Any, faults: StoreFaults) -> None:
    """A fault in each gate, on a bucket of its own (no other test's requests are hit):
    ``--json`` and the plain output show it; once cleared, it is gone."""
    bucket = unique_name("sf")
    stores = list(fleet.stores())
    started = {s: faults.start(s, "errors", bucket=bucket, status=500) for s in stores}
    status = json.loads(harness_status("--json"))
    plain = harness_status()
    for entry in status["faults"]:
        fault = started[entry["store"]]
        (shown,) = [f for f in entry["active"] if f["bucket"] == bucket]
        assert (shown["id"], shown["kind"], shown["status"]) == (fault["id"], "errors", 500)
        assert shown["description"].startswith(f"#{fault['id']} errors status=500 bucket={bucket}")
        assert shown["description"] in plain
    for store, fault in started.items():
        faults.stop(store, fault)
    after = json.loads(harness_status("--json"))
    assert not [f for e in after["faults"] for f in e["active"] if f["bucket"] == bucket]


@pytest.mark.parametrize("columns", ["100", None], ids=["COLUMNS=100", "piped"])
def test_plain_output_fits_100_columns(
    local_cloud: Any, labelled_node: tuple[str, str], columns: str | None
) -> None:
    lines = harness_status(columns=columns).splitlines()
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    for store in fleet.stores():
        emulator = fleet.get(store)
        (row,) = [line for line in lines if f" {emulator.endpoint} " in line]
        assert row.split()[0] == store and " running " in row, row
        assert str(emulator.record.pid) in row.split(), row
    assert any(line.split()[:1] == [labelled_node[0]] for line in lines), lines
