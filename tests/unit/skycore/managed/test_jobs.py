"""Managed jobs without the cloud: the state machine in SQLite, the recovery strategy, the
task id, the training program's checkpoint rules, the CLI's user errors, and the orphan rule
with real controller processes (whose task cannot load, so they end at once)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest
import yaml
from click.testing import CliRunner

from skycore.cli.managed_jobs import jobs
from skycore.config import SkycoreConfig, save_config
from skycore.managed import core, paths, recovery
from skycore.provision import check_cluster_name
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus, TransitionError

TRAIN = Path(__file__).resolve().parents[3] / "fixtures" / "train" / "train.py"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh skycore home with a default config (no cloud needed)."""
    home = tmp_path / "home"
    monkeypatch.setenv("SKYCORE_HOME", str(home))
    save_config(SkycoreConfig(logs_dir=str(tmp_path / "logs")))
    return home


def new_job(max_restarts: int = 0) -> jstate.ManagedJob:
    return jstate.add_job(
        "train", use_spot=True, strategy="FAILOVER", max_restarts_on_errors=max_restarts
    )


# --- state machine ---------------------------------------------------------------------------


def test_transitions_are_recorded_with_reasons(home: Path) -> None:
    job = new_job()
    assert job.status is JobStatus.PENDING
    assert jstate.set_status(job.job_id, JobStatus.STARTING, "launching")
    assert jstate.set_status(job.job_id, JobStatus.RUNNING, "run started")
    assert jstate.set_status(job.job_id, JobStatus.RECOVERING, "preempted", recovery=True)
    assert jstate.set_status(job.job_id, JobStatus.RECOVERING, "preempted again", recovery=True)
    assert jstate.set_status(job.job_id, JobStatus.RUNNING, "run started again")
    assert jstate.set_status(job.job_id, JobStatus.SUCCEEDED, "done")
    done = jstate.get(job.job_id)
    assert done is not None
    assert done.status is JobStatus.SUCCEEDED and done.recovery_count == 2
    assert done.started_at and done.ended_at and done.last_recovered_at
    assert done.started_at <= done.ended_at
    events = jstate.events(job.job_id)
    assert [(e.from_status, e.to_status, e.reason) for e in events] == [
        (None, "PENDING", "submitted"),
        ("PENDING", "STARTING", "launching"),
        ("STARTING", "RUNNING", "run started"),
        ("RUNNING", "RECOVERING", "preempted"),
        ("RECOVERING", "RECOVERING", "preempted again"),
        ("RECOVERING", "RUNNING", "run started again"),
        ("RUNNING", "SUCCEEDED", "done"),
    ]
    assert [e.ts for e in events] == sorted(e.ts for e in events)


def test_terminal_states_are_final(home: Path) -> None:
    job = new_job()
    jstate.set_status(job.job_id, JobStatus.FAILED_NO_RESOURCE, "no nodes")
    assert not jstate.set_status(job.job_id, JobStatus.RUNNING, "late")
    assert not jstate.request_cancel(job.job_id)
    final = jstate.get(job.job_id)
    assert final is not None and final.status is JobStatus.FAILED_NO_RESOURCE
    assert not final.cancel_requested


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ([], JobStatus.RUNNING),
        ([], JobStatus.RECOVERING),
        ([JobStatus.STARTING, JobStatus.RUNNING], JobStatus.STARTING),
        ([JobStatus.STARTING, JobStatus.RECOVERING], JobStatus.STARTING),
    ],
)
def test_forbidden_transitions(home: Path, path: list[JobStatus], bad: JobStatus) -> None:
    job = new_job()
    for status in path:
        jstate.set_status(job.job_id, status, "ok")
    with pytest.raises(TransitionError):
        jstate.set_status(job.job_id, bad, "not allowed")


