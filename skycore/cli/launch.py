"""``skycore launch`` and ``skycore exec``: a task through the stage lists of execution."""

from __future__ import annotations

import getpass
import hashlib
import sys
import time
from typing import Any

import click
from rich.markup import escape

from skycore import execution
from skycore.cli.app import cli, console, styled
from skycore.cli.common import check_cluster_name, handle_errors, require_cluster
from skycore.cli.task_args import build_task, override_flags, task_options
from skycore.config import load_config
from skycore.core.fit import provider_of
from skycore.errors import UserError
from skycore.state.clusters import get_cluster


def _default_cluster_name() -> str:
    user = "".join(c for c in getpass.getuser().lower() if c.isalnum())[:8] or "user"
    suffix = hashlib.sha256(f"{time.time_ns()}".encode()).hexdigest()[:4]
    return f"sky-{suffix}-{user}"


@cli.command()
@click.argument("entrypoint")
@click.option("-c", "--cluster", "cluster", help="Cluster name (new or existing).")
@task_options
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
    env_file: str | None,
    secrets: tuple[str, ...],
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
    task = build_task(entrypoint, envs, env_file, secrets, overrides)
    config = load_config()
    if dryrun:
        _dryrun(task, name, config)
        return
    from skycore.plan import order_notes

    for line in order_notes(task):
        console.print(escape(line))
    record = get_cluster(name)
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
    """Print what launch would do (``skycore.plan``), changing nothing. What this machine
    cannot give (cpus, memory, disk_size, an image not on the engine) is refused as launch
    would refuse it."""
    from skycore.plan import dryrun_plan

    provider_of(task)
    record = get_cluster(name)
    if record is None:
        console.print(f"Would create cluster {name} with {task.num_nodes} node(s).")
    else:
        console.print(f"Would reuse cluster {name} ({record.status}).")
    res = task.resources
    console.print(
        f"Task {escape(task.name or '(unnamed)')}: {task.num_nodes} node(s), cloud "
        f"{escape(res.cloud or 'default')}, {'spot' if res.use_spot else 'on-demand'}"
        + (f", image {escape(res.image_id)}" if res.image_id else "")
        + (f", workdir {escape(str(task.workdir))}" if task.workdir else "")
        + "."
    )
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
@task_options
@click.option("-d", "--detach-run", is_flag=True, help="Return once the run started.")
@handle_errors()
def exec_cmd(
    cluster: str,
    entrypoint: str,
    envs: tuple[str, ...],
    env_file: str | None,
    secrets: tuple[str, ...],
    detach_run: bool,
    **overrides: Any,
) -> None:
    """Run a task YAML (or a shell command) on an UP cluster: sync workdir, run.

    No provisioning and no setup; the cluster must be UP. --num-nodes, --cloud, --use-spot
    and --image-id must fit the cluster as it was launched (a new cluster: launch -c).
    """
    require_cluster(cluster)
    task = build_task(entrypoint, envs, env_file, secrets, overrides)
    result = execution.exec_task(
        task,
        cluster,
        console=console,
        detach_run=detach_run,
        options=override_flags(overrides),
    )
    _finish(result)
