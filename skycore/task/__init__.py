"""Task YAML: parse, substitute ``${VAR}``, validate strictly, resolve file mounts.

``Task.from_yaml(path, env_overrides, secret_overrides=...)`` is the only entry point the CLI
needs. Every problem a user can cause becomes a ``TaskError`` naming the field path and the
fix: one paragraph for one problem; every problem of every layer (fields, resources, each
file_mounts entry, envs, secrets) at once, one line each, when there are several. SkyPilot
fields skycore lacks are refused with the reason (docs/skypilot.md), never as unknown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from skycore.errors import TaskError as TaskError
from skycore.errors import UserError
from skycore.resources import JobRecovery as JobRecovery
from skycore.resources import Resources as Resources
from skycore.storage import entry_spec
from skycore.storage.common import is_cloud_url, parse_url
from skycore.storage.entry_spec import StorageSpec
from skycore.storage.storage import Storage
from skycore.stores import store_for_cloud
from skycore.task.spec import MODELS, VAR_RE, Known, TaskSpec, merged, task_error, valid_parts
from skycore.task.spec import TaskProblems as TaskProblems
from skycore.task.spec import substitute as substitute
from skycore.user_paths import (
    UserPathError,
    check_node_path,
    os_error_problem,
    resolve_local_path,
    show,
)
from skycore.yaml_errors import Problems, pydantic_problems, short, yaml_problem


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
    ``--env`` overrides, ``secrets`` the ``--secret`` ones: both reach setup and run as
    environment variables; a secret's value is never shown (repr, ``to_yaml_dict``)."""

    name: str | None = None
    workdir: Path | None = None
    num_nodes: int = 1
    resources: Resources = field(default_factory=Resources)
    envs: dict[str, str] = field(default_factory=dict)
    file_mounts: dict[str, str] = field(default_factory=dict)
    storage_mounts: dict[str, Storage] = field(default_factory=dict)
    setup: str | None = None
    run: str | None = None
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_yaml(
        cls,
        path: str | Path,
        env_overrides: Mapping[str, str] | None = None,
        secret_overrides: Mapping[str, str] | None = None,
    ) -> Task:
        """Read, validate and resolve a task YAML file.

        ``env_overrides`` (from ``--env K=V``) win over the YAML's envs and fill ``${VAR}``
        in file_mounts; ``secret_overrides`` (``--secret K=V``) win over its secrets and may
        add more. Raises TaskError (exit code 2) on any problem.
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
            return cls.from_dict(data, env_overrides, secret_overrides)
        except TaskError as e:
            raise task_error(f"Invalid task {show(path.name)}: {e.message}") from None

    @classmethod
    def from_dict(
        cls,
        data: Any,
        env_overrides: Mapping[str, str] | None = None,
        secret_overrides: Mapping[str, str] | None = None,
    ) -> Task:
        """Validate an already-loaded YAML document (see from_yaml)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise TaskError(
                f"the task must be a mapping of fields (name, workdir, num_nodes, resources, "
                f"envs, secrets, file_mounts, setup, run), not a {type(data).__name__}."
            )
        found = Problems()
        try:
            spec = TaskSpec.model_validate(data)
        except ValidationError as e:
            found.lines(pydantic_problems(e, TaskSpec, models=MODELS))
            spec = valid_parts(data)
        envs, unset = merged("envs", spec.envs, env_overrides or {}, found)
        secrets, unset_secrets = merged("secrets", spec.secrets, secret_overrides or {}, found)
        for key in sorted(set(envs) & set(secrets)):
            found.add(
                f"{key} is both an env (envs or --env) and a secret (secrets or --secret); "
                "keep it in one: secrets, for a value that must not show in dumps and logs."
            )
        workdir = None
        if spec.workdir is not None:
            try:
                workdir = _local_path(spec.workdir, "workdir")
                if not workdir.is_dir():
                    raise TaskError(
                        f"workdir: '{show(spec.workdir)}' is a file; workdir must be a folder."
                    )
            except TaskError as e:
                found.message(e)
        known = Known(envs, secrets, unset | unset_secrets)
        file_mounts, storage_mounts = _resolve_file_mounts(spec, known, found)
        if found:
            raise task_error(found.text())
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
            secrets=secrets,
        )

    def to_yaml_dict(self) -> dict[str, Any]:
        """The task as a YAML-ready dict (resolved paths and envs), secrets redacted: their
        names without values. Loads back to an equal Task given the secrets
        (``from_dict(d, secret_overrides=task.secrets)``)."""
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
        if self.secrets:
            out["secrets"] = dict.fromkeys(self.secrets)
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
            return Task.from_dict(data, secret_overrides=self.secrets)
        except TaskError as e:
            raise task_error(f"Command-line override: {e.message}") from None


def _resolve_file_mounts(
    spec: TaskSpec, known: Known, found: Problems
) -> tuple[dict[str, str], dict[str, Storage]]:
    """The plain copies and the storage entries of ``spec``; each entry's problems added to
    ``found`` (every entry is checked)."""
    copies: dict[str, str] = {}
    storages: dict[str, Storage] = {}
    default_cls = store_for_cloud(spec.resources.cloud)
    default_store = default_cls.store_name if default_cls else None
    for raw_dst, value in spec.file_mounts.items():
        if set(VAR_RE.findall(f"{raw_dst} {value!r}")) & known.unset:
            continue
        field = f"file_mounts.{show(raw_dst)}"
        try:
            dst = _check_dst(substitute(str(raw_dst), known.envs, field, known.secrets), field)
            if dst in copies or dst in storages:
                raise TaskError(
                    f"{field}: the destination '{show(dst)}' is used twice; keep one entry."
                )
            if isinstance(value, dict):
                try:
                    sspec = StorageSpec.model_validate(value)
                except ValidationError as e:
                    found.lines(pydantic_problems(e, StorageSpec, f"{field}.", entry_spec.MODELS))
                    continue
                storages[dst] = _storage(sspec, known, field, default_store)
            elif isinstance(value, str):
                src = substitute(value, known.envs, field, known.secrets)
                url = is_cloud_url(src)
                copies[dst] = str(parse_url(src, field)) if url else str(_local_path(src, field))
            else:
                raise TaskError(
                    f"{field}: expected a path or URL (a plain copy) or a storage mapping with "
                    f"name, source, store, mode, persistent; got {short(value)}."
                )
        except UserError as e:
            found.message(e)
    return copies, storages


def _storage(sspec: StorageSpec, known: Known, field: str, default_store: str | None) -> Storage:
    """The Storage of one validated entry (StorageError / TaskError naming ``field``)."""
    sub = known.envs, known.secrets
    name = substitute(sspec.name, sub[0], f"{field}.name", sub[1]) if sspec.name else None
    source = substitute(sspec.source, sub[0], f"{field}.source", sub[1]) if sspec.source else None
    if source is not None and not is_cloud_url(source):
        source = str(_local_path(source, f"{field}.source"))
    return Storage.from_spec(
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
