"""What the fault scenarios share (tests/smoke/test_faults.py, test_faults_managed_jobs.py,
test_fault_lifecycle.py): a cluster with a bucket mounted MOUNT_CACHED, a shell on its head
node that shows the node's mounts when a command fails, a writer of numbered files, the
gate's upload events of a prefix, the order check, and the record of a scenario for the
matrix report's "faults" section.
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from harness.emulators import fleet as emulators
from harness.testing import timed_writes as writes_program
from harness.testing.buckets import SKY_MANAGED, TestBucket
from harness.testing.order_check import assert_all_visible, assert_visible_prefix
from harness.testing.report_collector import FAULTS_PROPERTY
from harness.testing.side_by_side import ScenarioKit

MIB = 1 << 20
N_FILES = 8
HELD_S = 300.0  # hang guard of a wait for what a fault does (it takes seconds)


class OrderLost(AssertionError):
    """Files reached the store in another order than they were created."""


WRITER = """python3 - <<'PY'
import os, time
for i in range({n}):
    with open(f"/ckpt/{prefix}/k{{i}}.bin", "wb") as f:
        f.write(os.urandom({size}))
    time.sleep(0.05)
print("wrote", {n})
PY"""


@dataclass(frozen=True)
class Written:
    """One file written by harness.testing.timed_writes: seconds its create took, seconds
    writing its data and closing it took, and the data's sha256."""

    path: str
    create_s: float
    write_s: float
    sha256: str


class Lines(io.StringIO):
    """A console's output, line by line, each with the monotonic time it was printed; read
    it from another thread while a command prints."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        now = time.monotonic()
        with self._lock:
            self.lines.extend((now, line) for line in s.splitlines() if line.strip())
        return len(s)

    def snapshot(self) -> list[tuple[float, str]]:
        """The lines so far."""
        with self._lock:
            return list(self.lines)

    def text(self) -> str:
        return "\n".join(line for _, line in self.snapshot())


def console(out: Lines) -> Console:
    """A plain console printing into ``out`` (what the CLI prints when piped)."""
    return Console(file=out, width=400, force_terminal=False)


def keys(prefix: str, n: int = N_FILES) -> list[str]:
    return [f"{prefix}/k{i}.bin" for i in range(n)]


def launched(kit: ScenarioKit, file_mounts: dict[str, Any], name: str = "faults") -> Any:
    """A new cluster of the scenario's, launched with ``file_mounts`` (its job: ``true``)."""
    cluster = kit.cluster_factory(name)
    outcome = cluster.launch({"name": name, "file_mounts": file_mounts, "run": "true"})
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    return cluster


def cached_cluster(store: str, kit: ScenarioKit, folder: str) -> tuple[Any, Any]:
    """A cluster with the scenario's bucket mounted MOUNT_CACHED (ordered) at /ckpt, and the
    directory /ckpt/FOLDER made on it before any fault (:func:`make_dir`)."""
    bucket = kit.bucket_factory(store, SKY_MANAGED)
    cluster = launched(kit, {"/ckpt": bucket.mount_entry("MOUNT_CACHED")})
    make_dir(cluster, f"/ckpt/{folder}")
    return bucket, cluster


NODE_DIAGNOSIS = (
    "echo '--- mounts:'; grep fuse /proc/self/mountinfo; echo '--- rclone processes:'; "
    "ps -o pid,rss,etime,args -C rclone; "
    "for log in /var/lib/skycore/mounts/rcd-*/refresher.log "
    "/var/lib/skycore/mounts/rcd-*/rclone.log; do "
    'echo "--- last lines of $log:"; tail -n 40 "$log"; done'
)


def shell(cluster: Any, cmd: str, timeout: float = 300) -> str:
    """Run ``cmd`` on the cluster's head node; on failure the assertion also shows the node's
    mounts, its rclone processes and the end of each rclone daemon's log."""
    code, out = cluster.shell(cmd, timeout=timeout)
    if code != 0:
        _, diagnosis = cluster.shell(NODE_DIAGNOSIS, timeout=60)
        raise AssertionError(f"exit {code} on the node:\n{out}\n{diagnosis}")
    return str(out)


