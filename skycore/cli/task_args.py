"""The task arguments ``launch``, ``exec`` and ``jobs launch`` share: the entrypoint, the
overrides (``--num-nodes``, ``--cloud`` ...), ``--env``, ``--env-file`` and ``--secret``."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from skycore.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])

OVERRIDE_FLAGS = {
    "task_name": "--name",
    "workdir": "--workdir",
    "num_nodes": "--num-nodes",
    "cloud": "--cloud",
    "use_spot": "--use-spot",
    "image_id": "--image-id",
}
"""Each override's python name and its option (``-n/--name`` is ``task_name``)."""


def task_options(fn: F) -> F:
    """SkyPilot's task override options (they win over the YAML), then ``--env``,
    ``--env-file`` and ``--secret``."""
    options = [
        click.option("-n", "--name", "task_name", help="Task name (overrides the YAML's)."),
        click.option("--workdir", help="Local folder synced to ~/sky_workdir (overrides)."),
        click.option("--num-nodes", type=int, help="Number of nodes (overrides num_nodes)."),
        click.option("--cloud", help="resources.cloud (overrides)."),
        click.option(
            "--use-spot/--no-use-spot", default=None, help="resources.use_spot (overrides)."
        ),
        click.option("--image-id", help="resources.image_id, e.g. docker:IMAGE (overrides)."),
        click.option("--env", "envs", multiple=True, help="KEY=VALUE, or KEY to take it here."),
        click.option(
            "--env-file",
            type=click.Path(dir_okay=False),
            help="A dotenv file of KEY=VALUE lines (--env wins over it).",
        ),
        click.option(
            "--secret",
            "secrets",
            multiple=True,
            help="KEY=VALUE, or KEY to take it from here; a secret env never printed.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def parse_pairs(pairs: tuple[str, ...], option: str = "--env") -> dict[str, str]:
    """``KEY=VALUE`` options as a dict; ``KEY`` alone takes KEY's value from the local
    environment (as SkyPilot does). A clear UserError for an unset or malformed one."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not key:
            raise UserError(
                f"{option} {pair!r}: expected KEY=VALUE or KEY (e.g. {option} RUN_ID=abc)."
            )
        if not sep:
            if key not in os.environ:
                raise UserError(
                    f"{option} {key}: {key} is not set in your environment; pass "
                    f"{option} {key}=VALUE or export {key} first."
                )
            value = os.environ[key]
        found[key] = value
    return found


def parse_env_file(path: str | None) -> dict[str, str]:
    """The variables of a dotenv file (``KEY=VALUE`` lines, ``#`` comments, ``export``
    prefixes, quotes); UserError naming ``--env-file``, the line and the fix."""
    if path is None:
        return {}
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    try:
        text = Path(path).expanduser().read_text()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UserError(
            f"--env-file {path}: cannot read it ({reason}). Give a readable dotenv file of "
            "KEY=VALUE lines."
        ) from None
    for binding in parse_stream(io.StringIO(text)):
        if binding.error or (binding.key is not None and binding.value is None):
            line = binding.original.string.strip()
            raise UserError(
                f"--env-file {path}, line {binding.original.line}: {line!r} is not KEY=VALUE. "
                "Write KEY=VALUE (a '#' starts a comment; 'export ' before KEY is allowed)."
            )
    values = dotenv_values(stream=io.StringIO(text))
    return {k: v or "" for k, v in values.items()}


def task_envs(env_file: str | None, envs: tuple[str, ...]) -> dict[str, str]:
    """``--env-file`` then ``--env`` (which wins)."""
    return {**parse_env_file(env_file), **parse_pairs(envs)}


def load_task(entrypoint: str, envs: dict[str, str], secrets: dict[str, str]) -> Any:
    """The task of ``entrypoint``: a task YAML, else a shell command to run."""
    from skycore.task import Task
    from skycore.user_paths import path_exists

    if not entrypoint:
        raise UserError("ENTRYPOINT is empty: give a task YAML file or a command to run.")
    # Task.from_yaml checks the path with the one resolver (skycore.user_paths); a string
    # that names nothing and has no YAML suffix is a command.
    if Path(entrypoint).suffix in (".yaml", ".yml") or path_exists(entrypoint):
        return Task.from_yaml(entrypoint, envs, secret_overrides=secrets)
    # A bare command: `skycore exec CLUSTER 'echo hi'`.
    return Task.from_dict({"run": entrypoint}, envs, secret_overrides=secrets)


def given_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides given on the command line (click leaves the others None)."""
    return {k: v for k, v in overrides.items() if v is not None}


def override_flags(overrides: dict[str, Any]) -> dict[str, str]:
    """Task field -> the option that set it, for messages (``name`` for ``task_name``)."""
    flags: dict[str, str] = {}
    for key, value in given_overrides(overrides).items():
        flag = OVERRIDE_FLAGS[key]
        if key == "use_spot" and value is False:
            flag = "--no-use-spot"
        flags["name" if key == "task_name" else key] = flag
    return flags


def build_task(
    entrypoint: str,
    envs: tuple[str, ...],
    env_file: str | None,
    secrets: tuple[str, ...],
    overrides: dict[str, Any],
) -> Any:
    """The task with its envs, secrets and command-line overrides applied."""
    task = load_task(entrypoint, task_envs(env_file, envs), parse_pairs(secrets, "--secret"))
    given = given_overrides(overrides)
    if not given:
        return task
    return task.with_overrides(
        name=given.get("task_name"),
        num_nodes=given.get("num_nodes"),
        cloud=given.get("cloud"),
        use_spot=given.get("use_spot"),
        workdir=given.get("workdir"),
        image_id=given.get("image_id"),
    )
