"""The skycore CLI as a user runs it: a real process, real nodes, exit codes and messages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing.terminal import with_ctrl_c
from skycore import backend, provision, state
from skycore.config import SkycoreConfig
from skycore.provision import docker as dprov
from tests.polling import wait_for

SKYCORE = [sys.executable, "-m", "skycore.cli"]

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def home(
    docker_config: SkycoreConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> SkycoreConfig:
    """``docker_config``, with the CLI run from tmp_path, next to a workdir ``wd``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "msg.txt").write_text("from-workdir\n")
    return docker_config


@pytest.fixture
def sky(home: SkycoreConfig) -> Run:
    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SKYCORE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "COLUMNS": "200"},
            stdin=subprocess.DEVNULL,
        )

    return run


def exec_terminal(*args: str) -> subprocess.Popen[str]:
    """``skycore exec ARGS`` as a user's terminal runs it, its output read as it comes."""
    return subprocess.Popen(
        with_ctrl_c([*SKYCORE, "exec", *args]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_terminal_after(proc: subprocess.Popen[str], marker: str) -> None:
    """kill -9 the terminal ``proc`` once its job printed ``marker``."""
    try:
        wait_for_line(proc, marker)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()


def wait_for_line(proc: subprocess.Popen[str], marker: str, timeout: float = 60) -> list[str]:
    """Lines of ``proc``'s output up to the first containing ``marker`` (the job printed it,
    so its script and pid file exist on the node)."""
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, ""):
            lines.append(line)
            if marker in line:
                found.set()
                return
        found.set()

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), f"no {marker!r} in {''.join(lines)!r}"
    assert any(marker in ln for ln in lines), "".join(lines)
    return lines


def write(path: str, text: str) -> str:
    Path(path).write_text(text)
    return path


def test_lifecycle(cluster: str, sky: Run) -> None:
    task = write(
        "task.yaml",
        "name: hello\nworkdir: wd\nenvs:\n  WHO: yaml\nsetup: echo set-up\n"
        "run: |\n  echo hi $WHO rank=$SKYPILOT_NODE_RANK\n  cat msg.txt\n",
    )
    r = sky("launch", task, "-c", cluster, "-y", "--env", "WHO=cli")
    assert r.returncode == 0, r.stdout + r.stderr
    for stage in ("PROVISION", "SYNC_WORKDIR", "SYNC_FILE_MOUNTS", "SETUP", "EXEC"):
        assert stage in r.stdout
    assert "hi cli rank=0" in r.stdout and "from-workdir" in r.stdout
    assert "set-up" in r.stdout

    r = sky("exec", cluster, "echo exec-$SKYPILOT_NUM_NODES")
    assert r.returncode == 0 and "exec-1" in r.stdout

    r = sky("queue", cluster)
    assert r.returncode == 0
    assert r.stdout.count("SUCCEEDED") == 2 and "hello" in r.stdout

    r = sky("logs", cluster, "1")
    assert r.returncode == 0 and "hi cli rank=0" in r.stdout and "SUCCEEDED" in r.stdout
    r = sky("logs", cluster, "--status")
    assert r.stdout.strip() == "SUCCEEDED"

    r = sky("status", "-v")
    assert r.returncode == 0 and cluster in r.stdout and "UP" in r.stdout
    assert "INIT -> UP" in r.stdout and "node 0 (head): UP" in r.stdout

    r = sky("stop", cluster, "-y")
    assert r.returncode == 0 and "STOP" in r.stdout
    r = sky("exec", cluster, "echo no")
    assert r.returncode == 2
    assert f"skycore start {cluster}" in r.stderr and "Traceback" not in r.stderr
    r = sky("status")
    assert "STOPPED" in r.stdout

    r = sky("start", cluster, "-y")
    assert r.returncode == 0
    r = sky("exec", cluster, "cat ~/sky_workdir/msg.txt")
    assert r.returncode == 0 and "from-workdir" in r.stdout  # the disk survived stop/start

    r = sky("down", cluster, "-y")
    assert r.returncode == 0
    assert provision.query_instances("docker", cluster, None) == {}
    r = sky("status")
    assert cluster not in r.stdout


