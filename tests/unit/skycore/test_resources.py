"""A task's ``resources`` in SkyPilot's forms (skycore.resources): ``disk_size``, ``cpus`` and
``memory`` read to GiB and CPUs; what the local provider cannot give is refused in one
paragraph naming the field and why; typos stay "unknown field"."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from skycore.resources import Resources
from skycore.task import Task, TaskError
from tests.unit.skycore.task_messages import problems_of


def resources(value: dict[str, Any]) -> Resources:
    return Task.from_dict({"resources": value}).resources


def read(field: str, value: object, kind: type) -> Any:
    """``value`` given as the resources' ``field``, as read (checked to be a ``kind``)."""
    got = getattr(resources({field: value}), field)
    assert isinstance(got, kind), got
    return got


# Each field's accepted forms and what they are read as.
# fmt: off
DISK_SIZES = [(256, 256), ("256", 256), ("256GB", 256), ("256Gi", 256), ("256gb", 256),
              ("1TB", 1024), ("2048MB", 2), ("1Ti", 1024), ("100 GiB", 100), (100.0, 100)]
CPU_COUNTS = [(4, 4.0), ("4", 4.0), ("4+", 4.0), (0.5, 0.5), ("0.5+", 0.5), ("8 +", 8.0)]
MEMORY_SIZES = [(16, 16.0), ("16", 16.0), ("16+", 16.0), ("16GB", 16.0), ("16Gi", 16.0),
                ("512MB", 0.5), ("0.5", 0.5), ("32GB+", 32.0), (1.5, 1.5)]
# fmt: on


def refusal(value: dict[str, Any]) -> str:
    with pytest.raises(TaskError) as e:
        Task.from_dict({"resources": value})
    msg = e.value.message
    problems_of(msg)
    assert e.value.exit_code == 2
    return msg


@pytest.mark.parametrize(("value", "gib"), DISK_SIZES)
def test_disk_size_is_whole_gib(value: object, gib: int) -> None:
    assert read("disk_size", value, int) == gib


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("512MB", "resources.disk_size: '512MB' is 0.5 GiB, not a whole number of GiB; give"),
        (100.5, "resources.disk_size: 100.5 is 100.5 GiB, not a whole number of GiB"),
        (0, "resources.disk_size: 0 is not above 0; give whole GiB"),
        ("256+", "resources.disk_size: '256+' is not a disk size"),
        ("big", "resources.disk_size: 'big' is not a disk size; write a whole number of GiB"),
        (True, "resources.disk_size: True is not a disk size"),
        (-5, "resources.disk_size: -5 is not above 0"),
    ],
)
def test_a_bad_disk_size_names_it_and_the_fix(value: object, expected: str) -> None:
    msg = refusal({"disk_size": value})
    assert msg.startswith(expected), msg
    assert '"256GB"' in msg


@pytest.mark.parametrize(("value", "cpus"), CPU_COUNTS)
def test_cpus_at_least_is_read_as_the_number(value: object, cpus: float) -> None:
    assert read("cpus", value, float) == cpus


