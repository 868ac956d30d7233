"""``skycore launch`` and ``skycore exec``: a task through the stage lists of execution."""

from __future__ import annotations

import getpass
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape

from skycore import execution, state
from skycore.cli.app import cli, console, styled
from skycore.cli.common import check_cluster_name, handle_errors, parse_envs
from skycore.config import load_config
from skycore.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])


def _default_cluster_name() -> str:
    user = "".join(c for c in getpass.getuser().lower() if c.isalnum())[:8] or "user"
    suffix = hashlib.sha256(f"{time.time_ns()}".encode()).hexdigest()[:4]
    return f"sky-{suffix}-{user}"


def _load_task(entrypoint: str, envs: dict[str, str]) -> Any:
    from skycore.task import Task
    from skycore.user_paths import path_exists

    if not entrypoint:
        raise UserError("ENTRYPOINT is empty: give a task YAML file or a command to run.")
    # Task.from_yaml checks the path with the one resolver (skycore.user_paths); a string
    # that names nothing and has no YAML suffix is a command.
    if Path(entrypoint).suffix in (".yaml", ".yml") or path_exists(entrypoint):
        return Task.from_yaml(entrypoint, envs)
    # A bare command: `skycore exec CLUSTER 'echo hi'`.
    return Task.from_dict({"run": entrypoint}, envs)


def _task_options(fn: F) -> F:
    """SkyPilot's task override options: they win over the YAML."""
    options = [
        click.option("-n", "--name", "task_name", help="Task name (overrides the YAML's)."),
        click.option("--workdir", help="Local folder synced to ~/sky_workdir (overrides)."),
        click.option("--num-nodes", type=int, help="Number of nodes (overrides num_nodes)."),
        click.option("--cloud", help="resources.cloud (overrides)."),
        click.option(
            "--use-spot/--no-use-spot", default=None, help="resources.use_spot (overrides)."
        ),
        click.option("--image-id", help="resources.image_id, e.g. docker:IMAGE (overrides)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _apply_overrides(task: Any, overrides: dict[str, Any]) -> Any:
    given = {k: v for k, v in overrides.items() if v is not None}
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


@cli.command()
@click.argument("entrypoint")
@click.option("-c", "--cluster", "cluster", help="Cluster name (new or existing).")
@click.option("--env", "envs", multiple=True, help="KEY=VALUE, or KEY to take it from here.")
@_task_options
@click.option("--down", is_flag=True, help="Tear the cluster down when the job finishes.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@click.option("--no-setup", is_flag=True, help="Skip the setup commands.")
@click.option("--dryrun", is_flag=True, help="Show what would happen; change nothing.")
@click.option("-d", "--detach-run", is_flag=True, help="Return once the run started.")
@handle_errors()
def launch(
    entrypoint: str,
    cluster: str | None,
    envs: tuple[str, ...],
    down: bool,
    yes: bool,
    no_setup: bool,
    dryrun: bool,
    detach_run: bool,
    **overrides: Any,
) -> None:
    """Launch a task YAML on a cluster (created if needed), then run it.

    Stages: PROVISION, SYNC_WORKDIR, SYNC_FILE_MOUNTS, SETUP, EXEC (and DOWN with --down).
    """
    name = check_cluster_name(
        cluster if cluster is not None else _default_cluster_name(), "-c/--cluster"
    )
    if down and detach_run:
        raise UserError(
            "--down with -d/--detach-run would tear the cluster down under the running job; "
            "use one of them (with -d, run 'skycore down' once 'skycore queue' shows it ended)."
        )
    task = _apply_overrides(_load_task(entrypoint, parse_envs(envs)), overrides)
    config = load_config()
    if dryrun:
        _dryrun(task, name, config)
        return
    from skycore.plan import order_notes

    for line in order_notes(task):
        console.print(escape(line))
    record = state.get_cluster(name)
    if not yes:
        if record is None:
            prompt = f"Launching a new cluster '{name}' ({task.num_nodes} node(s)). Proceed?"
        else:
            prompt = f"Running the task on existing cluster '{name}' ({record.status}). Proceed?"
        if not click.confirm(prompt, default=True):
            raise click.Abort()
    result = execution.launch(
        task,
        name,
        down=down,
        no_setup=no_setup,
        console=console,
        config=config,
        detach_run=detach_run,
    )
    _finish(result)


def _dryrun(task: Any, name: str, config: Any) -> None:
    """Print what launch would do: the plan of the storage engineer's plan module if present.
    Resources this machine cannot give (cpus, memory, disk_size) are refused as launch
    would refuse them."""
    from skycore import core

    core.provider_of(task)
    record = state.get_cluster(name)
    if record is None:
        console.print(f"Would create cluster {name} with {task.num_nodes} node(s).")
    else:
        console.print(f"Would reuse cluster {name} ({record.status}).")
    res = task.resources
    console.print(
        f"Task {escape(task.name or '-')}: {task.num_nodes} node(s), cloud "
        f"{escape(res.cloud or 'default')}, {'spot' if res.use_spot else 'on-demand'}"
        + (f", image {escape(res.image_id)}" if res.image_id else "")
        + (f", workdir {escape(str(task.workdir))}" if task.workdir else "")
        + "."
    )
    try:
        from skycore.plan import dryrun_plan
    except ImportError:
        for dst, src in task.file_mounts.items():
            console.print(f"  copy {escape(str(src))} -> {escape(dst)}")
        for dst, st in task.storage_mounts.items():
            console.print(f"  {st.mode.value} {escape(st.bucket_url)} -> {escape(dst)}")
        console.print("Dry run: nothing was changed.")
        return
    plan = dryrun_plan(task, config)
    if plan is not None:
        console.print(plan)


def _finish(result: execution.RunResult) -> None:
    total = sum(s.seconds for s in result.stages)
    if result.job_id is not None:
        console.print(
            f"Job {result.job_id} on {result.cluster}: {styled(result.job_status or '?')} "
            f"({total:.1f}s). Logs: {escape(str(result.log_dir))}"
        )
        torn_down = any(s.stage is execution.Stage.DOWN and s.ok for s in result.stages)
        if torn_down:
            console.print(f"[dim]Cluster {result.cluster} was torn down (--down).[/dim]")
        else:
            console.print(
                f"[dim]skycore logs {result.cluster} {result.job_id}  |  "
                f"skycore queue {result.cluster}  |  skycore down {result.cluster}[/dim]"
            )
    if result.exit_code:
        sys.exit(result.exit_code)


@cli.command(name="exec")
@click.argument("cluster")
@click.argument("entrypoint")
@click.option("--env", "envs", multiple=True, help="KEY=VALUE, or KEY to take it from here.")
@_task_options
@click.option("-d", "--detach-run", is_flag=True, help="Return once the run started.")
@handle_errors()
def exec_cmd(
    cluster: str, entrypoint: str, envs: tuple[str, ...], detach_run: bool, **overrides: Any
) -> None:
    """Run a task YAML (or a shell command) on an UP cluster: sync workdir, run.

    No provisioning and no setup; the cluster must be UP.
    """
    check_cluster_name(cluster, "CLUSTER")
    task = _apply_overrides(_load_task(entrypoint, parse_envs(envs)), overrides)
    result = execution.exec_task(task, cluster, console=console, detach_run=detach_run)
    _finish(result)