def test_setup_failure_exit_100_then_exec(cluster: str, sky: Run) -> None:
    task = write("bad.yaml", "setup: |\n  echo broken-setup\n  false\nrun: echo unreachable\n")
    r = sky("launch", task, "-c", cluster, "-y")
    assert r.returncode == 100
    assert "broken-setup" in r.stdout and "FAILED_SETUP" in r.stdout
    assert "unreachable" not in r.stdout
    r = sky("status")
    assert "UP" in r.stdout
    r = sky("exec", cluster, "echo fixed")
    assert r.returncode == 0 and "fixed" in r.stdout


def test_user_errors_are_one_paragraph_exit_2(cluster: str, sky: Run) -> None:
    write("typo.yaml", "nun_nodes: 2\nrun: echo\n")
    r = sky("launch", "typo.yaml", "-c", cluster, "-y")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "nun_nodes" in r.stderr
    r = sky("launch", "missing.yaml", "-c", cluster, "-y")
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    r = sky("launch", write("ok.yaml", "run: echo\n"), "-c", "Bad_Name", "-y")
    assert r.returncode == 2 and "Cluster name" in r.stderr
    r = sky("exec", cluster, "echo")
    missing = f"Cluster '{cluster}' does not exist: 'skycore status' lists the clusters"
    assert r.returncode == 2 and missing in " ".join(r.stderr.split()), r.stderr
    # --env KEY takes KEY from the local environment (as SkyPilot); unset there: a clear error.
    r = sky("launch", "ok.yaml", "-c", cluster, "-y", "--env", "NOEQUALS")
    assert r.returncode == 2 and "NOEQUALS is not set in your environment" in r.stderr
    r = sky("logs", cluster)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = sky("down", cluster, "-y")  # no such cluster (no record, no nodes): the one sentence
    assert r.returncode == 2 and missing in " ".join(r.stderr.split()), r.stderr
    assert "failed" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


def test_different_resources_names_both(cluster: str, sky: Run) -> None:
    assert sky("launch", write("one.yaml", "run: echo\n"), "-c", cluster, "-y").returncode == 0
    r = sky("launch", write("two.yaml", "num_nodes: 2\nrun: echo\n"), "-c", cluster, "-y")
    assert r.returncode == 2
    assert "num_nodes=1" in r.stderr and "num_nodes=2" in r.stderr
    r = sky("exec", cluster, "--cloud", "gcp", "--num-nodes", "2", "echo never")
    err = " ".join(r.stderr.split())
    assert r.returncode == 2 and "--num-nodes: the task asks for num_nodes=2" in err, err
    assert "--cloud: the task asks for cloud=gcp" in err and "launch -c" in err, err
    assert "never" not in r.stdout


def test_dryrun_changes_nothing(cluster: str, sky: Run) -> None:
    r = sky("launch", write("d.yaml", "run: echo\n"), "-c", cluster, "--dryrun")
    assert r.returncode == 0, r.stderr
    assert "dry run" in r.stdout.lower()
    assert state.get_cluster(cluster) is None
    assert provision.query_instances("docker", cluster, None) == {}


def test_cancel_a_running_job(cluster: str, sky: Run, home: SkycoreConfig) -> None:
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    proc = exec_terminal(cluster, "echo job-$((6*7)); sleep 120; echo finished")
    try:
        lines = wait_for_line(proc, "job-42")
        r = sky("cancel", cluster, "2", "-y")
        assert r.returncode == 0, r.stderr
        rest, _ = proc.communicate(timeout=30)
        out = "".join(lines) + rest
    finally:
        proc.kill()
    assert proc.returncode == 103
    assert "job-42" in out and "finished" not in out
    job = state.get_job(cluster, 2)
    assert job is not None and job.status == state.JOB_CANCELLED
    r = sky("queue", cluster)
    assert "CANCELLED" in r.stdout


def test_storage_ls_empty(home: SkycoreConfig, sky: Run) -> None:
    r = sky("storage", "ls")
    assert r.returncode == 0 and "No storage" in r.stdout
    r = sky("storage", "delete", "nope", "-y")
    assert r.returncode == 2 and "storage ls" in r.stderr


