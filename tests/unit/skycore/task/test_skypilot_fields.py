"""SkyPilot task YAMLs get the answer docs/skypilot.md gives: the verdict of a field's row
("supported", "mapped" or "refused") is what Task.from_dict does with a YAML that uses it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest

from skycore.cli import cli as skycore_cli
from skycore.task import Task, TaskError
from tests.unit.skycore.task_messages import problems_of

TABLE = Path(__file__).resolve().parents[4] / "docs" / "skypilot.md"
CACHED = {"source": "s3://bucket-a", "mode": "MOUNT_CACHED"}


def verdict(row: str) -> str:
    """The first word of the skycore column of ``row``'s line in docs/skypilot.md."""
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] == f"`{row}`":
            return cells[2].split(":")[0].split()[0]
    raise AssertionError(f"docs/skypilot.md has no row for `{row}`")


def answer(data: dict[str, Any], secrets: dict[str, str] | None = None) -> tuple[str, str]:
    """("accepted", "") or ("refused", the one problem) for a task YAML."""
    try:
        Task.from_dict(data, secret_overrides=secrets)
    except TaskError as e:
        (problem,) = problems_of(e.message)
        return "refused", problem
    return "accepted", ""


@pytest.mark.parametrize(
    ("row", "data", "named"),
    [
        ("resources.accelerators", {"resources": {"accelerators": "A100:1"}}, "no accelerators"),
        ("resources.ports", {"resources": {"ports": 8080}}, "without opening it"),
        ("service", {"service": {"readiness_probe": "/", "replicas": 2}}, "no serving (SkyServe)"),
        ("config", {"config": {"docker": {"run_options": ["--shm-size=1g"]}}},
         "$SKYCORE_HOME/config.yaml"),
    ],
)  # fmt: skip
def test_a_refused_field_is_refused_with_the_reason(
    row: str, data: dict[str, Any], named: str
) -> None:
    assert verdict(row) == "refused"
    outcome, problem = answer(data)
    assert outcome == "refused"
    assert problem.startswith(f"{row}: ") and named in problem, problem
    assert "unknown field" not in problem


def test_config_names_the_overrides_it_refuses() -> None:
    _, problem = answer({"config": {"docker": {"run_options": ["--shm-size=1g"]}}})
    assert "(here: docker.run_options)" in problem and "docs/configuration.md" in problem


@pytest.mark.parametrize(
    ("row", "data", "check"),
    [
        ("resources.disk_size", {"resources": {"disk_size": 20}},
         lambda t: t.resources.disk_size == 20),
        ("file_mounts.<dst>.config.mount_cached",
         {"file_mounts": {"/ckpt": CACHED | {"config": {"mount_cached": {"transfers": 4}}}}},
         lambda t: t.storage_mounts["/ckpt"].mount_options.transfers == 4),
        ("file_mounts.<dst>.type",
         {"file_mounts": {"/ckpt": CACHED | {"type": "MODEL_CHECKPOINT_RW"}}},
         lambda t: t.storage_mounts["/ckpt"].mount_options.transfers == 8),
    ],
)  # fmt: skip
def test_a_supported_field_is_kept(row: str, data: dict[str, Any], check: Any) -> None:
    assert verdict(row) == "supported"
    assert answer(data) == ("accepted", "")
    assert check(Task.from_dict(data))


def test_secrets_are_supported_and_a_missing_one_names_the_flag() -> None:
    assert verdict("secrets") == "supported"
    data = {"secrets": {"HF_TOKEN": None}, "run": "echo $HF_TOKEN"}
    assert answer(data, {"HF_TOKEN": "hf-value"}) == ("accepted", "")
    assert Task.from_dict(data, secret_overrides={"HF_TOKEN": "hf-value"}).secrets == {
        "HF_TOKEN": "hf-value"
    }
    outcome, problem = answer(data)
    assert outcome == "refused" and "--secret HF_TOKEN" in problem


