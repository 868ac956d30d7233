"""A task's secrets (SkyPilot's ``secrets:``): envs of setup and run whose values come from the
YAML or ``--secret`` and are never shown; and a task's problems of every layer told at once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from skycore.backend.handle import ClusterHandle
from skycore.backend.job_parts import job_env
from skycore.task import Task, TaskError
from tests.unit.skycore.task_messages import problems_of

VALUE = "hf-secret-value-0001"


def problems(data: dict[str, Any], **given: Any) -> list[str]:
    with pytest.raises(TaskError) as e:
        Task.from_dict(data, **given)
    assert e.value.exit_code == 2
    return problems_of(e.value.message)


def test_a_secret_comes_from_the_yaml_or_the_overrides() -> None:
    task = Task.from_dict({"secrets": {"A": "yaml", "B": None}}, secret_overrides={"B": VALUE})
    assert task.secrets == {"A": "yaml", "B": VALUE}
    # --secret may add one the YAML does not declare, and wins over the YAML's value.
    task = Task.from_dict({"secrets": {"A": "yaml"}}, None, {"A": VALUE, "C": "c"})
    assert task.secrets == {"A": VALUE, "C": "c"}


def test_a_secret_without_value_names_the_flag() -> None:
    (problem,) = problems({"secrets": {"HF_TOKEN": None}})
    assert problem.startswith("secrets.HF_TOKEN has no value; pass --secret HF_TOKEN=VALUE")
    assert "--secret HF_TOKEN to take it from your environment" in problem


def test_a_key_in_envs_and_secrets_is_refused() -> None:
    (problem,) = problems({"envs": {"K": "1"}, "secrets": {"K": "2"}})
    assert problem.startswith("K is both an env (envs or --env) and a secret")
    (problem,) = problems({}, env_overrides={"K": "1"}, secret_overrides={"K": "2"})
    assert problem.startswith("K is both")


def test_a_list_of_secret_names_is_refused_with_why() -> None:
    (problem,) = problems({"secrets": ["HF_TOKEN"]})
    assert problem.startswith("secrets: a list of names refers to secrets kept on SkyPilot's")


def test_secrets_are_not_filled_into_file_mounts(tmp_path: Path) -> None:
    data = {"secrets": {"B": "bucket"}, "file_mounts": {"/d": "s3://${B}/x"}}
    (problem,) = problems(data)
    assert problem.startswith("file_mounts./d: '${B}' is a secret, and secrets are not filled")


def test_values_are_redacted_wherever_the_task_is_shown() -> None:
    task = Task.from_dict({"secrets": {"HF_TOKEN": None}, "run": "x"}, None, {"HF_TOKEN": VALUE})
    dumped = task.to_yaml_dict()
    assert dumped["secrets"] == {"HF_TOKEN": None}
    assert VALUE not in yaml.safe_dump(dumped) and VALUE not in repr(task)
    # The dump loads back given the secrets (a managed job's controller does so).
    assert Task.from_dict(dumped, secret_overrides=task.secrets) == task
    (missing,) = problems(dumped)  # without them: the flag is named
    assert "--secret HF_TOKEN" in missing
    assert task.with_overrides(num_nodes=2).secrets == {"HF_TOKEN": VALUE}


def test_secrets_reach_setup_and_run_like_envs() -> None:
    task = Task.from_dict({"envs": {"E": "e"}, "secrets": {"S": VALUE}})
    handle = cast(ClusterHandle, SimpleNamespace(info=SimpleNamespace(ips=["10.0.0.1"]), name="c"))
    env = job_env(handle, task, 0, 1, "task-1")
    assert env["E"] == "e" and env["S"] == VALUE


def test_from_yaml_keeps_positional_env_overrides(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("envs: {A: null}\nsecrets: {S: null}\nrun: echo\n")
    task = Task.from_yaml(f, {"A": "1"}, secret_overrides={"S": VALUE})
    assert (task.envs, task.secrets) == ({"A": "1"}, {"S": VALUE})


def test_every_layer_is_checked_at_once(tmp_path: Path) -> None:
    f = tmp_path / "X.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "resources": {"accelerator": "A100"},
                "envs": {"OK": "1", "MISSING": None},
                "file_mounts": {
                    "/ckpt": {"source": "s3://b", "mode": "MOUNT_CACHD"},
                    "/m/${MISSING}": "s3://b/x",  # waits for its env: no second problem
                    "/a/": "s3://b/y",
                },
            }
        )
    )
    with pytest.raises(TaskError) as e:
        Task.from_yaml(f)
    message = e.value.message
    assert message.startswith("Invalid task X.yaml: 4 problems:\n- ")
    starts = [
        "unknown field 'resources.accelerator' (did you mean",
        "envs.MISSING has no value; pass --env MISSING=VALUE",
        "file_mounts./ckpt.mode: 'MOUNT_CACHD' is not one of",
        "file_mounts./a/: the destination '/a/' must not end with '/'",
    ]
    found = problems_of(message)
    assert sorted(next(s for s in starts if p.startswith(s)) for p in found) == sorted(starts)


def test_one_problem_keeps_the_one_paragraph_shape() -> None:
    (problem,) = problems({"resources": {"accelerators": "A100:1"}})
    assert problem.endswith("Fix it and run again.") and "\n" not in problem
