"""The pipeline with storage on the local cloud: COPY / MOUNT / MOUNT_CACHED on every node,
stop/start keeps the mounts, down deletes persistent: false storage. Real emulators, real
FUSE mounts inside real containers."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from skycore import core, execution, provision, state
from skycore.config import SkycoreConfig
from skycore.errors import ClusterError, StageError, StorageError
from skycore.storage import catalog, make_store
from skycore.task import Task
from tests.integration.helpers import quiet, task_maker
from tests.names import unique_name

pytestmark = pytest.mark.aws


@pytest.fixture
def run_id() -> str:
    return unique_name("r", 8)


@pytest.fixture(autouse=True)
def down_and_delete_storage(cluster: str, config: SkycoreConfig, run_id: str) -> Iterator[None]:
    """After the test, before ``cluster`` removes what is left: drain, unmount and take the
    cluster down, then delete the buckets the test made."""
    yield
    name = cluster
    if state.get_cluster(name) is not None:
        try:
            execution.down(name, console=quiet(), config=config)
        except Exception:
            provision.terminate_instances("docker", name, config)
            state.remove_cluster(name, "test teardown")
    for rec in state.list_storage():
        if rec.sky_managed and run_id in rec.name:
            st = make_store(rec.store, rec.name, config)
            if st.exists():
                st.delete()
            state.remove_storage(rec.name)


@pytest.fixture
def make_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Task]:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "seed.txt").write_text("seeded\n")

    return task_maker(tmp_path)


def keys(config: SkycoreConfig, bucket: str) -> list[str]:
    return sorted(make_store("s3", bucket, config).list_keys())


def storage_mounts(run_id: str, persistent: bool = True) -> dict[str, Any]:
    return {
        "/copy": {
            "name": f"tps-copy-{run_id}",
            "source": "src",
            "store": "s3",
            "mode": "COPY",
            "persistent": persistent,
        },
        "/mount": {
            "name": f"tps-mount-{run_id}",
            "source": "src",
            "store": "s3",
            "mode": "MOUNT",
            "persistent": persistent,
        },
        "/cached": {
            "name": f"tps-cached-{run_id}",
            "source": "src",
            "store": "s3",
            "mode": "MOUNT_CACHED",
        },
    }


def test_storage_on_every_node_and_setup_reads_it(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    task = make_task(
        num_nodes=2,
        file_mounts=storage_mounts(run_id),
        setup="cat /copy/seed.txt /mount/seed.txt /cached/seed.txt > ~/setup-saw.txt",
        run=(
            "set -e\ncat ~/setup-saw.txt\n"
            "echo from-$SKYPILOT_NODE_RANK > /cached/out-$SKYPILOT_NODE_RANK.txt\n"
            "echo direct-$SKYPILOT_NODE_RANK > /mount/direct-$SKYPILOT_NODE_RANK.txt\n"
            "if mountpoint -q /copy; then echo copy-is-a-mount; else echo copy-is-a-snapshot; fi\n"
        ),
    )
    result = execution.launch(task, cluster, console=quiet(), config=config, stream=False)
    assert result.exit_code == 0, (result.log_dir / "file_mounts.log").read_text()
    for rank in range(2):
        run = (result.log_dir / f"run-{rank}.log").read_text()
        assert run.startswith("seeded\nseeded\nseeded\n")
        assert "copy-is-a-snapshot" in run
    # The job is done only after the cached mount is drained: the files are in the bucket.
    assert {"out-0.txt", "out-1.txt", "seed.txt"} <= set(keys(config, f"tps-cached-{run_id}"))
    assert {"direct-0.txt", "direct-1.txt"} <= set(keys(config, f"tps-mount-{run_id}"))
    mounts = {m.dst: m.mode for m in state.get_cluster_mounts(cluster)}
    assert mounts == {"/copy": "COPY", "/mount": "MOUNT", "/cached": "MOUNT_CACHED"}


def test_stop_start_keeps_mounts_and_drains_before_stop(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    task = make_task(file_mounts=storage_mounts(run_id), run="true")
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0
    # Written outside any job, right before stop: stop must drain it into the bucket.
    write = (
        "set -e; for i in 1 2 3; do head -c 3000000 /dev/urandom > /cached/late-$i.bin; done; "
        "echo m > /mount/late-m.txt"
    )
    node = provision.get_command_runners(
        "docker", provision.get_cluster_info("docker", cluster, config), config
    )[0]
    assert node.run(write) == 0
    execution.stop(cluster, console=quiet(), config=config)
    assert {"late-1.bin", "late-2.bin", "late-3.bin"} <= set(keys(config, f"tps-cached-{run_id}"))
    assert "late-m.txt" in keys(config, f"tps-mount-{run_id}")
    execution.start(cluster, console=quiet(), config=config)
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_UP
    check = make_task(
        run="mountpoint -q /mount && mountpoint -q /cached && ls /cached /mount | sort -u"
    )
    res = execution.exec_task(check, cluster, console=quiet(), config=config, stream=False)
    assert res.exit_code == 0
    listing = (res.log_dir / "run-0.log").read_text()
    assert "late-2.bin" in listing and "late-m.txt" in listing and "seed.txt" in listing


def test_down_deletes_only_ephemeral_storage(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    task = make_task(file_mounts=storage_mounts(run_id, persistent=False), run="true")
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0
    execution.down(cluster, console=quiet(), config=config)
    assert provision.query_instances("docker", cluster, config) == {}
    names = {r.name for r in state.list_storage()}
    assert f"tps-copy-{run_id}" not in names
    assert f"tps-mount-{run_id}" not in names
    assert not make_store("s3", f"tps-copy-{run_id}", config).exists()
    # persistent (the default) survives down
    assert f"tps-cached-{run_id}" in names
    assert make_store("s3", f"tps-cached-{run_id}", config).exists()


def test_down_with_storage_gone_or_shared_still_forgets_the_cluster(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    gone, shared = f"tps-gone-{run_id}", f"tps-shared-{run_id}"
    mounts = {
        "/gone": {"name": gone, "store": "s3", "mode": "MOUNT", "persistent": False},
        "/shared": {"name": shared, "store": "s3", "mode": "MOUNT", "persistent": False},
    }
    task = make_task(file_mounts=mounts, run="true")
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0
    # Another cluster's recorded mounts use the same persistent: false bucket.
    other = f"tps-other-{run_id}"
    state.set_cluster_mounts(other, [state.MountRecord(other, "/s", shared, "MOUNT", False)])
    try:
        with pytest.raises(catalog.StorageInUse, match=other):
            catalog.delete_storage(shared, config)  # 'storage delete' refuses too
        state.remove_storage(gone)  # the record is already gone (e.g. an older 'storage delete')
        res = execution.down(cluster, console=quiet(), config=config)
        assert state.get_cluster(cluster) is None
        assert res.note is not None and f"kept storage {shared}" in res.note
        assert make_store("s3", shared, config).exists()
        assert state.get_storage(shared) is not None
    finally:
        state.set_cluster_mounts(other, [])
    assert "Deleted" in catalog.delete_storage(shared, config)  # unused now
    assert catalog.delete_storage(gone, config, missing_ok=True).endswith("already deleted.")
    st = make_store("s3", gone, config)
    if st.exists():
        st.delete()


def test_stop_or_down_failing_after_unmount_leaves_the_cluster_init(
    cluster: str,
    config: SkycoreConfig,
    run_id: str,
    make_task: Callable[..., Task],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = make_task(
        file_mounts={"/m": {"name": f"tps-m-{run_id}", "store": "s3", "mode": "MOUNT"}},
        run="true",
    )
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0

    def refuse(*_a: object, **_k: object) -> None:
        raise RuntimeError("the engine went away")  # not even a ProvisionError

    for op, patched in (
        (execution.stop, "stop_instances"),
        (execution.down, "terminate_instances"),
    ):
        with monkeypatch.context() as m:
            m.setattr(provision, patched, refuse)
            with pytest.raises(RuntimeError):
                op(cluster, console=quiet(), config=config)
        rec = state.get_cluster(cluster)
        assert rec is not None and rec.status == state.CLUSTER_INIT
        reasons = [e.reason for e in state.cluster_events(cluster)]
        assert core.MOUNTS_REMOVED in reasons
        # No exec writes into the plain local folder where the mount was.
        with pytest.raises(ClusterError, match="INIT"):
            execution.exec_task(make_task(run="echo x > /m/leak"), cluster, console=quiet())
        # launch repairs it (mounts again) before the next round.
        assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0


def test_job_whose_final_drain_fails_ends_failed(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    task = make_task(
        file_mounts={"/c": {"name": f"tps-c-{run_id}", "store": "s3", "mode": "MOUNT_CACHED"}},
        run="true",
    )
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0
    # The job kills rclone: the drain after it cannot reach it and fails.
    out = Console(file=io.StringIO(), width=200)
    with pytest.raises(StageError):
        execution.exec_task(
            make_task(run="pkill -9 -x rclone; true"), cluster, console=out, config=config
        )
    job = state.get_job(cluster, 2)
    assert job is not None and job.status == state.JOB_FAILED
    drain_log = Path(job.log_dir) / "drain.log"
    assert "drain failed; uploads may be pending" in drain_log.read_text()
    # It says what happened and what repairs it: the daemon is gone, a relaunch re-mounts.
    assert "the rclone daemon serving them is gone" in drain_log.read_text()
    assert "'skycore launch'" in drain_log.read_text()
    # The drain's own output reached the reporter as a progress line.
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "not answering" in text
    # A later refresh cannot turn it into anything else.
    assert not state.set_job_status(cluster, 2, state.JOB_FAILED_DRIVER)
    # What the message promises: the relaunch re-mounts the dead mount and its job drains.
    again = execution.launch(task, cluster, console=quiet(), config=config)
    assert again.exit_code == 0 and again.job_status == state.JOB_SUCCEEDED


def test_down_forgets_the_cluster_even_if_deleting_its_storage_fails(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    bucket = f"tps-eph-{run_id}"
    task = make_task(
        file_mounts={"/e": {"name": bucket, "store": "s3", "mode": "MOUNT", "persistent": False}},
        run="true",
    )
    assert execution.launch(task, cluster, console=quiet(), config=config).exit_code == 0
    # down with unknown S3 credentials: the nodes go, the bucket deletion is refused (403).
    bad = config.model_copy(deep=True)
    assert bad.aws is not None
    bad.aws.access_key_id = "AKIASKYCOREUNKNOWN99"
    with pytest.raises(StageError, match=f"skycore storage delete {bucket}"):
        execution.down(cluster, console=quiet(), config=bad)
    assert state.get_cluster(cluster) is None
    assert provision.query_instances("docker", cluster, config) == {}
    assert state.get_storage(bucket) is not None  # still known: 'storage delete' can finish it
    assert "Deleted" in catalog.delete_storage(bucket, config)


def test_plain_bucket_urls_are_copied_through_the_node_daemon(
    cluster: str,
    config: SkycoreConfig,
    run_id: str,
    make_task: Callable[..., Task],
    emulators: dict[str, Any],
) -> None:
    """file_mounts with bucket URLs: an object lands as a file, a prefix as a folder, another
    owner's public bucket is read anonymously; the copies leave no rclone of their own and
    the daemon that made them quits when it serves no mount. A missing bucket fails the
    stage naming the entry."""
    s3 = emulators["s3"]
    mine, theirs = f"tps-url-{run_id}", f"tps-pub-{run_id}"
    mine_url = s3.make_bucket(
        mine, owner="user", public=False, objects={"one.txt": b"one\n", "dir/a.txt": b"a\n"}
    )
    theirs_url = s3.make_bucket(theirs, owner="other", public=True, objects={"p/b.txt": b"b\n"})
    try:
        task = make_task(
            file_mounts={
                "/data/one.txt": f"{mine_url}/one.txt",
                "/data/dir": f"{mine_url}/dir",
                "/pub": f"{theirs_url}/p",
            },
            run="cat /data/one.txt /data/dir/a.txt /pub/b.txt; pgrep -c -x rclone || true",
        )
        result = execution.launch(task, cluster, console=quiet(), config=config, stream=False)
        assert result.exit_code == 0, (result.log_dir / "file_mounts.log").read_text()
        run = (result.log_dir / "run-0.log").read_text().splitlines()
        assert run == ["one", "a", "b", "0"]
        missing = make_task(file_mounts={"/gone": f"s3://tps-missing-{run_id}/x"}, run="true")
        with pytest.raises(StageError, match=r"copy s3://tps-missing-.* -> /gone"):
            execution.launch(missing, cluster, console=quiet(), config=config, stream=False)
    finally:
        s3.delete_bucket(mine)
        s3.delete_bucket(theirs)


def test_a_bucket_source_that_does_not_exist_is_refused_before_anything_is_made(
    cluster: str, config: SkycoreConfig, run_id: str, make_task: Callable[..., Task]
) -> None:
    """Bad input changes nothing: no node, no cluster record, and the sky-managed bucket of
    the same task is not created."""
    missing = f"s3://tps-missing-{run_id}"
    mounts = {**storage_mounts(run_id), "/missing": {"source": missing, "mode": "MOUNT"}}
    task = make_task(file_mounts=mounts, run="echo never")
    with pytest.raises(StorageError, match=f"file_mounts./missing: the source {missing}"):
        execution.launch(task, cluster, console=quiet(), config=config, stream=False)
    assert state.get_cluster(cluster) is None
    assert provision.query_instances("docker", cluster, config) == {}
    for entry in ("copy", "mount", "cached"):
        name = f"tps-{entry}-{run_id}"
        assert state.get_storage(name) is None and not make_store("s3", name, config).exists()