def test_ctrl_c_detaches_and_cancel_from_another_terminal_stops_it(
    cluster: str, sky: Run, home: SkycoreConfig
) -> None:
    """The cluster owns a running job: Ctrl-C only detaches the terminal (and says how to
    reattach); 'skycore cancel' from another terminal is what stops it. (This test used to
    assert that Ctrl-C cancels the job on the nodes.)"""
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    proc = exec_terminal(cluster, "echo job-$((6*7)); sleep 300; echo finished")
    try:
        lines = wait_for_line(proc, "job-42")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        out = "".join(lines) + rest
    finally:
        proc.kill()
    assert proc.returncode == 130, out
    assert f"skycore logs {cluster} 2 --follow" in out, out
    info = provision.get_cluster_info("docker", cluster, home)
    runner = provision.get_command_runners("docker", info, home)[0]
    assert runner.run_output("pgrep -f 'sleep 300'")[0] == 0  # still running on the node
    r = sky("queue", cluster)
    assert r.returncode == 0 and "RUNNING" in r.stdout, r.stdout + r.stderr
    r = sky("cancel", cluster, "2", "-y")  # another terminal
    assert r.returncode == 0, r.stderr
    job = state.get_job(cluster, 2)
    assert job is not None and job.status == state.JOB_CANCELLED
    assert runner.run_output("pgrep -f 'sleep 300'")[0] == 1  # nothing left running


def test_a_killed_client_changes_nothing_on_the_cluster(
    cluster: str, sky: Run, home: SkycoreConfig
) -> None:
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    proc = exec_terminal(cluster, "echo start-$((6*7)); sleep 3; echo finished-ok")
    kill_terminal_after(proc, "start-42")
    # Any terminal: the job's own log to its end, and its real outcome.
    r = sky("logs", cluster, "2")
    assert r.returncode == 0, r.stderr
    assert "start-42" in r.stdout and "finished-ok" in r.stdout, r.stdout
    r = sky("queue", cluster, "--json")
    (job,) = [j for j in __import__("json").loads(r.stdout) if j["job_id"] == 2]
    assert (job["status"], job["exit_code"]) == ("SUCCEEDED", 0), job


def test_detach_run_returns_once_started(cluster: str, sky: Run) -> None:
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    r = sky("exec", "-d", cluster, "sleep 2; echo detached-done")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RUNNING" in r.stdout and f"skycore logs {cluster} 2" in r.stdout, r.stdout
    r = sky("logs", cluster, "2")  # follows the cluster's log to the end
    assert r.returncode == 0 and "detached-done" in r.stdout, r.stdout + r.stderr
    r = sky("queue", cluster)
    assert "SUCCEEDED" in r.stdout, r.stdout
    r = sky("launch", "idle.yaml", "-c", cluster, "-y", "-d", "--down")
    assert r.returncode == 2 and "--down with -d/--detach-run" in r.stderr


