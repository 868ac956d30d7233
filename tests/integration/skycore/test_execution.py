"""The staged pipeline on real docker nodes (no storage: see test_execution_storage.py)."""

from __future__ import annotations

import io
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from skycore import core, execution, provision, state
from skycore.config import SkycoreConfig
from skycore.errors import ClusterError, StageError
from skycore.execution import Stage
from skycore.provision import NodeStatus
from skycore.provision import docker as dprov
from skycore.task import Task
from tests.integration.helpers import quiet, task_maker
from tests.names import unique_name


@pytest.fixture
def make_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Task]:
    """Write a task YAML (with a workdir and a data file next to it) and load it."""
    monkeypatch.chdir(tmp_path)  # relative paths in a task resolve against the cwd
    (tmp_path / "wd").mkdir(exist_ok=True)
    (tmp_path / "wd" / "hello.txt").write_text("hello from workdir\n")
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "config.txt").write_text("mounted-config\n")
    (tmp_path / "data" / "sub").mkdir(exist_ok=True)
    (tmp_path / "data" / "sub" / "a.txt").write_text("a\n")

    return task_maker(tmp_path)


def text_of(console: Console) -> str:
    f = console.file
    assert isinstance(f, io.StringIO)
    return f.getvalue()


RUN_REPORT = textwrap.dedent(
    """\
    echo "rank=$SKYPILOT_NODE_RANK num=$SKYPILOT_NUM_NODES host=$(hostname) foo=$FOO"
    echo "ips=$(echo $SKYPILOT_NODE_IPS | tr ' ' ,)"
    echo "task=$SKYPILOT_TASK_ID"
    echo "pwd=$(pwd)"
    cat hello.txt
    """
)


