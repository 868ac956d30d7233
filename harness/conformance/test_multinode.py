"""Three nodes share a MOUNT bucket: each writes a rank-named file; every node sees all."""

from __future__ import annotations

import time

from harness.conformance.contract_kept import emulator_contract_kept  # noqa: F401 (autouse)
from harness.conformance.helpers import mounted_buckets

RUN = (
    'echo "rank=$SKYPILOT_NODE_RANK num=$SKYPILOT_NUM_NODES '
    'ips=$(echo $SKYPILOT_NODE_IPS | tr " " ",") task=$SKYPILOT_TASK_ID"\n'
    'echo "hello from $SKYPILOT_NODE_RANK" > /shared/rank-$SKYPILOT_NODE_RANK.txt\n'
    "cat /data/copy/seed/hello.txt"
)


def test_three_nodes_share_a_mount(store, bucket_factory, cluster_factory) -> None:
    buckets, mounts = mounted_buckets(
        bucket_factory, store, {"/shared": "MOUNT", "/data/copy": "COPY"}
    )
    shared = buckets["/shared"]
    cluster = cluster_factory("multi")
    spec = {"name": "multinode", "num_nodes": 3, "file_mounts": mounts, "run": RUN}
    outcome = cluster.launch(spec)
    assert outcome.exit_code == 0, outcome.output

    logs = [outcome.run_log(rank) for rank in range(3)]
    task_ids = set()
    for rank, log in enumerate(logs):
        assert f"rank={rank} num=3" in log, log
        assert "seeded into" in log  # the COPY snapshot is on every node
        ips = log.split("ips=")[1].split()[0]
        assert len(set(ips.split(","))) == 3, ips  # newline-separated, one per node
        task_ids.add(log.split("task=")[1].split()[0])
    assert len(task_ids) == 1  # one task id for the whole job

    expected = {f"rank-{r}.txt" for r in range(3)}
    assert expected <= set(shared.list_keys())
    for rank in range(3):
        _wait_for_listing(cluster, rank, expected)


def _wait_for_listing(cluster, rank: int, expected: set[str], timeout: float = 20) -> None:
    """The mount's directory cache refreshes within seconds: poll until all files show."""
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < deadline:
        code, out = cluster.shell("ls /shared", rank=rank)
        seen = set(out.split())
        if code == 0 and expected <= seen:
            return
        time.sleep(1)
    raise AssertionError(f"node {rank} sees {sorted(seen)}, expected {sorted(expected)}")
