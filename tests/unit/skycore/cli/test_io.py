"""The CLI's input checks and script-readable output, without any cloud: real SQLite state,
the real click commands (CliRunner: stdout is not a terminal, as in a pipe)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from skycore import state
from skycore.cli import cli
from skycore.cli.managed_jobs import jobs as jobs_cli
from skycore.config import DockerConfig, SkycoreConfig, save_config
from skycore.storage import StorageSpecError
from skycore.storage.upload import list_upload_files
from skycore.task import Task, TaskError

BAD_NAMES = ["../../../tmp/x", "a;rm -rf /", "", "UPPER", "x" * 41, "a/b"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("SKYCORE_HOME", str(h))
    monkeypatch.chdir(tmp_path)
    save_config(SkycoreConfig(docker=DockerConfig(), logs_dir=str(tmp_path / "sky_logs")))
    (tmp_path / "task.yaml").write_text("run: echo hi\n")
    return h


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize(
    "verb",
    [
        ("launch", "task.yaml", "-y", "-c"),
        ("launch", "task.yaml", "--dryrun", "-c"),
        ("exec",),
        ("stop", "-y"),
        ("start", "-y"),
        ("down", "-y"),
        ("status",),
        ("queue",),
        ("logs",),
        ("cancel", "--all", "-y"),
    ],
    ids=lambda v: "-".join(a.strip("-") for a in v) if isinstance(v, tuple) else v,
)
def test_bad_cluster_names_are_refused_before_touching_files(
    home: Path, tmp_path: Path, verb: tuple[str, ...], name: str
) -> None:
    before = files_under(home) | files_under(tmp_path / "sky_logs")
    args = [*verb, name]
    if verb[0] == "exec":
        args.append("echo hi")
    code, out = run(*args)
    assert code == 2, out
    assert "Error:" in out and "invalid" in out and "lowercase letters" in out, out
    assert "Traceback" not in out
    assert files_under(home) | files_under(tmp_path / "sky_logs") == before
    assert not Path("/tmp/x.lock").exists()


def test_env_without_value_comes_from_the_local_environment(home: Path, tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("envs:\n  RUN_ID: default\nrun: echo $RUN_ID\n")
    code, out = run("launch", "t.yaml", "--env", "RUN_ID", "--dryrun", "-c", "ok",
                    env={"RUN_ID": "from-shell"})  # fmt: skip
    assert code == 0, out
    code, out = run("launch", "t.yaml", "--env", "NOT_SET_ANYWHERE", "--dryrun", "-c", "ok")
    assert code == 2 and "NOT_SET_ANYWHERE is not set in your environment" in out, out


def test_overrides_win_over_the_yaml_and_dryrun_shows_them(home: Path, tmp_path: Path) -> None:
    (tmp_path / "wd2").mkdir()
    (tmp_path / "t.yaml").write_text("name: a\nnum_nodes: 1\nresources:\n  cloud: aws\nrun: x\n")
    flags = ["--num-nodes", "3", "--use-spot", "--cloud", "gcp", "-n", "renamed"]
    code, out = run("launch", "t.yaml", "--dryrun", "-c", "ok", *flags, "--workdir", "wd2")
    assert code == 0, out
    assert "Would create cluster ok with 3 node(s)." in out
    assert "Task renamed: 3 node(s), cloud gcp, spot" in out and "wd2" in out
    code, out = run("launch", "t.yaml", "--dryrun", "-c", "ok", "--num-nodes", "0")
    assert (code == 2 and "--num-nodes" not in out) or "num_nodes" in out, out
    code, out = run("launch", "t.yaml", "--dryrun", "-c", "ok", "--cloud", "nowhere")
    assert code == 2 and "resources.cloud" in out and "'nowhere'" in out, out


def test_task_overrides_are_validated_like_the_yaml(tmp_path: Path) -> None:
    t = Task.from_dict({"name": "a", "run": "x", "resources": {"cloud": "aws"}})
    o = t.with_overrides(num_nodes=4, use_spot=True, cloud="gcp", name="b")
    assert (o.num_nodes, o.resources.use_spot, o.resources.cloud, o.name) == (4, True, "gcp", "b")
    assert t.with_overrides() == t
    with pytest.raises(TaskError, match="num_nodes"):
        t.with_overrides(num_nodes=0)
    with pytest.raises(TaskError, match="--workdir"):
        t.with_overrides(workdir=str(tmp_path / "missing"))


def test_symlink_loops_and_unreadable_files_name_the_path(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "ok.txt").write_text("ok")
    os.symlink("loop-b", src / "loop-a")
    os.symlink("loop-a", src / "loop-b")
    with pytest.raises(StorageSpecError, match=r"loop-[ab] is a symbolic link loop"):
        list_upload_files(src)
    (src / ".skyignore").write_text("loop-*\n")  # ignored links are never followed
    assert list_upload_files(src) == [".skyignore", "ok.txt"]
    os.symlink("..", src / "d" / "up")  # a folder linking back to its parent
    with pytest.raises(StorageSpecError, match=r"d/up is a symbolic link loop"):
        list_upload_files(src)


def test_symlink_loop_in_a_source_is_exit_2_naming_the_field(home: Path, tmp_path: Path) -> None:
    from skycore.storage import Storage

    src = tmp_path / "src"
    src.mkdir()
    os.symlink("self", src / "self")
    st = Storage.from_spec(name="abc", source=str(src), store="s3", field="file_mounts./d")
    with pytest.raises(StorageSpecError) as e:
        st._upload_files()
    assert str(e.value).startswith("file_mounts./d.source: ") and "self" in str(e.value)
    assert e.value.exit_code == 2


def _record_cluster(name: str) -> None:
    state.upsert_cluster(
        name, state.CLUSTER_INIT, "docker", 2, {"cloud": "aws", "use_spot": True}, "launching"
    )
    state.set_cluster_status(name, state.CLUSTER_UP, "by a test")


def test_status_and_queue_json_and_whole_tables(home: Path) -> None:
    long_name = "c" + "x" * 38 + "z"  # 40 characters, the longest valid name
    _record_cluster(long_name)
    code, out = run("status", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["name"] for r in rows] == [long_name]
    row = rows[0]
    assert set(row) >= {"name", "status", "status_reason", "num_nodes", "cloud", "use_spot"}
    assert (row["num_nodes"], row["cloud"], row["use_spot"]) == (2, "aws", True)
    code, out = run("status")
    assert code == 0 and long_name in out, out  # piped: never cut
    job_id = state.add_job(long_name, "j" * 50, 2, "/very/long/" + "l" * 120, None).job_id
    state.set_job_status(long_name, job_id, state.JOB_SUCCEEDED)
    code, out = run("queue", "--json")
    assert code == 0, out
    jobs = json.loads(out)
    assert jobs[0]["job_id"] == job_id and jobs[0]["status"] == "SUCCEEDED"
    assert jobs[0]["log_dir"] == "/very/long/" + "l" * 120
    code, out = run("queue", long_name)
    assert "/very/long/" + "l" * 120 in out and "j" * 50 in out and "SUCCEEDED" in out, out
    code, out = run("storage", "ls", "--json")
    assert code == 0 and json.loads(out) == []


def test_cluster_status_changes_follow_the_transition_table(home: Path) -> None:
    with pytest.raises(state.ClusterTransitionError):
        state.upsert_cluster("fresh", state.CLUSTER_UP, "docker", 1, {}, "never INIT first")
    state.upsert_cluster("fresh", state.CLUSTER_INIT, "docker", 1, {}, "launch: new cluster")
    state.set_cluster_status("fresh", state.CLUSTER_STOPPED, "stopped")
    with pytest.raises(state.ClusterTransitionError):
        state.set_cluster_status("fresh", state.CLUSTER_UP, "STOPPED never becomes UP directly")
    events = [(e.from_status, e.to_status) for e in state.cluster_events("fresh")]
    assert events == [(None, "INIT"), ("INIT", "STOPPED")]


def test_jobs_queue_piped_prints_every_column_whole(home: Path) -> None:
    from skycore.state import managed_jobs as jstate

    code, out = (lambda r: (r.exit_code, r.output))(
        CliRunner().invoke(jobs_cli, ["queue", "--json"], catch_exceptions=False)
    )
    assert code == 0 and json.loads(out) == []
    job = jstate.add_job("n" * 30, use_spot=True, strategy="FAILOVER", max_restarts_on_errors=0)
    reason = "r" * 150
    jstate.set_status(job.job_id, jstate.JobStatus.CANCELLED, reason)
    result = CliRunner().invoke(jobs_cli, ["queue"], catch_exceptions=False)
    assert result.exit_code == 0
    header = result.output.splitlines()[0]
    assert all(col in header for col in ("ID", "NAME", "STATUS", "CLUSTER", "REASON")), header
    line = next(line for line in result.output.splitlines() if "n" * 30 in line)
    assert line.split()[0] == str(job.job_id) and "CANCELLED" in line and reason in line
    rows = json.loads(
        CliRunner().invoke(jobs_cli, ["queue", "--json"], catch_exceptions=False).output
    )
    assert rows[0]["status"] == "CANCELLED" and rows[0]["status_reason"] == reason
    assert rows[0]["submitted_at"] <= time.time()


MISSING_COMMANDS = [
    ("status", "nope"),
    ("status", "nope", "--json"),
    ("queue", "nope"),
    ("logs", "nope"),
    ("cancel", "nope", "--all", "-y"),
    ("stop", "nope", "-y"),
    ("start", "nope", "-y"),
    ("exec", "nope", "echo hi"),
]


@pytest.mark.parametrize("args", MISSING_COMMANDS, ids=lambda a: "-".join(a[:1] + a[2:3]))
def test_a_missing_cluster_is_exit_2_and_one_sentence(home: Path, args: tuple[str, ...]) -> None:
    code, out = run(*args)
    assert code == 2, out
    assert " ".join(out.split()) == (
        "Error: Cluster 'nope' does not exist: 'skycore status' lists the clusters, and "
        "'skycore launch -c NAME TASK.yaml' creates one."
    )


def test_status_names_every_missing_cluster_and_lists_none_without_names(home: Path) -> None:
    assert run("status") == (0, "No existing clusters.\n")
    _record_cluster("here")
    code, out = run("status", "here", "gone", "lost")
    assert code == 2 and "Clusters 'gone', 'lost' do not exist" in " ".join(out.split()), out
    code, out = run("status", "here")
    assert code == 0 and "here" in out, out


def test_env_file_is_read_as_dotenv_and_env_wins(home: Path, tmp_path: Path) -> None:
    from skycore.cli.task_args import build_task

    (tmp_path / "t.yaml").write_text("envs:\n  A: yaml\n  B: yaml\n  C: yaml\nrun: x\n")
    (tmp_path / "vars.env").write_text(
        "# a comment\nexport A=from-file\nB='quoted value'  # trailing\n\nD=only-file\n"
    )
    task = build_task("t.yaml", ("A=from-env",), "vars.env", (), {})
    assert task.envs == {"A": "from-env", "B": "quoted value", "C": "yaml", "D": "only-file"}
    code, out = run("launch", "t.yaml", "--env-file", "vars.env", "--dryrun", "-c", "ok")
    assert code == 0, out
    (tmp_path / "bad.env").write_text("A=1\nnot a pair\n")
    code, out = run("launch", "t.yaml", "--env-file", "bad.env", "--dryrun", "-c", "ok")
    assert code == 2 and "--env-file bad.env, line 2: 'not a pair' is not KEY=VALUE" in out, out
    code, out = run("exec", "ok", "t.yaml", "--env-file", "missing.env")
    assert code == 2 and "does not exist" in out, out  # the cluster is checked first
    code, out = run("launch", "t.yaml", "--env-file", "missing.env", "--dryrun", "-c", "ok")
    assert code == 2 and "--env-file missing.env: cannot read it" in out, out


def test_jobs_launch_dryrun_shows_the_plan_with_overrides_and_submits_nothing(
    home: Path, tmp_path: Path
) -> None:
    from skycore.state import managed_jobs as jstate

    (tmp_path / "t.yaml").write_text("name: a\nrun: echo hi\n")
    args = ["launch", "t.yaml", "--dryrun", "--num-nodes", "2", "--use-spot", "-n", "train"]
    result = CliRunner().invoke(jobs_cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "Would submit managed job train: a new cluster of 2 node(s), spot" in out, out
    assert "Plan for task train" in out and "Nodes: 2" in out, out
    assert jstate.list_jobs() == []
    result = CliRunner().invoke(jobs_cli, ["launch", "t.yaml", "-d", "--follow"])
    assert result.exit_code == 2 and "--follow and -d/--detach-run" in result.output