def _job_row(sky: Run, cluster: str, job_id: int) -> dict[str, Any]:
    r = sky("queue", cluster, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [j for j in json.loads(r.stdout) if j["job_id"] == job_id]
    return dict(row)


def _wait_ended(sky: Run, cluster: str, job_id: int, timeout: float = 120) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        row = _job_row(sky, cluster, job_id)
        return row if row["status"] not in ("PENDING", "SETTING_UP", "RUNNING") else None

    row: dict[str, Any] = wait_for(f"job {job_id} on {cluster} to end", ended, timeout, poll=0.5)
    return row


TEN_LINES = "for i in $(seq 1 10); do echo line-$i-$SKYPILOT_NODE_RANK; sleep 0.3; done"


def _every_line(text: str, nodes: int) -> list[str]:
    """The expected lines the job did not print in ``text`` (empty: all there)."""
    return [
        f"line-{i}-{r}" for r in range(nodes) for i in range(1, 11) if f"line-{i}-{r}\n" not in text
    ]


@pytest.mark.parametrize(
    ("nodes", "exit_code", "status"),
    [(1, 0, "SUCCEEDED"), (2, 0, "SUCCEEDED"), (2, 3, "FAILED")],
    ids=["1-node-succeeded", "2-nodes-succeeded", "2-nodes-failed"],
)
def test_logs_of_a_job_whose_terminal_was_killed_are_whole(
    cluster: str, sky: Run, home: SkycoreConfig, nodes: int, exit_code: int, status: str
) -> None:
    """kill -9 the terminal after two lines, wait until 'queue' says the job ended, then
    'logs' (following or not) prints every line of every rank, from the local copy that was
    completed from the nodes' job table once and then kept."""
    idle = write("idle.yaml", "run: echo up\n")
    r = sky("launch", idle, "-c", cluster, "-y", "--num-nodes", str(nodes))
    assert r.returncode == 0, r.stdout + r.stderr
    job = write(
        "job.yaml", yaml.safe_dump({"num_nodes": nodes, "run": f"{TEN_LINES}; exit {exit_code}"})
    )
    proc = exec_terminal(cluster, job)
    kill_terminal_after(proc, "line-2-0")
    row = _wait_ended(sky, cluster, 2)
    assert row["status"] == status, row
    log_dir = Path(row["log_dir"])
    for follow in ("--follow", "--no-follow"):
        r = sky("logs", cluster, "2", follow)
        assert r.returncode == 0, r.stdout + r.stderr
        assert not _every_line(r.stdout, nodes), r.stdout
        assert "may be short" not in r.stdout + r.stderr
    # The completed copy is kept: the local files hold every line without the nodes.
    local = "".join(p.read_text() for p in sorted(log_dir.glob("run-*.log")))
    assert not _every_line(local, nodes), local


def test_logs_of_a_job_that_ended_unfollowed_before_a_stop_are_whole(
    cluster: str, sky: Run, home: SkycoreConfig
) -> None:
    """The job ends while no terminal follows it, and nobody asks before 'skycore stop':
    stop records its outcome and fetches its log while the nodes still answer, so 'logs'
    of the stopped cluster prints all of it."""
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    proc = exec_terminal(cluster, TEN_LINES)
    kill_terminal_after(proc, "line-2-0")
    record = state.get_cluster(cluster)
    assert record is not None
    runner = backend.get_handle(record, home).runners[0]
    wait_for(
        "the job to end on its node",
        lambda: runner.run_output("cat ~/.sky/jobs/2/run-0.exit")[1].strip() == "0",
        timeout=60,
        poll=0.3,
    )
    r = sky("stop", cluster, "-y")
    assert r.returncode == 0, r.stdout + r.stderr
    r = sky("logs", cluster, "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not _every_line(r.stdout, 1), r.stdout
    assert "SUCCEEDED" in r.stdout, r.stdout


@pytest.mark.parametrize(("rank", "status"), [(1, "FAILED"), (0, "FAILED_DRIVER")])
def test_stop_settles_an_orphan_job_whose_node_is_gone(
    cluster: str, sky: Run, home: SkycoreConfig, rank: int, status: str
) -> None:
    """A 2-node job's terminal dies, then one of its nodes vanishes (preemption): 'stop'
    settles the job (FAILED without a worker's part, FAILED_DRIVER without the head), says
    why in the cluster's events, and stops the cluster (it once failed with an IndexError,
    reading the gone node's exit code)."""
    idle = write("idle.yaml", "run: echo up\n")
    r = sky("launch", idle, "-c", cluster, "-y", "--num-nodes", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    run = "echo started-$SKYPILOT_NODE_RANK; sleep 300"
    proc = exec_terminal(cluster, write("job.yaml", yaml.safe_dump({"num_nodes": 2, "run": run})))
    kill_terminal_after(proc, "started-0")
    record = state.get_cluster(cluster)
    assert record is not None
    gone = backend.get_handle(record, home).info.nodes[rank]
    dprov.client(home).containers.get(gone.instance_id).remove(force=True)  # the node vanishes
    r = sky("stop", cluster, "-y")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _job_row(sky, cluster, 2)["status"] == status
    assert state.get_cluster(cluster).status == state.CLUSTER_STOPPED  # type: ignore[union-attr]
    r = sky("status", "-v", cluster)
    assert f"node {rank} is gone, and its part's outcome with it" in r.stdout, r.stdout


def test_logs_of_a_stopped_cluster_say_where_the_rest_is(
    cluster: str, sky: Run, home: SkycoreConfig
) -> None:
    """A failed job's local copy is not known to be whole (a failed follow looks the same),
    and the cluster is stopped: 'logs' prints what it has and says, in one line, that the
    whole log is on the nodes and how to get it; after 'skycore start' it fetches it once
    and the note is gone."""
    assert sky("launch", write("idle.yaml", "run: echo up\n"), "-c", cluster, "-y").returncode == 0
    r = sky("exec", cluster, "echo failing-job; exit 4")
    assert r.returncode == 100, r.stdout + r.stderr
    assert sky("stop", cluster, "-y").returncode == 0
    r = sky("logs", cluster, "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing-job" in r.stdout, r.stdout
    note = [ln for ln in r.stdout.splitlines() if "may be short" in ln]
    assert len(note) == 1 and f"skycore start {cluster}" in note[0], r.stdout
    assert sky("start", cluster, "-y").returncode == 0
    r = sky("logs", cluster, "2")
    assert r.returncode == 0 and "failing-job" in r.stdout, r.stdout + r.stderr
    assert "may be short" not in r.stdout, r.stdout


def test_jobs_belong_to_the_cluster_whichever_home_submits_them(
    cluster: str, sky: Run, home: SkycoreConfig, tmp_path: Path
) -> None:
    """Two skycore homes share one cluster: job ids come from the head node's job table,
    so they never collide, and 'logs' in one home prints the whole log of a job the other
    home submitted (and 'queue' then shows its outcome)."""
    other = tmp_path / "other-home"
    env = {**os.environ, "SKYCORE_HOME": str(other), "COLUMNS": "200"}
    subprocess.run(
        [sys.executable, "-c", "from skycore.config import save_config, SkycoreConfig; "
         f"save_config(SkycoreConfig.model_validate_json({home.model_dump_json()!r}))"],
        env=env, check=True,
    )  # fmt: skip

    def sky_other(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SKYCORE, *args], capture_output=True, text=True, timeout=300, env=env,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    idle = write("idle.yaml", "run: echo up\n")
    assert sky("launch", idle, "-c", cluster, "-y").returncode == 0  # job 1, this home
    r = sky_other("launch", idle, "-c", cluster, "-y")  # the same nodes, the other home
    assert r.returncode == 0, r.stdout + r.stderr
    assert [j["job_id"] for j in json.loads(sky_other("queue", cluster, "--json").stdout)] == [2]
    r = sky("exec", cluster, TEN_LINES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [j["job_id"] for j in json.loads(sky("queue", cluster, "--json").stdout)] == [1, 3]
    r = sky_other("logs", cluster, "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not _every_line(r.stdout, 1), r.stdout
    rows = json.loads(sky_other("queue", cluster, "--json").stdout)
    assert [(j["job_id"], j["status"]) for j in rows] == [(2, "SUCCEEDED"), (3, "SUCCEEDED")]
    r = sky_other("logs", cluster, "9")
    assert r.returncode == 2 and "has no job 9" in r.stderr, r.stdout + r.stderr


def test_a_managed_jobs_secret_reaches_its_run_and_is_kept_nowhere(
    home: SkycoreConfig, sky: Run
) -> None:
    """``jobs launch --secret``: the run sees the value; the job's folder and queue never
    hold it once the job has ended."""
    from skycore.managed import paths

    value = f"s3cr3t-{os.getpid()}"
    task = write(
        "secret.yaml",
        'name: secret-job\nsecrets:\n  TOKEN: null\nrun: echo "token-length ${#TOKEN}"\n',
    )
    done = sky("jobs", "launch", task, "--secret", f"TOKEN={value}", "-y")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"token-length {len(value)}" in done.stdout
    assert value not in done.stdout + done.stderr
    (job,) = json.loads(sky("jobs", "queue", "--json").stdout)
    assert job["status"] == "SUCCEEDED" and value not in json.dumps(job)
    folder = paths.job_dir(job["job_id"])
    assert not paths.secrets_path(job["job_id"]).exists()
    kept = [p.name for p in folder.rglob("*") if p.is_file() and value in p.read_text()]
    assert kept == [], f"the secret's value is kept in {kept}"