def test_restart_on_error_is_counted_apart_from_recoveries(home: Path) -> None:
    job = new_job(max_restarts=1)
    jstate.set_status(job.job_id, JobStatus.STARTING, "launching")
    jstate.set_status(job.job_id, JobStatus.RUNNING, "run")
    job = jstate.get(job.job_id)  # type: ignore[assignment]
    assert recovery.may_restart_on_error(job)
    jstate.set_status(job.job_id, JobStatus.RECOVERING, "exit 3; restart", restart_on_error=True)
    job = jstate.get(job.job_id)  # type: ignore[assignment]
    assert job.restarts_on_errors == 1 and job.recovery_count == 0
    assert not recovery.may_restart_on_error(job)


def test_cancel_request_is_a_flag_and_an_event(home: Path) -> None:
    job = new_job()
    assert jstate.request_cancel(job.job_id)
    flagged = jstate.get(job.job_id)
    assert flagged is not None and flagged.cancel_requested
    assert flagged.status is JobStatus.PENDING  # the controller moves it to CANCELLED
    assert jstate.events(job.job_id)[-1].reason == "cancel requested"


# --- strategy, names, task id ----------------------------------------------------------------


def test_failover_tries_the_same_region_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(recovery.REGIONS, "multi", ["r1", "r2", "r3"])
    failover = recovery.strategy_for("failover", "multi")
    eager = recovery.strategy_for("EAGER_NEXT_REGION", "multi")
    assert failover.regions(None) == ["r1", "r2", "r3"]
    assert failover.regions("r2") == ["r2", "r1", "r3"]
    assert eager.regions("r2") == ["r1", "r3", "r2"]
    plan = recovery.strategy_for(None, "docker").launch_plan("local")
    assert [r for r, _ in plan] == ["local"] * recovery.LAUNCH_RETRIES_PER_REGION
    assert plan[0][1] == 0.0 and all(wait > 0 for _, wait in plan[1:])


@pytest.mark.parametrize("name", [None, "train", "My Big_Training Job!!", "42-answers", "-"])
def test_cluster_names_are_valid_and_unique(name: str | None) -> None:
    names = {core.cluster_name_for(7, name) for _ in range(20)}
    assert len(names) == 20
    for cluster in names:
        assert check_cluster_name(cluster) is None, cluster
        assert "-7-" in cluster


def test_task_id_has_the_managed_job_form() -> None:
    task_id = core.task_id_for(3, "train", time.time())
    assert re.fullmatch(r"sky-managed-[\d-]+_train_3-0", task_id)


# --- the training program's checkpoints ------------------------------------------------------


def train(ckpt: Path, *args: str) -> str:
    return subprocess.run(
        [sys.executable, str(TRAIN), "--ckpt-dir", str(ckpt), "--step-seconds", "0", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def result_of(out: str) -> str:
    m = re.search(r"RESULT sha256=(\w+)", out)
    assert m, out
    return m.group(1)


def resumed(out: str) -> int:
    m = re.search(r"RESUME step=(\d+)", out)
    assert m, out
    return int(m.group(1))


def test_resumed_training_ends_like_an_uninterrupted_one(tmp_path: Path) -> None:
    straight = result_of(train(tmp_path / "a", "--steps", "23", "--ckpt-mib", "0.1"))
    train(tmp_path / "b", "--steps", "13", "--ckpt-mib", "0.1")  # "preempted" after step 13
    out = train(tmp_path / "b", "--steps", "23", "--ckpt-mib", "0.1")
    assert resumed(out) == 10
    assert result_of(out) == straight
    assert json.loads((tmp_path / "b" / "result.json").read_text())["resumed_from"] == 10


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("no_manifest", "no manifest"),
        ("short_data", "data has 100 bytes"),
        ("corrupt_data", "data does not match the manifest's sha256"),
        ("bad_manifest", "unreadable manifest"),
        ("no_data", "data unreadable"),
    ],
)
def test_incomplete_checkpoints_are_skipped(tmp_path: Path, damage: str, why: str) -> None:
    ckpt = tmp_path / "ckpt"
    straight = result_of(train(tmp_path / "a", "--steps", "12", "--ckpt-mib", "0.05"))
    train(ckpt, "--steps", "11", "--ckpt-mib", "0.05")  # checkpoints 5 and 10
    data, manifest = ckpt / "checkpoint-000010.bin", ckpt / "checkpoint-000010.json"
    if damage == "no_manifest":
        manifest.unlink()
    elif damage == "short_data":
        with open(data, "r+b") as f:
            f.truncate(100)
    elif damage == "corrupt_data":
        raw = bytearray(data.read_bytes())
        raw[-1] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "bad_manifest":
        manifest.write_text("{not json")
    else:
        data.unlink()
    out = train(ckpt, "--steps", "12", "--ckpt-mib", "0.05")
    assert f"skipping incomplete checkpoint 10: {why}" in out
    assert resumed(out) == 5
    assert result_of(out) == straight


