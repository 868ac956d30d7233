"""A launch killed while it syncs file mounts never leaves a cluster that claims to be
healthy: it is INIT, exec refuses it, and the next launch repairs it; files written into a
bare mount point meanwhile are moved aside, never lost and never in the way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing.buckets import SKY_MANAGED
from harness.testing.plugin import selected_stores
from skycore import state
from tests.polling import wait_for

SKYCORE = [sys.executable, "-m", "skycore.cli"]


def sky(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SKYCORE, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def one_store(request: pytest.FixtureRequest) -> str:
    """The first selected store: the cluster state under test does not depend on it."""
    return selected_stores(request.config)[0]


def test_sigkill_during_file_mounts_leaves_init_and_relaunch_repairs(
    one_store: str, bucket_factory: Any, cluster_factory: Any, tmp_path: Path
) -> None:
    bucket = bucket_factory(one_store, SKY_MANAGED)
    cluster = cluster_factory("interrupt")
    spec = {
        "name": "interrupted",
        "file_mounts": {"/data": bucket.mount_entry("MOUNT_CACHED")},
        "run": "ls /data && echo run-ok",
    }
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(spec))
    output = tmp_path / "launch.out"
    with output.open("w") as out_file:
        proc = subprocess.Popen(
            [*SKYCORE, "launch", str(task), "-c", cluster.name, "-y"],
            stdout=out_file,
            stderr=subprocess.STDOUT,
        )
    try:
        # Kill it the moment the nodes are healthy and the syncing starts.
        def syncing() -> bool:
            assert proc.poll() is None, output.read_text()
            record = state.get_cluster(cluster.name)
            return record is not None and "not all in place" in record.status_reason

        wait_for("the launch to reach the file-mount sync", syncing, 240, poll=0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)

    # Never UP with mounts incomplete: INIT, and the reason says how to repair it.
    r = sky("status", "--json", cluster.name)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["status"] == "INIT", row
    assert "skycore launch" in row["status_reason"], row
    r = sky("exec", cluster.name, "touch /data/stray.txt")
    assert r.returncode == 2 and "skycore launch" in r.stderr, r.stdout + r.stderr

    # Something wrote into the bare mount point on the node's own disk meanwhile (if the
    # kill came after the mount, take the mount away first: the point is a bare folder).
    code, out = cluster.shell(
        "{ mountpoint -q /data && fusermount3 -uz /data; } ; mkdir -p /data && "
        "echo local > /data/x.txt"
    )
    assert code == 0, out

    # The next launch repairs it: UP, mounted, the job runs; the stray file is kept aside.
    outcome = cluster.launch(spec)
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    assert "run-ok" in outcome.run_log()
    assert cluster.status() == "UP"
    code, out = cluster.shell("mountpoint -q /data && echo MOUNTED")
    assert (code, out.strip()) == (0, "MOUNTED"), out
    code, kept = cluster.shell("cat /data.skycore-stray-*/x.txt")
    assert (code, kept.strip()) == (0, "local"), kept
    assert "x.txt" not in bucket.list_keys()


def test_killed_client_during_exec_the_job_still_succeeds_and_drains(
    one_store: str, bucket_factory: Any, cluster_factory: Any, tmp_path: Path
) -> None:
    """The cluster owns the job: SIGKILL of the terminal during EXEC changes nothing there.
    The job ends SUCCEEDED in 'skycore queue', its log is complete, and what it wrote to a
    MOUNT_CACHED mount is in the bucket (the node drained it before recording the end)."""
    bucket = bucket_factory(one_store, SKY_MANAGED)
    cluster = cluster_factory("killclient")
    spec = {"name": "up", "file_mounts": {"/data": bucket.mount_entry("MOUNT_CACHED")}}
    outcome = cluster.launch({**spec, "run": "echo up"})
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "run": "echo begin-42; for i in 1 2 3 4 5; do echo step-$i > /data/out-$i.txt; "
                "sleep 0.5; done; echo all-done",
            }
        )
    )

    def exec_and_kill_the_terminal(output: Path) -> None:
        with output.open("w") as out_file:
            proc = subprocess.Popen(
                [*SKYCORE, "exec", cluster.name, str(job)],
                stdout=out_file,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for("the job to start", lambda: "begin-42" in output.read_text(), 120, poll=0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)

    def queue_row(job_id: int) -> dict[str, Any]:
        r = sky("queue", cluster.name, "--json")
        (row,) = [j for j in json.loads(r.stdout) if j["job_id"] == job_id]
        return row

    exec_and_kill_the_terminal(tmp_path / "exec.out")
    r = sky("logs", cluster.name, "2")  # follows the nodes' log to the end
    assert r.returncode == 0, r.stdout + r.stderr
    assert "begin-42" in r.stdout and "all-done" in r.stdout, r.stdout
    row = queue_row(2)
    assert (row["status"], row["exit_code"]) == ("SUCCEEDED", 0), row
    # Again, but this time the job ends before anyone follows it: 'skycore queue' finds it
    # ended on the nodes, and 'skycore logs' still prints all of it, although the dead
    # terminal's copy of the log stopped at 'begin-42'.
    exec_and_kill_the_terminal(tmp_path / "exec-3.out")
    wait_for("job 3 to end", lambda: queue_row(3)["status"] == "SUCCEEDED", 120, poll=0.02)
    r = sky("logs", cluster.name, "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "begin-42" in r.stdout and "all-done" in r.stdout, r.stdout
    keys = bucket.list_keys()
    assert all(f"out-{i}.txt" in keys for i in range(1, 6)), keys
    assert bucket.read("out-5.txt").strip() == b"step-5"
