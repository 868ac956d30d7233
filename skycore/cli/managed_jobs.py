"""``skycore jobs``: launch, queue, logs, cancel managed jobs (a click group).

The main CLI adds it with ``cli.add_command(jobs)`` (``python -m skycore.cli jobs ...`` runs
it like the ``skycore`` script). It reaches managed jobs through ``skycore.managed.core`` and
reads their records from ``skycore.state.managed_jobs``. Errors a user can cause print as one
paragraph (exit 2), never a traceback.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from skycore.cli.common import handle_errors
from skycore.cli.output import is_terminal, make_console, print_json
from skycore.cli.output import table as new_table
from skycore.cli.task_args import build_task, task_options
from skycore.errors import UserError
from skycore.humanize import ago
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus

F = TypeVar("F", bound=Callable[..., Any])

console: Console = make_console()

# Exit codes of `jobs launch` (without -d) / `jobs logs --follow` (as SkyPilot's JobExitCode).
EXIT_CODES = {
    JobStatus.SUCCEEDED: 0,
    JobStatus.FAILED: 100,
    JobStatus.FAILED_SETUP: 100,
    JobStatus.FAILED_NO_RESOURCE: 101,
    JobStatus.CANCELLED: 103,
}

_STYLE = {
    JobStatus.PENDING: "yellow",
    JobStatus.STARTING: "cyan",
    JobStatus.RUNNING: "cyan",
    JobStatus.RECOVERING: "magenta",
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.FAILED_SETUP: "red",
    JobStatus.FAILED_NO_RESOURCE: "red",
    JobStatus.CANCELLED: "dim",
}


_errors = handle_errors("Interrupted (the job goes on; 'skycore jobs cancel ID' stops it).")


def _styled(status: JobStatus) -> str:
    style = _STYLE.get(status, "")
    return f"[{style}]{status.value}[/{style}]" if style else status.value


def _short(text: str, limit: int = 90) -> str:
    """One line; shortened only at a terminal (a pipe gets every character)."""
    text = " ".join(text.split())
    if not is_terminal():
        return text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _duration(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    secs = int((end or time.time()) - start)
    return f"{secs // 60}m {secs % 60}s" if secs >= 60 else f"{secs}s"


def _write(chunk: str) -> None:
    sys.stdout.write(chunk)
    sys.stdout.flush()


def _follow(job_id: int) -> NoReturn:
    job = core.follow_log(job_id, True, _write)
    console.print(f"Managed job {job_id} {_styled(job.status)}: {escape(job.status_reason)}")
    sys.exit(EXIT_CODES.get(job.status, 1))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def jobs() -> None:
    """Managed jobs: run a task on its own cluster, recover it from preemptions."""


@jobs.command("launch")
@click.argument("entrypoint")
@task_options
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@click.option("--dryrun", is_flag=True, help="Show what would happen; change nothing.")
@click.option("-d", "--detach-run", is_flag=True, help="Return once the job is submitted.")
@click.option("--follow", "follow_alias", is_flag=True, hidden=True, help="The default now.")
@_errors
def launch_cmd(
    entrypoint: str,
    envs: tuple[str, ...],
    env_file: str | None,
    secrets: tuple[str, ...],
    yes: bool,
    dryrun: bool,
    detach_run: bool,
    follow_alias: bool,
    **overrides: Any,
) -> None:
    """Launch a task YAML as a managed job: its own cluster, torn down when it ends,
    relaunched from where it left off (its checkpoints) after a preemption. Streams the
    job's log until it ends (exit 0, 100 failed, 101 no resources, 103 cancelled); with
    -d, returns once it is submitted. -n names the job."""
    if follow_alias and detach_run:
        raise UserError("--follow and -d/--detach-run contradict each other; give one of them.")
    task = build_task(entrypoint, envs, env_file, secrets, overrides)
    if dryrun:
        _dryrun(task)
        return
    if not yes and not click.confirm(
        f"Launching managed job {task.name or '(unnamed)'} ({task.num_nodes} node(s)). Proceed?",
        default=True,
    ):
        raise click.Abort()
    job = _submit(task)
    spot = " on spot nodes" if job.use_spot else ""
    console.print(
        f"Managed job [bold]{job.job_id}[/bold]{escape(f' ({job.name})' if job.name else '')} "
        f"submitted{spot}; cluster {escape(job.cluster)}. Log: {escape(job.log_path)}",
    )
    if not detach_run:
        _follow(job.job_id)
    console.print(
        f"'skycore jobs queue' shows it; 'skycore jobs logs {job.job_id} --follow' streams it."
    )


def _submit(task: Any) -> jstate.ManagedJob:
    """Submit ``task`` as a managed job, through a private copy of its YAML (resolved paths,
    envs and overrides; the job's folder keeps its own copy). The copy names the secrets
    only; their values go to the controller through ``core.launch``."""
    import yaml

    with tempfile.TemporaryDirectory(prefix="skycore-job-") as folder:
        path = Path(folder) / "task.yaml"
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(task.to_yaml_dict(), sort_keys=False))
        return core.launch(
            path, name=task.name, use_spot=bool(task.resources.use_spot), secrets=task.secrets
        )


def _dryrun(task: Any) -> None:
    """What ``jobs launch`` would do: the job on its own new cluster, and the task's plan."""
    from skycore.config import load_config
    from skycore.core.fit import provider_of
    from skycore.plan import dryrun_plan

    provider_of(task)
    res = task.resources
    recovery = res.job_recovery.strategy if res.job_recovery else "FAILOVER"
    console.print(
        f"Would submit managed job {escape(task.name or '(unnamed)')}: a new cluster of "
        f"{task.num_nodes} node(s), {'spot' if res.use_spot else 'on-demand'}, recovery "
        f"{recovery}, torn down when the job ends."
    )
    plan = dryrun_plan(task, load_config())
    if plan is not None:
        console.print(plan)


@jobs.command("queue")
@click.argument("job_ids", nargs=-1, type=int)
@click.option("-v", "--verbose", is_flag=True, help="Also show each job's status history.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (field names in README).")
@_errors
def queue_cmd(job_ids: tuple[int, ...], verbose: bool, as_json: bool) -> None:
    """Show managed jobs: status, recoveries, durations (newest first)."""
    found = core.queue()
    if job_ids:
        for job_id in job_ids:
            core.get(job_id)
        found = [j for j in found if j.job_id in job_ids]
    if as_json:
        print_json([_job_json(j) for j in found])
        return
    if not found:
        console.print("No managed jobs.")
        return
    table = new_table(
        ("ID", "NAME", "STATUS", "RECOVERIES", "SUBMITTED", "DURATION", "CLUSTER", "REASON")
    )
    for job in found:
        recoveries = str(job.recovery_count)
        if job.restarts_on_errors:
            recoveries += f" (+{job.restarts_on_errors} restart)"
        table.add_row(
            str(job.job_id),
            escape(job.name or "-"),
            _styled(job.status),
            recoveries,
            ago(job.submitted_at),
            _duration(job.started_at, job.ended_at),
            escape(job.cluster),
            escape(_short(job.status_reason)),
        )
    console.print(table)
    if verbose:
        for job in found:
            console.print(f"\n[bold]Job {job.job_id}[/bold] history:")
            for ev in jstate.events(job.job_id):
                stamp = time.strftime("%H:%M:%S", time.localtime(ev.ts))
                change = (
                    f"{ev.from_status or '-'} -> {ev.to_status}"
                    if ev.from_status != ev.to_status
                    else "note"
                )
                console.print(
                    f"  {stamp}.{int(ev.ts * 1000) % 1000:03d}  {change:<26} {escape(ev.reason)}"
                )


def _job_json(job: jstate.ManagedJob) -> dict[str, Any]:
    """A managed job for ``jobs queue --json``."""
    return {
        "job_id": job.job_id,
        "name": job.name,
        "status": job.status.value,
        "status_reason": job.status_reason,
        "cluster": job.cluster,
        "task_id": job.task_id,
        "use_spot": job.use_spot,
        "recovery_strategy": job.strategy,
        "recovery_count": job.recovery_count,
        "restarts_on_errors": job.restarts_on_errors,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "log_path": job.log_path,
    }


@jobs.command("logs")
@click.argument("job_id", type=int)
@click.option("--follow/--no-follow", default=False, help="Keep streaming until the job ends.")
@_errors
def logs_cmd(job_id: int, follow: bool) -> None:
    """Print a managed job's log (controller lines and the nodes' output)."""
    core.adopt_orphans()
    if follow:
        _follow(job_id)
    core.follow_log(job_id, False, _write)


@jobs.command("cancel")
@click.argument("job_ids", nargs=-1, type=int)
@click.option("-a", "--all", "all_jobs", is_flag=True, help="Cancel every unfinished job.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@click.option("--wait", "wait_s", type=float, default=0.0, help="Wait up to N s for the end.")
@_errors
def cancel_cmd(job_ids: tuple[int, ...], all_jobs: bool, yes: bool, wait_s: float) -> None:
    """Cancel managed jobs: the run stops, cached mounts drain, the cluster is torn down."""
    if not job_ids and not all_jobs:
        raise UserError("Name the job(s) to cancel (skycore jobs cancel ID ...) or pass --all.")
    if not yes and not click.confirm(
        f"Cancel {'all unfinished managed jobs' if all_jobs else 'job(s) ' + str(list(job_ids))}?",
        default=True,
    ):
        raise click.Abort()
    flagged = core.cancel(list(job_ids), all_jobs=all_jobs)
    for job_id in job_ids:
        if job_id not in flagged:
            job = core.get(job_id)
            console.print(f"Job {job_id} is already {_styled(job.status)}; nothing to cancel.")
    for job_id in flagged:
        console.print(f"Job {job_id}: cancel requested (the controller drains and tears down).")
        if wait_s > 0:
            try:
                job = core.wait(job_id, wait_s)
                console.print(f"Job {job_id} {_styled(job.status)}.")
            except TimeoutError as e:
                console.print(f"Job {job_id}: {escape(str(e))} after {wait_s:.0f} s.")