# --- CLI: user errors are one paragraph ------------------------------------------------------


def test_cli_user_errors(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"run": "echo hi", "resorces": {"use_spot": True}}))
    result = runner.invoke(jobs, ["launch", str(bad)])
    assert result.exit_code == 2
    assert "resorces" in result.output and "did you mean 'resources'" in result.output
    assert "Traceback" not in result.output
    assert jstate.list_jobs() == []

    result = runner.invoke(jobs, ["logs", "42"])
    assert result.exit_code == 2 and "Managed job 42 does not exist" in result.output
    result = runner.invoke(jobs, ["cancel", "-y"])
    assert result.exit_code == 2 and "--all" in result.output
    result = runner.invoke(jobs, ["queue"])
    assert result.exit_code == 0 and "No managed jobs." in result.output


# --- orphans ---------------------------------------------------------------------------------


def orphan(home: Path, tmp_path: Path, heartbeat_age: float) -> jstate.ManagedJob:
    """A RUNNING job without a controller; its task names a workdir that is gone."""
    workdir = tmp_path / "gone"
    workdir.mkdir()
    task_file = tmp_path / "task.yaml"
    task_file.write_text(yaml.safe_dump({"workdir": str(workdir), "run": "true"}))
    workdir.rmdir()
    job = new_job()
    paths.job_dir(job.job_id).mkdir(parents=True)
    jstate.update(
        job.job_id,
        cluster=core.cluster_name_for(job.job_id, "train"),
        task_yaml=str(task_file),
        log_path=str(paths.log_path(job.job_id)),
        heartbeat=time.time() - heartbeat_age,
    )
    jstate.set_status(job.job_id, JobStatus.STARTING, "launching")
    jstate.set_status(job.job_id, JobStatus.RUNNING, "run started")
    return job


def test_orphan_with_stale_heartbeat_gets_a_new_controller(home: Path, tmp_path: Path) -> None:
    job = orphan(home, tmp_path, heartbeat_age=core.ADOPT_AFTER_S + 1)
    assert not core.controller_alive(job.job_id)
    assert core.adopt_orphans() == [job.job_id]
    done = core.wait(job.job_id, 60, poll=0.05)
    # The new controller ran the job: here its task cannot load any more, so it FAILED.
    assert done.status is JobStatus.FAILED
    assert "workdir" in done.status_reason
    assert done.controller_pid and done.controller_pid != os.getpid()
    reasons = [e.reason for e in jstate.events(job.job_id)]
    assert any(r.startswith("no live controller") for r in reasons), reasons
    assert core.adopt_orphans() == []  # terminal jobs are left alone


def test_live_or_recent_controllers_are_not_adopted(home: Path, tmp_path: Path) -> None:
    job = orphan(home, tmp_path, heartbeat_age=0)
    assert core.adopt_orphans() == []  # heartbeat is recent
    jstate.update(job.job_id, heartbeat=time.time() - 60)
    with filelock.FileLock(str(paths.lock_path(job.job_id)), timeout=0):
        assert core.controller_alive(job.job_id)
        assert core.adopt_orphans() == []  # a live controller holds the lock
    assert not core.controller_alive(job.job_id)
    assert core.adopt_orphans() == [job.job_id]
    assert core.wait(job.job_id, 60, poll=0.05).status is JobStatus.FAILED