@pytest.mark.parametrize(
    ("row", "data", "check"),
    [
        ("resources.infra", {"resources": {"infra": "aws"}}, lambda t: t.resources.cloud == "aws"),
        ("resources.ephemeral_storage", {"resources": {"ephemeral_storage": "20GB"}},
         lambda t: t.resources.disk_size == 20),
    ],
)  # fmt: skip
def test_a_mapped_field_is_read_as_skycores(row: str, data: dict[str, Any], check: Any) -> None:
    assert verdict(row) == "mapped"
    assert answer(data) == ("accepted", "")
    assert check(Task.from_dict(data))


@pytest.mark.parametrize(
    "row",
    ["event_callback", "inputs", "outputs", "volumes", "pool", "managed_secrets",
     "api_server_access", "experimental", "resources.region", "resources.zone",
     "resources.instance_type", "resources.labels", "resources.autostop", "resources.any_of",
     "resources.ordered", "resources.priority", "resources.max_hourly_cost",
     "resources.local_disk", "resources.volumes", "resources.job_recovery.recover_on_exit_codes",
     "file_mounts.<dst>.mount_options"],
)  # fmt: skip
def test_every_other_refused_row_is_refused_not_unknown(row: str) -> None:
    assert verdict(row) == "refused"
    leaf = row.rsplit(".", 1)[-1]
    value: Any = {"config_overrides": {"kubernetes": {"pod_config": {}}}}
    data: dict[str, Any] = {leaf: value if leaf == "experimental" else "x"}
    if row.startswith("resources.job_recovery."):
        data = {"resources": {"job_recovery": data}}
    elif row.startswith("resources."):
        data = {"resources": data}
    elif row.startswith("file_mounts."):
        data = {"file_mounts": {"/ckpt": CACHED | data}}
    outcome, problem = answer(data)
    shown = row.replace("<dst>", "/ckpt")
    assert outcome == "refused" and problem.startswith(f"{shown}: "), problem
    assert "unknown field" not in problem


@pytest.mark.parametrize(("given", "cloud"), [("s3", "aws"), ("GCS", "gcp"), ("r2", "cloudflare")])
def test_resources_cloud_takes_a_store_name(given: str, cloud: str) -> None:
    assert Task.from_dict({"resources": {"cloud": given}}).resources.cloud == cloud
    _, problem = answer({"resources": {"cloud": "awz"}})
    assert "'aws' (or 's3')" in problem and "'gcp' (or 'gcs')" in problem


def command_rows() -> list[tuple[str, str, str]]:
    """(skycore command, what it is said to take, what it is said to lack) of each
    "supported as `skycore ...`" command row of docs/skypilot.md."""
    rows = []
    for line in TABLE.read_text().splitlines():
        match = re.match(
            r"\| `sky [a-z -]+` \| command \| supported as `skycore ([a-z ]+)`(.*)", line
        )
        if match:
            takes, _, lacks = match.group(2).partition("lacks")
            rows.append((match.group(1), takes, lacks))
    return rows


def flags(text: str) -> set[str]:
    """The options named in ``text``: `--x`, `-x`, and both sides of `--x`/`--y`."""
    return {f for span in re.findall(r"`(-[^`]+)`", text) for f in span.split("/")}


@pytest.mark.parametrize(("command", "takes", "lacks"), command_rows())
def test_a_command_rows_options_are_the_commands(command: str, takes: str, lacks: str) -> None:
    """The options a command row says skycore takes are its options; those it lacks are not."""
    group: click.Command = skycore_cli
    for word in command.split():
        assert isinstance(group, click.Group), command
        found = group.get_command(click.Context(group), word)
        assert found is not None, (
            f"docs/skypilot.md names 'skycore {command}', which does not exist"
        )
        group = found
    options = {
        o for p in group.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts
    }
    assert flags(takes) <= options, f"skycore {command} lacks {sorted(flags(takes) - options)}"
    assert not flags(lacks) & options, f"skycore {command} has {sorted(flags(lacks) & options)}"


def test_every_command_row_was_read() -> None:
    assert len(command_rows()) >= 16, command_rows()
