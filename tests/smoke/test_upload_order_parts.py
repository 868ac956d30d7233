"""An ordered MOUNT_CACHED mount (one file at a time) sends a big file in several streams at
once and a small file as one request (skycore.storage.upload_tuning).

The node writes a 24 MiB file, then small ones, on an ordered mount whose bucket is behind
the gate's ``stream-bandwidth`` fault (each request's body paced on its own, as a long-RTT
stream is): the fault's stream records say which requests carried each file and when. The
verdicts are causes: the big file's part requests overlap, it completed as a multipart
upload (S3, R2) or a committed block list (Azure), each small file is one request, and the
files reached the store in creation order. GCS uploads a file in one stream whatever its
size (rclone's GCS backend has no multi-part upload): its case checks exactly that.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from harness.cloud.store_faults import StoreFaults
from harness.testing.buckets import SKY_MANAGED
from harness.testing.order_check import DELETE_OPS, assert_visible_prefix

MIB = 1 << 20
BIG = 24 * MIB  # 5 parts of S3's 5 MiB, 6 blocks of Azure's 4 MiB
SMALL = [64 * 1024, 1024, 300 * 1024]
STREAM_MIBPS = 16  # a 5 MiB part takes ~0.3 s: parts sent one after another cannot overlap
PREFIX = "parts/"
pytestmark = [pytest.mark.requires_capability("records_events"), pytest.mark.slow]

WRITER = """python3 - <<'PY'
import os
for i, size in enumerate({sizes}):
    with open(f"/ckpt/parts/file-{{i}}.bin", "wb") as f:
        f.write(os.urandom(size))
PY"""

BIG_FILE_OP = {"s3": "multipart", "r2": "multipart", "azure": "commit", "gcs": "resumable"}
"""The gate's event for a completed big file: parts (S3, R2), blocks (Azure), or GCS's one
resumable upload."""

SMALL_FILE_WRITES = {"s3": 1, "r2": 1, "gcs": 1, "azure": 2}
"""Requests with a body per small file: one PUT (S3, R2), one upload (GCS); on Azure a block
and its block list (AzureBlobStore.cached_upload_config says why)."""


def writes_of(streams: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The paced requests that sent a body naming ``key`` (in the path, or GCS's ``name=``)."""
    names = (key, quote(key, safe=""))
    return [s for s in sends(streams) if any(n in s["path"] for n in names)]


def sends(streams: list[dict[str, Any]], least: int = 1) -> list[dict[str, Any]]:
    """The paced requests that sent a body of ``least`` bytes or more."""
    return [s for s in streams if s["method"] in ("PUT", "POST") and s["request_bytes"] >= least]


def most_at_once(streams: list[dict[str, Any]]) -> int:
    """The most of ``streams`` that were open at the same moment."""
    edges = sorted(
        [(s["started_s"], 1) for s in streams] + [(s["ended_s"], -1) for s in streams],
        key=lambda e: (e[0], e[1]),
    )
    now = best = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def test_an_ordered_big_file_goes_up_in_several_streams(
    store: str, bucket_factory: Any, cluster_factory: Any
) -> None:
    bucket = bucket_factory(store, SKY_MANAGED)
    cluster = cluster_factory("parts")
    sizes = [BIG, *SMALL]
    spec = {
        "name": "upload-parts",
        "file_mounts": {"/ckpt": bucket.mount_entry("MOUNT_CACHED")},
        "setup": "mkdir -p /ckpt/parts",
        "run": WRITER.format(sizes=sizes),
    }
    faults = StoreFaults()
    with faults.hold(store, "stream-bandwidth", bucket=bucket.name, mibps=STREAM_MIBPS) as fault:
        outcome = cluster.launch(spec)
        streams = faults.state(store, fault)["streams"]
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()

    keys = [f"{PREFIX}file-{i}.bin" for i in range(len(sizes))]
    events = [e for e in bucket.events() if e.key.startswith(PREFIX)]
    assert_visible_prefix(events, keys, PREFIX)
    ops = {e.key: e.op for e in events if e.op not in DELETE_OPS}
    assert ops[keys[0]] == BIG_FILE_OP[store], ops

    big = sends(streams, least=MIB)  # only the big file has bodies this big (GCS's chunks
    # name its upload, not its key)
    assert sum(s["request_bytes"] for s in big) >= BIG, big
    if store == "gcs":
        assert most_at_once(big) == 1, big  # one resumable upload, its chunks in sequence
    else:
        assert len(big) >= 2 and most_at_once(big) >= 2, big
    for key in keys[1:]:
        assert len(writes_of(streams, key)) == SMALL_FILE_WRITES[store], (key, streams)
