"""The task YAML's top level as written (``TaskSpec``), the SkyPilot fields skycore refuses
there with the reason, envs and secrets with their overrides, and ``${VAR}`` substitution."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StrictInt, ValidationError

from skycore.errors import TaskError
from skycore.resources import JobRecovery, Resources
from skycore.storage.entry_spec import StrictModel, refused
from skycore.yaml_errors import Problems, ProblemsError, short

_SECRET_STORE = (
    "refers to secrets kept on SkyPilot's API server; skycore has no secret store: declare "
    "each under secrets as NAME: null and pass --secret NAME"
)
_INTERNAL = "is written by SkyPilot itself, never by hand; remove it"
_REFUSED = {
    "service": "skycore has no serving (SkyServe): its provider runs tasks, not replicated "
    "services behind a load balancer; run this YAML with 'sky serve up' on SkyPilot, or remove "
    "service to run it as a task",
    "pool": "skycore has no worker pools; remove pool and run the task with skycore launch or "
    "skycore jobs launch",
    "event_callback": "skycore runs no callback on task events; remove event_callback (run it "
    "at the end of run instead)",
    "inputs": "only SkyPilot's optimizer reads it (to price moving data between clouds), and "
    "skycore has one provider and no optimizer; remove inputs (mount the data with file_mounts)",
    "outputs": "only SkyPilot's optimizer reads it (to price moving data between clouds), and "
    "skycore has one provider and no optimizer; remove outputs",
    "volumes": "skycore has no volumes (disks of their own); mount a bucket with a file_mounts "
    "storage entry, or size each node's disk with resources.disk_size, and remove volumes",
    "managed_secrets": _SECRET_STORE,
    "api_server_access": "skycore has no API server to give the task access to; remove "
    "api_server_access",
    "volume_mounts": _INTERNAL,
    "file_mounts_mapping": _INTERNAL,
}
"""Top-level fields SkyPilot has that skycore refuses, and why."""


def _key_paths(value: Any) -> str:
    if not isinstance(value, dict):
        return short(value)
    paths = [
        f"{k}.{sub}" if isinstance(v, dict) else str(k)
        for k, v in value.items()
        for sub in (v if isinstance(v, dict) else [None])
    ]
    return ", ".join(paths[:4]) + (", ..." if len(paths) > 4 else "") or "none"


def _no_overrides(v: Any) -> Any:
    if v is None:
        return v
    if isinstance(v, dict) and "config_overrides" in v:
        v = v["config_overrides"]
    raise ValueError(
        f"SkyPilot's per-task overrides of ~/.sky/config.yaml (here: {_key_paths(v)}) have no "
        "equivalent in skycore, which reads its settings only from $SKYCORE_HOME/config.yaml "
        "(docker.host, docker.image, logs_dir and one section per store; docs/configuration.md)"
        "; remove it, and set what skycore has there"
    )


def _local_workdir(v: Any) -> Any:
    if isinstance(v, dict):
        raise ValueError(
            "a git repository (url, ref) as workdir is SkyPilot's; skycore syncs a local "
            "folder: clone the repository and give its path"
        )
    return v


def _secrets_mapping(v: Any) -> Any:
    if isinstance(v, list):
        raise ValueError(f"a list of names {_SECRET_STORE}")
    return v


class TaskSpec(StrictModel):
    """The task YAML as written (before env substitution and path resolution)."""

    name: str | None = None
    workdir: Annotated[str | None, BeforeValidator(_local_workdir)] = None
    num_nodes: Annotated[StrictInt, Field(ge=1)] = 1
    resources: Resources = Field(default_factory=Resources)
    envs: dict[str, Any] = Field(default_factory=dict)
    secrets: Annotated[dict[str, Any], BeforeValidator(_secrets_mapping)] = Field(
        default_factory=dict
    )
    file_mounts: dict[str, Any] = Field(default_factory=dict)
    setup: str | None = None
    run: str | None = None

    config: Annotated[Any, BeforeValidator(_no_overrides)] = Field(default=None, exclude=True)
    experimental: Annotated[Any, BeforeValidator(_no_overrides)] = Field(default=None, exclude=True)
    service: Annotated[Any, refused(_REFUSED["service"])] = Field(default=None, exclude=True)
    pool: Annotated[Any, refused(_REFUSED["pool"])] = Field(default=None, exclude=True)
    event_callback: Annotated[Any, refused(_REFUSED["event_callback"])] = Field(
        default=None, exclude=True
    )
    inputs: Annotated[Any, refused(_REFUSED["inputs"])] = Field(default=None, exclude=True)
    outputs: Annotated[Any, refused(_REFUSED["outputs"])] = Field(default=None, exclude=True)
    volumes: Annotated[Any, refused(_REFUSED["volumes"])] = Field(default=None, exclude=True)
    managed_secrets: Annotated[Any, refused(_SECRET_STORE)] = Field(default=None, exclude=True)
    api_server_access: Annotated[Any, refused(_REFUSED["api_server_access"])] = Field(
        default=None, exclude=True
    )
    volume_mounts: Annotated[Any, refused(_INTERNAL)] = Field(default=None, exclude=True)
    file_mounts_mapping: Annotated[Any, refused(_INTERNAL)] = Field(default=None, exclude=True)


MODELS: dict[tuple[str, ...], type[BaseModel]] = {
    (): TaskSpec,
    ("resources",): Resources,
    ("resources", "job_recovery"): JobRecovery,
}

VAR_RE = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TaskProblems(ProblemsError, TaskError):
    """Several problems of one task, one line each."""


def task_error(message: str) -> TaskError:
    return TaskProblems(message) if "\n" in message else TaskError(message)


def valid_parts(data: Mapping[Any, Any]) -> TaskSpec:
    """The fields of ``data`` that are valid on their own, so that the others' entries are
    still checked after a problem elsewhere (of an invalid resources, its cloud if valid)."""
    kept: dict[str, Any] = {}
    for key, value in data.items():
        tries = [value]
        if key == "resources" and isinstance(value, dict) and "cloud" in value:
            tries.append({"cloud": value["cloud"]})
        for v in tries:
            try:
                TaskSpec.model_validate({key: v})
            except ValidationError:
                continue
            kept[key] = v
            break
    return TaskSpec.model_validate(kept)


def substitute(
    text: str, envs: Mapping[str, str], field: str, secrets: Mapping[str, str] | None = None
) -> str:
    """Fill every ``${VAR}`` in ``text`` from ``envs``; TaskError naming ``field`` if unset
    or one of ``secrets`` (as in SkyPilot, secrets reach setup and run only)."""

    def fill(m: re.Match[str]) -> str:
        var = m.group(1)
        if var in envs:
            return envs[var]
        if secrets is not None and var in secrets:
            raise TaskError(
                f"{field}: '${{{var}}}' is a secret, and secrets are not filled into "
                "file_mounts (a bucket name or path is shown and recorded); give the value as "
                "an env, or use the secret in setup or run only."
            )
        raise TaskError(
            f"{field}: '${{{var}}}' is not defined. Add {var} under envs in the YAML or pass "
            f"--env {var}=VALUE."
        )

    return VAR_RE.sub(fill, text)


def merged(
    kind: str, given: Mapping[str, Any], overrides: Mapping[str, str], found: Problems
) -> tuple[dict[str, str], set[str]]:
    """``kind`` (envs or secrets) with their overrides, as strings, and the names left
    without a usable value (a problem each, added to ``found``)."""
    out: dict[str, str] = {}
    unset: set[str] = set()
    for key, value in {**given, **overrides}.items():
        problem = None
        if not _ENV_NAME_RE.fullmatch(key):
            problem = (
                f"{kind}: '{key}' is not a valid variable name; use letters, digits and "
                "underscores, not starting with a digit."
            )
        elif key in overrides:
            out[key] = str(overrides[key])
        elif value is None and kind == "envs":
            problem = (
                f"envs.{key} has no value; pass --env {key}=VALUE or give it a value in the YAML."
            )
        elif value is None:
            problem = (
                f"secrets.{key} has no value; pass --secret {key}=VALUE, or --secret {key} to "
                "take it from your environment (a secret's value stays out of the YAML)."
            )
        elif not isinstance(value, str | int | float | bool):
            problem = (
                f"{kind}.{key}: expected a string or number, got {short(value)}; quote the value."
            )
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
        if problem is not None:
            found.add(problem)
            unset.add(key)
    return out, unset


@dataclass(frozen=True)
class Known:
    """What ``${VAR}`` in file_mounts may name: envs; not secrets; ``unset``: names whose
    own problem is reported already (an entry naming one is checked once it is fixed)."""

    envs: Mapping[str, str]
    secrets: Mapping[str, str]
    unset: set[str]
