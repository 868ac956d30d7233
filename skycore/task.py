"""Task YAML: parse, substitute ``${VAR}``, validate strictly, resolve file mounts.

``Task.from_yaml(path, env_overrides)`` is the only entry point the CLI needs. Every problem a
user can cause becomes a ``TaskError``: one paragraph naming the field path and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, Field, StrictInt, ValidationError

from skycore.errors import TaskError as TaskError
from skycore.resources import JobRecovery as JobRecovery
from skycore.resources import Resources as Resources
from skycore.storage import entry_spec
from skycore.storage.common import StorageError, is_cloud_url, parse_url
from skycore.storage.entry_spec import StorageSpec, StrictModel
from skycore.storage.storage import Storage
from skycore.stores import store_for_cloud
from skycore.user_paths import (
    UserPathError,
    check_node_path,
    os_error_problem,
    resolve_local_path,
    show,
)
from skycore.yaml_errors import yaml_problem


class TaskSpec(StrictModel):
    """The task YAML as written (before env substitution and path resolution)."""

    name: str | None = None
    workdir: str | None = None
    num_nodes: Annotated[StrictInt, Field(ge=1)] = 1
    resources: Resources = Field(default_factory=Resources)
    envs: dict[str, Any] = Field(default_factory=dict)
    file_mounts: dict[str, Any] = Field(default_factory=dict)
    setup: str | None = None
    run: str | None = None


_MODELS: dict[tuple[str, ...], type[BaseModel]] = {
    (): TaskSpec,
    ("resources",): Resources,
    ("resources", "job_recovery"): JobRecovery,
}

_VAR_RE = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _did_you_mean(key: str, model: type[BaseModel]) -> str:
    """The field of ``model`` closest to ``key``, or the list of the fields it takes (those a
    model only refuses, never dumped, left out)."""
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    fields = [name for name, f in model.model_fields.items() if not f.exclude]
    return "valid fields: " + ", ".join(f"'{c}'" for c in fields)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _format_errors(
    e: ValidationError,
    model: type[BaseModel],
    prefix: str = "",
    models: Mapping[tuple[str, ...], type[BaseModel]] = _MODELS,
) -> list[str]:
    """One readable line per pydantic error, field path first (``models``: the model of each
    nested mapping, by its path, for "did you mean")."""
    out = []
    for err in e.errors():
        loc = [str(p) for p in err["loc"]]
        path = prefix + ".".join(loc) if loc else prefix.rstrip(".") or "(top level)"
        if err["type"] == "extra_forbidden":
            parent = models.get(tuple(loc[:-1]), model)
            out.append(f"unknown field '{path}' ({_did_you_mean(loc[-1], parent)})")
        elif err["type"] == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            out.append(f"{path}: {_short(err['input'])} is not one of {expected}")
        elif err["type"] == "missing":
            out.append(f"{path}: required field is missing")
        elif err["type"] == "value_error":
            out.append(f"{path}: {err.get('ctx', {}).get('error', err['msg'])}")
        else:
            msg = err["msg"].replace("Input should be", "should be")
            out.append(f"{path}: {msg} (got {_short(err['input'])})")
    return out


def _problems(problems: list[str]) -> str:
    fix = "Fix it" if len(problems) == 1 else f"Fix these {len(problems)} problems"
    return "; ".join(problems) + f". {fix} and run again."


def substitute(text: str, envs: Mapping[str, str], field: str) -> str:
    """Fill every ``${VAR}`` in ``text`` from ``envs``; TaskError naming ``field`` if unset."""

    def fill(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in envs:
            raise TaskError(
                f"{field}: '${{{var}}}' is not defined. Add {var} under envs in the YAML or pass "
                f"--env {var}=VALUE."
            )
        return envs[var]

    return _VAR_RE.sub(fill, text)


def _check_dst(dst: str, field: str) -> str:
    try:
        check_node_path(dst, field)
    except UserPathError as e:
        raise TaskError(e.message) from None
    if is_cloud_url(dst):
        raise TaskError(
            f"{field}: the destination '{show(dst)}' is a URL; a destination is a path on the node "
            "(e.g. /data or ~/data). Put the URL on the right-hand side as the source."
        )
    if not (dst.startswith("/") or dst.startswith("~/")):
        raise TaskError(
            f"{field}: the destination '{show(dst)}' must be an absolute path or start with ~/ "
            f"(e.g. /{show(dst.lstrip('./~'))})."
        )
    if dst.endswith("/"):
        raise TaskError(
            f"{field}: the destination '{show(dst)}' must not end with '/'; write "
            f"'{show(dst.rstrip('/'))}'."
        )
    return dst


def _local_path(value: str, field: str) -> Path:
    """``value`` resolved by the one checked resolver (skycore.user_paths); TaskError naming
    ``field`` if it does not exist or cannot be used."""
    try:
        return resolve_local_path(value, field)
    except UserPathError as e:
        raise TaskError(e.message) from None


@dataclass
class Task:
    """A validated task. ``file_mounts`` holds plain copies (dst -> local Path or cloud URL);
    ``storage_mounts`` holds storage entries (dst -> Storage). ``envs`` already include
    ``--env`` overrides."""

    name: str | None = None
    workdir: Path | None = None
    num_nodes: int = 1
    resources: Resources = field(default_factory=Resources)
    envs: dict[str, str] = field(default_factory=dict)
    file_mounts: dict[str, str] = field(default_factory=dict)
    storage_mounts: dict[str, Storage] = field(default_factory=dict)
    setup: str | None = None
    run: str | None = None

    @classmethod
    def from_yaml(cls, path: str | Path, env_overrides: dict[str, str] | None = None) -> Task:
        """Read, validate and resolve a task YAML file.

        ``env_overrides`` (from ``--env K=V``) win over the YAML's envs and fill ``${VAR}``
        in file_mounts. Raises TaskError (one paragraph, exit code 2) on any problem.
        """
        try:
            resolved = resolve_local_path(path, "task file")
        except UserPathError as e:
            raise TaskError(
                f"Cannot read the task file '{e.shown}': it {e.problem}. {e.fix}"
            ) from None
        path = Path(os.path.expanduser(path))
        try:
            text = resolved.read_text()
        except (OSError, ValueError) as e:
            problem, fix = (
                os_error_problem(e, str(resolved))
                if isinstance(e, OSError)
                else (f"cannot be read as text ({e})", "Save it as UTF-8 text.")
            )
            raise TaskError(
                f"Cannot read the task file '{show(path)}': it {problem}. {fix}"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            problem = yaml_problem(e)
            raise TaskError(f"{show(path)} is not valid YAML{problem}. Fix the syntax.") from None
        try:
            return cls.from_dict(data, env_overrides)
        except TaskError as e:
            raise TaskError(f"Invalid task {show(path.name)}: {e.message}") from None

    @classmethod
    def from_dict(cls, data: Any, env_overrides: Mapping[str, str] | None = None) -> Task:
        """Validate an already-loaded YAML document (see from_yaml)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise TaskError(
                f"the task must be a mapping of fields (name, workdir, num_nodes, resources, "
                f"envs, file_mounts, setup, run), not a {type(data).__name__}."
            )
        try:
            spec = TaskSpec.model_validate(data)
        except ValidationError as e:
            problems = _format_errors(e, TaskSpec)
            raise TaskError(_problems(problems)) from None
        envs = _merge_envs(spec.envs, env_overrides or {})
        workdir = None
        if spec.workdir is not None:
            workdir = _local_path(spec.workdir, "workdir")
            if not workdir.is_dir():
                raise TaskError(
                    f"workdir: '{show(spec.workdir)}' is a file; workdir must be a folder."
                )
        file_mounts, storage_mounts = _resolve_file_mounts(spec, envs)
        return cls(
            name=spec.name,
            workdir=workdir,
            num_nodes=spec.num_nodes,
            resources=spec.resources,
            envs=envs,
            file_mounts=file_mounts,
            storage_mounts=storage_mounts,
            setup=spec.setup,
            run=spec.run,
        )

    def to_yaml_dict(self) -> dict[str, Any]:
        """The task as a YAML-ready dict (resolved paths and envs); loads back to an equal Task."""
        out: dict[str, Any] = {"num_nodes": self.num_nodes}
        if self.name is not None:
            out["name"] = self.name
        if self.workdir is not None:
            out["workdir"] = str(self.workdir)
        res = self.resources.model_dump(exclude_defaults=True)
        if res:
            out["resources"] = res
        if self.envs:
            out["envs"] = dict(self.envs)
        mounts: dict[str, Any] = dict(self.file_mounts)
        for dst, storage in self.storage_mounts.items():
            mounts[dst] = storage.to_spec_dict()
        if mounts:
            out["file_mounts"] = mounts
        for key in ("setup", "run"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def with_overrides(
        self,
        *,
        name: str | None = None,
        num_nodes: int | None = None,
        cloud: str | None = None,
        use_spot: bool | None = None,
        workdir: str | None = None,
        image_id: str | None = None,
    ) -> Task:
        """This task with command-line overrides (SkyPilot's ``--num-nodes``, ``--cloud``, ...)
        applied; they win over the YAML and are validated like it (TaskError naming the
        option and the fix)."""
        data = self.to_yaml_dict()
        resources = dict(data.get("resources", {}))
        given = {
            "--name": ("name", name, data),
            "--num-nodes": ("num_nodes", num_nodes, data),
            "--workdir": ("workdir", workdir, data),
            "--cloud": ("cloud", cloud, resources),
            "--use-spot": ("use_spot", use_spot, resources),
            "--image-id": ("image_id", image_id, resources),
        }
        for flag, (key, value, target) in given.items():
            if value is None:
                continue
            if key == "workdir":
                resolved = _local_path(str(value), flag)
                if not resolved.is_dir():
                    raise TaskError(
                        f"{flag}: '{show(value)}' is a file; {flag} must be a folder. Give the "
                        "folder to sync to ~/sky_workdir."
                    )
                value = str(resolved)
            target[key] = value
        if resources:
            data["resources"] = resources
        try:
            return Task.from_dict(data)
        except TaskError as e:
            raise TaskError(f"Command-line override: {e.message}") from None


def _merge_envs(envs: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for key, value in {**envs, **overrides}.items():
        if not _ENV_NAME_RE.fullmatch(key):
            raise TaskError(
                f"envs: '{key}' is not a valid variable name; use letters, digits and "
                "underscores, not starting with a digit."
            )
        if key in overrides:
            merged[key] = str(overrides[key])
        elif value is None:
            raise TaskError(
                f"envs.{key} has no value; pass --env {key}=VALUE or give it a value in the YAML."
            )
        elif not isinstance(value, str | int | float | bool):
            raise TaskError(
                f"envs.{key}: expected a string or number, got {_short(value)}; quote the value."
            )
        elif isinstance(value, bool):
            merged[key] = "true" if value else "false"
        else:
            merged[key] = str(value)
    return merged


def _resolve_file_mounts(
    spec: TaskSpec, envs: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, Storage]]:
    copies: dict[str, str] = {}
    storages: dict[str, Storage] = {}
    default_cls = store_for_cloud(spec.resources.cloud)
    default_store = default_cls.store_name if default_cls else None
    for raw_dst, value in spec.file_mounts.items():
        field = f"file_mounts.{show(raw_dst)}"
        dst = _check_dst(substitute(str(raw_dst), envs, field), field)
        if dst in copies or dst in storages:
            raise TaskError(
                f"{field}: the destination '{show(dst)}' is used twice; keep one entry."
            )
        if isinstance(value, str):
            src = substitute(value, envs, field)
            if is_cloud_url(src):
                try:
                    copies[dst] = str(parse_url(src, field))
                except StorageError as e:
                    raise TaskError(e.message) from None
            else:
                copies[dst] = str(_local_path(src, field))
        elif isinstance(value, dict):
            try:
                sspec = StorageSpec.model_validate(value)
            except ValidationError as e:
                problems = _format_errors(e, StorageSpec, f"{field}.", entry_spec.MODELS)
                raise TaskError(_problems(problems)) from None
            name = substitute(sspec.name, envs, f"{field}.name") if sspec.name else None
            source = substitute(sspec.source, envs, f"{field}.source") if sspec.source else None
            if source is not None and not is_cloud_url(source):
                source = str(_local_path(source, f"{field}.source"))
            try:
                storages[dst] = Storage.from_spec(
                    name=name,
                    source=source,
                    store=sspec.store,
                    mode=sspec.mode,
                    persistent=sspec.persistent,
                    transfers=sspec.transfers,
                    upload_concurrency=sspec.upload_concurrency,
                    chunk_size=sspec.chunk_size,
                    default_store=default_store,
                    field=field,
                    mount_type=sspec.type,
                    config=sspec.config,
                )
            except StorageError as e:
                raise TaskError(e.message) from None
        else:
            raise TaskError(
                f"{field}: expected a path or URL (a plain copy) or a storage mapping with name, "
                f"source, store, mode, persistent; got {_short(value)}."
            )
    return copies, storages