def test_a_second_controller_for_the_same_job_exits(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The controller's entry point, run here with a short lock wait: the lock is held by
    another open file, which flock treats like another process."""
    from skycore.managed import controller

    monkeypatch.setattr(controller, "LOCK_WAIT_S", 0.05)
    job = orphan(home, tmp_path, heartbeat_age=0)
    with filelock.FileLock(str(paths.lock_path(job.job_id)), timeout=0):
        returncode = controller.main([str(job.job_id)])
    assert returncode == 0
    assert "another controller runs this job" in capsys.readouterr().out
    still = jstate.get(job.job_id)
    assert still is not None and still.status is JobStatus.RUNNING


def test_preempt_refuses_on_demand_nodes(home: Path) -> None:
    from harness.cloud.chaos import ChaosError
    from harness.cloud.preemption import preempt
    from skycore import state as core_state

    resources = {"cloud": None, "image_id": None, "use_spot": False, "num_nodes": 1}
    core_state.upsert_cluster(
        "on-demand-1", core_state.CLUSTER_INIT, "docker", 1, resources, "launching"
    )
    core_state.set_cluster_status("on-demand-1", core_state.CLUSTER_UP, "launched")
    with pytest.raises(ChaosError, match=r"on-demand nodes .* --use-spot .* --force"):
        preempt("on-demand-1", 0)


def test_preempt_command_reports_errors_in_one_line(home: Path) -> None:
    from harness.cloud.preemption import preempt_command
    from skycore import state as core_state

    resources = {"cloud": None, "image_id": None, "use_spot": False, "num_nodes": 1}
    core_state.upsert_cluster(
        "on-demand-2", core_state.CLUSTER_INIT, "docker", 1, resources, "launching"
    )
    core_state.set_cluster_status("on-demand-2", core_state.CLUSTER_UP, "launched")
    result = CliRunner().invoke(preempt_command, ["on-demand-2", "--rank", "0"])
    assert result.exit_code == 1
    assert "Error: Cluster 'on-demand-2' runs on-demand nodes" in result.output
    assert "Traceback" not in result.output


# --- teardown: never remove nodes that may hold cached writes --------------------------------


def test_teardown_that_cannot_see_the_nodes_keeps_the_cluster(home: Path) -> None:
    """With the engine unreachable nobody can tell whether a node is UP (and holds cached
    writes), so a failed teardown is retried, then the cluster is kept and the job FAILED."""
    import io

    from skycore import state as core_state
    from skycore.config import load_config
    from skycore.managed import controller

    resources = {"cloud": None, "image_id": None, "use_spot": True, "num_nodes": 1}
    core_state.upsert_cluster(
        "kept-1-abcdef", core_state.CLUSTER_INIT, "docker", 1, resources, "launching"
    )
    core_state.set_cluster_status("kept-1-abcdef", core_state.CLUSTER_UP, "launched")
    job = new_job()
    jstate.update(job.job_id, cluster="kept-1-abcdef")
    out = io.StringIO()
    ctl = controller.Controller(job.job_id, out=out)
    ctl.config = load_config()
    ctl.config.docker.host = f"unix://{home}/no-engine.sock"
    ctl.teardown_tries, ctl.teardown_backoff = 3, (0.0,)
    ctl._end(JobStatus.CANCELLED, "cancelled by user")
    log = out.getvalue()
    assert "teardown failed (try 1/3)" in log and "teardown failed (try 3/3)" in log, log
    done = jstate.get(job.job_id)
    assert done is not None and done.status is JobStatus.FAILED
    assert done.status_reason.startswith(
        "cluster kept-1-abcdef kept: uploads still pending; run 'skycore down kept-1-abcdef'"
    )
    assert "the job had ended CANCELLED: cancelled by user" in done.status_reason
    assert core_state.get_cluster("kept-1-abcdef") is not None  # not forgotten