@pytest.mark.parametrize(("value", "gib"), MEMORY_SIZES)
def test_memory_in_gib(value: object, gib: float) -> None:
    assert read("memory", value, float) == gib


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"cpus": 0}, "resources.cpus: 0 is not a number of CPUs above 0"),
        ({"cpus": "four"}, "resources.cpus: 'four' is not a number of CPUs"),
        ({"cpus": "4GB"}, "resources.cpus: '4GB' is not a number of CPUs"),
        ({"cpus": False}, "resources.cpus: False is not a number of CPUs"),
        ({"memory": "16x"}, "resources.memory: '16x' is not a memory size above 0"),
        ({"memory": 0}, "resources.memory: 0 is not a memory size above 0"),
        ({"memory": ".inf"}, "resources.memory: '.inf' is not a memory size"),
    ],
)
def test_bad_cpus_and_memory_name_the_field(value: dict[str, Any], expected: str) -> None:
    msg = refusal(value)
    assert msg.startswith(expected)
    assert '"4+"' in msg or '"16+"' in msg  # the form that says "at least"


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("accelerators", "A100:8", "has no accelerators; remove accelerators, or run this task "
         "with SkyPilot on a cloud that has them"),
        ("accelerators", {"H100": 8}, "has no accelerators"),
        ("accelerator_args", {"tpu_vm": True}, "remove accelerator_args"),
        ("instance_type", "p4d.24xlarge", "remove instance_type and ask for what a node needs "
         "with cpus, memory and disk_size"),
        ("region", "us-east-1", "which is in no region; remove region"),
        ("zone", "us-east-1a", "which is in no zone; remove zone"),
        ("infra", "aws/us-east-1", "remove infra"),
        ("ports", [8080], "reachable at the node's 127.x address without opening it; remove ports"),
        ("disk_tier", "best", "remove disk_tier"),
        ("network_tier", "best", "remove network_tier"),
    ],
)  # fmt: skip
def test_what_the_local_provider_cannot_give_is_refused_with_why(
    field: str, value: object, why: str
) -> None:
    msg = refusal({field: value})
    assert msg.startswith(
        f"resources.{field}: skycore's local provider (Docker containers on this machine) "
    )
    assert why in msg and "unknown field" not in msg


def test_typos_stay_unknown_fields() -> None:
    assert "unknown field 'resources.clod' (did you mean 'cloud'?)" in refusal({"clod": "aws"})
    assert "(did you mean 'cpus'?)" in refusal({"cpu": 4})
    msg = refusal({"xyz": 1})
    # The refused fields are not offered as valid ones.
    assert "valid fields: 'cloud', 'use_spot', 'image_id', 'job_recovery', 'disk_size'" in msg
    assert "accelerators" not in msg


def test_every_resources_problem_in_one_message() -> None:
    msg = refusal({"accelerators": "A100", "disk_size": "1MB", "clod": "x"})
    problems = problems_of(msg)  # one line each
    starts = ("resources.accelerators:", "resources.disk_size:", "unknown field 'resources.clod'")
    assert len(problems) == 3, msg
    assert all(any(p.startswith(start) for p in problems) for start in starts), msg


def test_a_skypilot_resources_block_runs_unchanged() -> None:
    task = Task.from_dict(
        yaml.safe_load(
            """
resources:
  cloud: docker
  cpus: 4+
  memory: 16+
  disk_size: 256
  accelerators: null
run: echo hi
"""
        )
    )
    res = task.resources
    assert (res.cloud, res.cpus, res.memory, res.disk_size) == ("docker", 4.0, 16.0, 256)


def test_overrides_and_yaml_round_trip_the_new_fields() -> None:
    task = Task.from_dict(
        {"resources": {"cloud": "docker", "disk_size": "256GB", "cpus": "4+", "memory": "16GB"}}
    )
    dumped = task.to_yaml_dict()
    assert dumped["resources"] == {"cloud": "docker", "disk_size": 256, "cpus": 4.0, "memory": 16.0}
    assert Task.from_dict(yaml.safe_load(yaml.safe_dump(dumped))) == task
    spot = task.with_overrides(use_spot=True, num_nodes=2)
    assert (spot.resources.disk_size, spot.resources.cpus, spot.resources.memory) == (256, 4, 16)
    assert spot.resources.use_spot and spot.num_nodes == 2


@given(
    disk=st.one_of(st.none(), st.integers(1, 1 << 20)),
    cpus=st.one_of(st.none(), st.floats(0.01, 1024, allow_nan=False)),
    memory=st.one_of(st.none(), st.floats(0.01, 1 << 20, allow_nan=False)),
)
def test_any_valid_resources_round_trip(
    disk: int | None, cpus: float | None, memory: float | None
) -> None:
    value = {"disk_size": disk, "cpus": cpus, "memory": memory}
    task = Task.from_dict({"resources": {k: v for k, v in value.items() if v is not None}})
    assert (task.resources.disk_size, task.resources.cpus, task.resources.memory) == (
        disk,
        cpus,
        memory,
    )
    assert Task.from_dict(yaml.safe_load(yaml.safe_dump(task.to_yaml_dict()))) == task
