"""The skypilot mount recipe end to end: a job on a node whose MOUNT_CACHED bucket SkyPilot's
own command mounted writes a file, and SkyPilot's flush script, run by the job's drain, returns
once it is in the store.

The verdicts are causes: the object the gate recorded and its content read from the store,
the flush script's own last line in the node's drain log, the binary and arguments of the
rclone process serving the mount point, and SkyPilot's rclone log for it. Skipped (with the
reason) when the SkyPilot venv cannot be installed here.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

from harness.recipes.skypilot import NODE_RCLONE
from harness.testing.buckets import SKY_MANAGED
from harness.testing.cloud_fixtures import use_recipe
from harness.testing.plugin import all_store_params
from skycore.backend.job_parts import JOBS_DIR

pytestmark = [pytest.mark.usefixtures("local_cloud"), pytest.mark.slow]

DST = "/ckpt"
FLUSHED = "skypilot: cached mount upload complete"


def node(cluster: Any, cmd: str) -> str:
    code, out = cluster.shell(cmd, timeout=120)
    assert code == 0, f"exit {code} on the node:\n{out}"
    return str(out)


def serving(cluster: Any) -> list[str]:
    """``<binary> <command line>`` of each rclone mount process serving DST on the node."""
    procs = node(
        cluster,
        "for p in $(pgrep -f '^[^ ]*rclone mount '); do "
        'echo "$(readlink /proc/$p/exe) $(tr "\\0" " " </proc/$p/cmdline)"; done',
    )
    return [ln for ln in procs.splitlines() if f" {DST} " in ln]


def mount_again(cluster: Any) -> None:
    """Run the recipe's mount of DST on the node again, as a start does."""
    from skycore import state
    from skycore.config import load_config
    from skycore.storage import recipes
    from skycore.storage.storage import Storage

    [spec] = [m.spec for m in state.get_cluster_mounts(cluster.name) if m.dst == DST]
    script = recipes.mount_script(Storage.from_mount_spec(spec), DST, load_config())
    node(cluster, str(script))


@pytest.mark.parametrize("store", [p for p in all_store_params() if p.values[0] == "s3"])
def test_skypilot_s_cached_mount_uploads_a_job_s_file_and_its_flush_returns(
    store: str,
    skycore_home: Any,
    bucket_factory: Any,
    cluster_factory: Any,
    upload_events: Any,
    record_property: Any,
) -> None:
    """A sky-managed bucket as MOUNT_CACHED with mount_recipe: skypilot: the run's file
    reaches the store whole, the job's drain is SkyPilot's flush (its last line in the
    drain log), the mount is SkyPilot's rclone 1.68.2 logging to ~/.sky/rclone_log, and
    mounting it again (as a start does) leaves it alone."""
    from harness.recipes import skypilot_venv

    try:
        skypilot_venv.ensure()
    except skypilot_venv.SkyPilotUnavailable as e:
        pytest.skip(str(e))
    use_recipe("skypilot")
    bucket = bucket_factory(store, SKY_MANAGED)
    cluster = cluster_factory("skypilot")
    content = f"written through the SkyPilot mount {uuid.uuid4().hex}"
    key = "out/job.txt"
    spec = {
        "name": "skypilot-recipe",
        "file_mounts": {DST: bucket.mount_entry("MOUNT_CACHED")},
        "run": f"mkdir -p {DST}/out && printf %s '{content}' > {DST}/{key}",
    }
    outcome = cluster.launch(spec)
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()

    assert key in [e.key for e in upload_events(bucket)], "the gate saw no write of the key"
    assert bucket.read(key).decode() == content

    drain_log = node(cluster, f"cat {JOBS_DIR}/{outcome.result.job_id}/run-0.drain.log")
    assert FLUSHED in drain_log, drain_log
    record_property("skypilot_flush", drain_log.strip().splitlines()[-1])

    [proc] = serving(cluster)
    exe, _, args = proc.partition(" ")
    assert exe == NODE_RCLONE
    assert node(cluster, f"{exe} version").splitlines()[0] == "rclone v1.68.2"
    assert f"rclone mount sky-s3-{bucket.name}:{bucket.name} {DST} " in args, args
    log = f"/root/.sky/rclone_log/{hashlib.md5(DST.encode()).hexdigest()}.log"
    assert f"--log-file {log} " in args, args
    assert f"{key}: vfs cache: upload succeeded" in node(cluster, f"cat {log}")

    mount_again(cluster)  # a live mount is left alone: SkyPilot's command is not run again
    assert serving(cluster) == [proc]
    assert "already mounted" not in node(cluster, f"cat {log}")