def write_files(cluster: Any, prefix: str, mkdir: bool = False) -> None:
    """Create /ckpt/PREFIX/k0..k7 (1 MiB each), one after the other, on the node (the
    directory exists already: see :func:`make_dir`; ``mkdir``: the same command makes sure
    of it again first)."""
    writer = WRITER.format(n=N_FILES, prefix=prefix, size=MIB)
    shell(cluster, f"mkdir -p /ckpt/{prefix} && {writer}" if mkdir else writer)


def timed_writes(cluster: Any, paths: list[str], size: int) -> list[Written]:
    """Write ``size`` random bytes to each of ``paths``, one right after the other in one
    command on the node (harness.testing.timed_writes)."""
    out = shell(cluster, writes_program.command(paths, size))
    found = writes_program.parse(out)
    assert [p for p, *_ in found] == paths, out
    return [Written(*row) for row in found]


def make_dir(cluster: Any, path: str) -> None:
    """Make a directory on the mount before a fault: a mkdir lists the directory in the
    store, which an outage would hold (files created in it later only go to the cache)."""
    shell(cluster, f"mkdir -p {path} && ls {path}")


def uploads(bucket: TestBucket, prefix: str) -> list[Any]:
    """The gate's write events of the prefix, oldest first (no deletes)."""
    return [e for e in bucket.events() if e.key.startswith(prefix + "/") and e.op != "delete"]


def wait_durable(bucket: TestBucket, wanted: list[str], timeout: float) -> float:
    """Wait until every key in ``wanted`` was written to the store; the wall time then (for
    the report only)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {e.key for e in bucket.events() if e.op != "delete"}
        if set(wanted) <= seen:
            return time.time()
        if time.monotonic() > deadline:
            missing = sorted(set(wanted) - seen)
            raise AssertionError(f"not durable after {timeout:.0f} s: {missing}")
        time.sleep(0.25)


def report(
    kit: ScenarioKit,
    scenario: str,
    bucket: TestBucket,
    prefix: str,
    expected: list[str],
    started: float,
    durable_at: float | None,
) -> tuple[list[str], list[str]]:
    """Record the scenario (on its bucket's store) for the matrix report; (keys lost, keys
    in upload order)."""
    events = uploads(bucket, prefix)
    order = list(dict.fromkeys(e.key for e in events))
    listed = set(bucket.list_keys())
    lost = [k for k in expected if k not in listed]
    spans: dict[int, dict[str, Any]] = {}
    for entry in emulators.get(bucket.store).fault_log(bucket.name):
        if entry["bucket"] != bucket.name or entry["t_ns"] / 1e9 < started - 1:
            continue
        span = spans.setdefault(entry["id"], {"kind": entry["kind"]})
        span[entry["phase"]] = entry["t_ns"] / 1e9 - started
    kit.record_property(
        FAULTS_PROPERTY,
        json.dumps(
            {
                "store": bucket.store,
                "scenario": scenario,
                "lost": len(lost),
                "order_kept": (order == expected) if expected else None,
                "durable_s": None if durable_at is None else round(durable_at - started, 2),
                "faults": list(spans.values()),
                "uploads": [[e.t_ns / 1e9 - started, e.key, e.size] for e in events],
                "created": expected,
            }
        ),
    )
    return lost, order


def check_order(bucket: TestBucket, prefix: str, expected: list[str]) -> None:
    """At every moment of the gate's write events under ``prefix`` (deletes included), the
    keys visible were the oldest of ``expected``, and at the end all of them were."""
    events = [e for e in bucket.events() if e.key.startswith(prefix + "/")]
    assert_visible_prefix(events, expected, prefix + "/", error=OrderLost)
    assert_all_visible(events, expected, prefix + "/", error=OrderLost)