def test_single_node_launch(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(
        name="single", workdir="wd", envs={"FOO": "bar"}, setup="echo setup-ran", run=RUN_REPORT
    )
    console = quiet()
    result = execution.launch(task, cluster, console=console, config=docker_config, stream=False)
    assert result.exit_code == 0
    assert result.job_status == state.JOB_SUCCEEDED
    assert [s.stage for s in result.stages] == [
        Stage.PROVISION,
        Stage.SYNC_WORKDIR,
        Stage.SYNC_FILE_MOUNTS,
        Stage.SETUP,
        Stage.EXEC,
    ]
    out = text_of(console)
    for stage in ("PROVISION", "SYNC_WORKDIR", "SYNC_FILE_MOUNTS", "SETUP", "EXEC"):
        assert any(stage in line and "s " in line for line in out.splitlines()), out
    logs = result.log_dir
    for name in ("provision.log", "workdir_sync.log", "setup-0.log", "run-0.log"):
        assert (logs / name).exists(), name
    assert (logs / "setup-0.log").read_text() == "setup-ran\n"
    run = (logs / "run-0.log").read_text()
    assert f"rank=0 num=1 host={cluster}-0 foo=bar" in run
    assert "pwd=/root/sky_workdir" in run
    assert "hello from workdir" in run
    assert f"_{cluster}_1" in run  # SKYPILOT_TASK_ID names the cluster and job
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_UP
    events = state.cluster_events(cluster)
    assert [(e.from_status, e.to_status) for e in events[:2]] == [(None, "INIT"), ("INIT", "UP")]
    assert all(e.reason for e in events)


def test_three_nodes_workdir_file_mounts_and_env_everywhere(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(
        num_nodes=3,
        workdir="wd",
        envs={"FOO": "baz"},
        file_mounts={"/etc/app/config.txt": "data/config.txt", "~/datadir": "data"},
        # setup reads a file mount
        setup="cp /etc/app/config.txt ~/setup-saw.txt",
        run=RUN_REPORT + "cat ~/setup-saw.txt ~/datadir/sub/a.txt\n",
    )
    result = execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    assert result.exit_code == 0, result
    info = provision.get_cluster_info("docker", cluster, docker_config)
    ips = ",".join(info.ips)
    for rank in range(3):
        run = (result.log_dir / f"run-{rank}.log").read_text()
        assert f"rank={rank} num=3 host={cluster}-{rank} foo=baz" in run
        assert f"ips={ips}" in run
        assert "hello from workdir" in run
        assert "mounted-config\na\n" in run
    task_ids = {
        line
        for rank in range(3)
        for line in (result.log_dir / f"run-{rank}.log").read_text().splitlines()
        if line.startswith("task=")
    }
    assert len(task_ids) == 1  # the same task id on every node


def test_output_streams_with_node_prefixes(
    cluster: str,
    docker_config: SkycoreConfig,
    make_task: Callable[..., Task],
    capsys: pytest.CaptureFixture[str],
) -> None:
    task = make_task(num_nodes=2, run="echo streamed-$SKYPILOT_NODE_RANK")
    execution.launch(task, cluster, console=quiet(), config=docker_config)
    out = capsys.readouterr().out
    assert "(head, rank=0) streamed-0" in out
    assert "(worker1, rank=1) streamed-1" in out


def test_setup_failure_keeps_cluster_up_then_exec_works(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    bad = make_task(setup="echo about-to-fail; exit 3", run="echo never")
    console = quiet()
    result = execution.launch(bad, cluster, console=console, config=docker_config, stream=False)
    assert result.exit_code == 100
    assert result.job_status == state.JOB_FAILED_SETUP
    assert Stage.EXEC not in [s.stage for s in result.stages]
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_UP
    job = state.get_job(cluster, result.job_id or 0)
    assert job is not None and job.status == state.JOB_FAILED_SETUP and job.exit_code == 3
    out = text_of(console)
    assert "about-to-fail" in out  # the tail of the failed log is shown
    assert str(result.log_dir / "setup-0.log") in out
    fixed = make_task(run="echo exec-works")
    again = execution.exec_task(fixed, cluster, console=quiet(), config=docker_config, stream=False)
    assert again.exit_code == 0
    assert (again.log_dir / "run-0.log").read_text() == "exec-works\n"
    assert [s.stage for s in again.stages] == [Stage.SYNC_WORKDIR, Stage.EXEC]


def test_failed_run_is_exit_100_with_log_tail(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    console = quiet()
    task = make_task(run="echo last-words; exit 9")
    result = execution.launch(task, cluster, console=console, config=docker_config, stream=False)
    assert result.exit_code == 100
    assert result.job_status == state.JOB_FAILED
    assert "last-words" in text_of(console)
    job = state.get_job(cluster, result.job_id or 0)
    assert job is not None and job.exit_code == 9


def test_relaunch_skips_provision_and_resyncs_only_changed_files(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task], tmp_path: Path
) -> None:
    for i in range(20):
        (tmp_path / "wd" / f"file{i}.txt").write_text(f"{i}\n")
    task = make_task(workdir="wd", run="cat file7.txt")
    first = execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    assert first.exit_code == 0
    ids = [
        n.instance_id for n in provision.get_cluster_info("docker", cluster, docker_config).nodes
    ]
    (tmp_path / "wd" / "file7.txt").write_text("seven, changed\n")
    console = quiet()
    second = execution.launch(task, cluster, console=console, config=docker_config, stream=False)
    assert second.exit_code == 0
    prov = next(s for s in second.stages if s.stage is Stage.PROVISION)
    assert prov.skipped and "provisioning skipped" in prov.note
    assert "provisioning skipped" in text_of(console)
    assert [
        n.instance_id for n in provision.get_cluster_info("docker", cluster, docker_config).nodes
    ] == (ids)
    sync_log = (second.log_dir / "workdir_sync.log").read_text()
    assert "Number of regular files transferred: 1" in sync_log
    assert (second.log_dir / "run-0.log").read_text() == "seven, changed\n"
    assert [s.stage for s in second.stages][1:] == [
        Stage.SYNC_WORKDIR,
        Stage.SYNC_FILE_MOUNTS,
        Stage.SETUP,
        Stage.EXEC,
    ]


def test_relaunch_with_different_resources_is_a_clear_error(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    execution.launch(make_task(run="true"), cluster, console=quiet(), config=docker_config)
    with pytest.raises(ClusterError) as exc:
        execution.launch(
            make_task(num_nodes=2, run="true"), cluster, console=quiet(), config=docker_config
        )
    msg = exc.value.message
    assert "num_nodes=1" in msg and "num_nodes=2" in msg and cluster in msg
    assert exc.value.exit_code == 2


def test_exec_on_stopped_or_missing_cluster_says_what_to_run(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(run="true")
    with pytest.raises(ClusterError, match="does not exist"):
        execution.exec_task(task, cluster, console=quiet(), config=docker_config)
    execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    execution.stop(cluster, console=quiet(), config=docker_config)
    assert set(provision.query_instances("docker", cluster, docker_config).values()) == {
        NodeStatus.STOPPED
    }
    with pytest.raises(ClusterError, match=f"skycore start {cluster}"):
        execution.exec_task(task, cluster, console=quiet(), config=docker_config)
    execution.start(cluster, console=quiet(), config=docker_config)
    res = execution.exec_task(task, cluster, console=quiet(), config=docker_config, stream=False)
    assert res.exit_code == 0


def test_node_that_fails_to_start_leaves_init_and_next_launch_repairs(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    client = dprov.client(docker_config)
    blocker = client.containers.create(
        docker_config.docker.image, ["true"], name=dprov.container_name(cluster, 1)
    )
    task = make_task(num_nodes=2, run="echo ok")
    try:
        with pytest.raises(StageError, match="node 1"):
            execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
        rec = state.get_cluster(cluster)
        assert rec is not None and rec.status == state.CLUSTER_INIT
        assert "node 1" in rec.status_reason
        with pytest.raises(ClusterError, match="repair"):
            execution.exec_task(task, cluster, console=quiet(), config=docker_config)
    finally:
        blocker.remove(force=True)
    result = execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    assert result.exit_code == 0
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_UP
    assert set(provision.query_instances("docker", cluster, docker_config).values()) == {
        NodeStatus.UP
    }


def test_relaunch_repairs_a_gone_node(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(num_nodes=2, run="hostname")
    execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    dprov.client(docker_config).containers.get(dprov.container_name(cluster, 1)).remove(force=True)
    with pytest.raises(ClusterError, match="not healthy"):
        execution.exec_task(task, cluster, console=quiet(), config=docker_config)
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_INIT
    result = execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    prov = next(s for s in result.stages if s.stage is Stage.PROVISION)
    assert not prov.skipped
    assert (result.log_dir / "run-1.log").read_text().strip() == f"{cluster}-1"


def test_down_removes_nodes_and_record(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    execution.launch(
        make_task(num_nodes=2, run="true"), cluster, console=quiet(), config=docker_config
    )
    execution.down(cluster, console=quiet(), config=docker_config)
    assert provision.query_instances("docker", cluster, docker_config) == {}
    assert state.get_cluster(cluster) is None
    assert state.cluster_events(cluster)[-1].to_status == state.CLUSTER_TERMINATED
    with pytest.raises(ClusterError, match="does not exist"):
        execution.down(cluster, console=quiet(), config=docker_config)


def test_launch_with_down_flag(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    result = execution.launch(
        make_task(run="echo bye"), cluster, down=True, console=quiet(), config=docker_config
    )
    assert result.exit_code == 0
    assert result.stages[-1].stage is Stage.DOWN
    assert provision.query_instances("docker", cluster, docker_config) == {}
    assert state.get_cluster(cluster) is None


def test_refresh_marks_a_cluster_with_a_gone_node_init(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    execution.launch(
        make_task(num_nodes=2, run="true"), cluster, console=quiet(), config=docker_config
    )
    dprov.client(docker_config).containers.get(dprov.container_name(cluster, 1)).remove(force=True)
    rec = core.refresh_status(cluster, docker_config)
    assert rec is not None and rec.status == state.CLUSTER_INIT
    assert "node 1 is gone" in rec.status_reason
    assert state.cluster_events(cluster)[-1].to_status == state.CLUSTER_INIT


def test_launch_on_a_stopped_cluster_resumes_it(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(num_nodes=2, run="cat ~/marker 2>/dev/null || echo first > ~/marker")
    execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    execution.stop(cluster, console=quiet(), config=docker_config)
    result = execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
    assert result.exit_code == 0
    assert (result.log_dir / "run-0.log").read_text() == "first\n"  # same disk, resumed
    rec = state.get_cluster(cluster)
    assert rec is not None and rec.status == state.CLUSTER_UP
    reasons = [e.reason for e in state.cluster_events(cluster)]
    assert any("was STOPPED" in r for r in reasons)


def test_no_setup_skips_setup_and_every_log_file_exists(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    task = make_task(setup="echo should-not-run > ~/setup-ran", run="ls ~/setup-ran || echo none")
    result = execution.launch(
        task, cluster, no_setup=True, console=quiet(), config=docker_config, stream=False
    )
    assert result.exit_code == 0
    setup = next(s for s in result.stages if s.stage is Stage.SETUP)
    assert setup.skipped and "--no-setup" in setup.note
    assert "none" in (result.log_dir / "run-0.log").read_text()
    for name in ("provision.log", "workdir_sync.log", "file_mounts.log", "run-0.log"):
        assert (result.log_dir / name).exists(), name


def _image_without(docker_config: SkycoreConfig, repo: str, paths: str) -> str:
    """A local image made from the node image with ``paths`` removed; returns its tag."""
    client = dprov.client(docker_config)
    tag = unique_name("t", 8)
    base = client.containers.create(docker_config.docker.image, ["sleep", "60"])
    try:
        base.start()
        assert base.exec_run(["sh", "-c", f"rm -f {paths}"]).exit_code == 0
        base.commit(repository=repo, tag=tag)
    finally:
        base.remove(force=True)
    return f"{repo}:{tag}"


def test_node_runtime_is_installed_or_refused_at_provision(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    """An image without fusermount gets it (and rclone) from the host at PROVISION and the
    cluster comes UP; an image without python3 (which the node programs need and the host
    cannot give) is refused at once at PROVISION, naming it: INIT with the reason, no job.
    (This test used to assert that a node without fusermount fails its health check.)"""
    client = dprov.client(docker_config)
    no_fuse = _image_without(docker_config, "skycore-test-nofuse", "/usr/bin/fusermount3 "
                             "/usr/bin/fusermount /usr/local/bin/rclone")  # fmt: skip
    no_python = _image_without(docker_config, "skycore-test-nopython", "/usr/bin/python3*")
    try:
        task = make_task(
            run="command -v fusermount3 rclone", resources={"image_id": f"docker:{no_fuse}"}
        )
        result = execution.launch(
            task, cluster, console=quiet(), config=docker_config, stream=False
        )
        assert result.exit_code == 0
        run_log = (result.log_dir / "run-0.log").read_text()
        assert "/usr/local/bin/fusermount3" in run_log and "/usr/local/bin/rclone" in run_log
        provision.terminate_instances("docker", cluster, docker_config)
        state.remove_cluster(cluster, "test: next image")

        task = make_task(run="true", resources={"image_id": f"docker:{no_python}"})
        started = time.monotonic()
        with pytest.raises(StageError, match="python3"):
            execution.launch(task, cluster, console=quiet(), config=docker_config, stream=False)
        assert time.monotonic() - started < 20  # a definitive failure is not waited out
        rec = state.get_cluster(cluster)
        assert rec is not None and rec.status == state.CLUSTER_INIT
        assert "lacks python3" in rec.status_reason
        assert state.list_jobs(cluster) == []
        assert provision.query_instances("docker", cluster, docker_config) == {}  # node removed
    finally:
        provision.terminate_instances("docker", cluster, docker_config)
        for tag in (no_fuse, no_python):
            client.images.remove(tag, force=True)


def test_launch_keeps_a_given_task_id(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    """Managed jobs relaunch with their own SKYPILOT_TASK_ID: setup and run both see it."""
    task = make_task(
        setup="echo setup-task=$SKYPILOT_TASK_ID", run="echo run-task=$SKYPILOT_TASK_ID"
    )
    task_id = "sky-managed-2026-11-29-00-00-00-000000_train_3-0"
    for _ in range(2):  # a relaunch keeps it too
        result = execution.launch(
            task, cluster, console=quiet(), config=docker_config, stream=False, task_id=task_id
        )
        assert result.exit_code == 0
        assert (result.log_dir / "setup-0.log").read_text() == f"setup-task={task_id}\n"
        assert (result.log_dir / "run-0.log").read_text() == f"run-task={task_id}\n"


def test_cancel_before_the_pid_file_exists_still_stops_the_job(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    from skycore import backend

    assert execution.launch(make_task(run="true"), cluster, console=quiet()).exit_code == 0
    record = state.get_cluster(cluster)
    assert record is not None
    handle = backend.get_handle(record, docker_config)
    # The cancel lands first (RUNNING recorded, script not started yet on the node) ...
    backend.cancel_job(handle, 77)
    task = make_task(run="echo started; sleep 60")
    t0 = time.monotonic()
    codes = backend.run_on_nodes(
        handle, task, task.run or "", "run", Path(docker_config.logs_dir or "."), "t", 77, False
    )
    # ... and the script, once it starts, finds the marker and exits instead of running.
    assert codes == [backend.CANCELLED_EXIT]
    assert time.monotonic() - t0 < 30
    # A job cancelled while still PENDING never runs at all.
    job = state.add_job(cluster, "late", 1, str(Path(docker_config.logs_dir or ".")), None)
    assert state.set_job_status(cluster, job.job_id, state.JOB_CANCELLED)
    result = execution.RunResult(cluster, Path(docker_config.logs_dir or "."))
    console = quiet()
    execution._exec(
        handle,
        make_task(run="echo should-not-run > ~/ran"),
        job,
        execution.Reporter(console, result),
        Path(docker_config.logs_dir or "."),
        False,
        result,
    )
    assert result.job_status == state.JOB_CANCELLED
    assert handle.runners[0].run_output("test -e ~/ran")[0] == 1


def test_a_part_that_cannot_start_is_a_stage_error_naming_the_node(
    cluster: str, docker_config: SkycoreConfig, make_task: Callable[..., Task]
) -> None:
    """Start and follow share one exec per node; a part that cannot start there is still a
    StageError that names the node and the reason (not an exit code of the user's)."""
    from skycore import backend
    from skycore.errors import StageError

    assert execution.launch(make_task(run="true"), cluster, console=quiet()).exit_code == 0
    record = state.get_cluster(cluster)
    assert record is not None
    handle = backend.get_handle(record, docker_config)
    # The job's folder in the node's job table is taken by a file: nothing can start there.
    assert handle.runners[0].run_output("mkdir -p ~/.sky/jobs && : > ~/.sky/jobs/88")[0] == 0
    task = make_task(run="echo never")
    logs_dir = Path(docker_config.logs_dir or ".")
    with pytest.raises(StageError) as raised:
        backend.run_on_nodes(handle, task, task.run or "", "run", logs_dir, "t", 88, False)
    message = raised.value.message
    assert f"Starting the run of job 88 on {handle.runners[0].node_name} failed" in message
    assert "File exists" in message or "Not a directory" in message, message
    handle.runners[0].run_output("rm -f ~/.sky/jobs/88")


def test_drain_progress_is_throttled_to_one_line_a_second() -> None:
    from skycore.backend.mounts import _Throttled

    said: list[str] = []
    sink = _Throttled(said.append, interval=0.3)
    for i in range(50):
        sink(f"line {i}\n")
    assert said == ["line 0"]
    time.sleep(0.35)
    sink("later\n")
    sink("  \n")
    assert said == ["line 0", "later"]
