"""``skycore queue``, ``logs`` and ``cancel``: the jobs of a cluster."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.markup import escape

from skycore.cli.app import JSON_HELP, cli, console, styled
from skycore.cli.common import handle_errors, require_cluster, require_clusters
from skycore.cli.output import print_json
from skycore.cli.output import table as new_table
from skycore.config import load_config
from skycore.core.job_logs import print_job_log
from skycore.core.jobs import adopt_job, cancel_jobs, refresh_jobs
from skycore.errors import UserError
from skycore.humanize import ago
from skycore.state.clusters import get_cluster, list_clusters
from skycore.state.jobs import JOB_TERMINAL, JobRecord


def _duration(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    secs = int((end or time.time()) - start)
    return f"{secs // 60}m {secs % 60}s" if secs >= 60 else f"{secs}s"


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def queue(clusters: tuple[str, ...], as_json: bool) -> None:
    """Show the job queue of clusters (all by default)."""
    require_clusters(clusters)
    names = list(clusters) or [r.name for r in list_clusters()]
    if as_json:
        print_json([_job_json(j) for name in names for j in refresh_jobs(name)])
        return
    for name in names:
        table = new_table(
            ("ID", "NAME", "SUBMITTED", "DURATION", "NODES", "STATUS", "LOG"),
            title=f"Job queue of {name}",
        )
        for j in reversed(refresh_jobs(name)):
            table.add_row(
                str(j.job_id),
                j.name or "-",
                ago(j.submitted_at),
                _duration(j.started_at, j.ended_at),
                str(j.num_nodes),
                styled(j.status),
                escape(j.log_dir),
            )
        console.print(table)


_JOB_JSON_FIELDS = (
    "cluster",
    "job_id",
    "name",
    "status",
    "num_nodes",
    "task_id",
    "exit_code",
    "submitted_at",
    "started_at",
    "ended_at",
    "log_dir",
)


def _job_json(j: JobRecord) -> dict[str, Any]:
    """A cluster job for ``queue --json`` (the stable field names listed in README)."""
    return {f: getattr(j, f) for f in _JOB_JSON_FIELDS}


@cli.command(name="logs")
@click.argument("cluster")
@click.argument("job_id", required=False, type=int)
@click.option("--follow/--no-follow", default=True, help="Keep printing until the job ends.")
@click.option("--status", "show_status", is_flag=True, help="Print only the job's status.")
@handle_errors()
def logs_cmd(cluster: str, job_id: int | None, follow: bool, show_status: bool) -> None:
    """Print a job's output (the latest job by default); follow it while it runs."""
    require_cluster(cluster)
    jobs = refresh_jobs(cluster)
    if job_id is not None and not any(j.job_id == job_id for j in jobs):
        # Submitted by another terminal or skycore home: the head node's job table has it.
        known = get_cluster(cluster)
        if known is not None and adopt_job(known, job_id, load_config()):
            jobs = refresh_jobs(cluster)
    if not jobs:
        raise UserError(f"Cluster '{cluster}' has no jobs yet. Run one with 'skycore exec'.")
    job = jobs[-1] if job_id is None else next((j for j in jobs if j.job_id == job_id), None)
    if job is None:
        raise UserError(
            f"Cluster '{cluster}' has no job {job_id}; 'skycore queue {cluster}' lists its jobs."
        )
    if show_status:
        console.print(job.status)
        return
    record = get_cluster(cluster)
    assert record is not None
    try:
        final, missing = print_job_log(record, job, follow, load_config())
    except KeyboardInterrupt:
        console.print(f"[dim]Stopped following job {job.job_id}; it keeps running.[/dim]")
        raise
    if missing:
        console.print(f"[yellow]{escape(missing)}[/yellow]")
    if final is not None:
        console.print(f"[dim]Job {job.job_id}: {final}[/dim]")


@cli.command()
@click.argument("cluster")
@click.argument("job_ids", nargs=-1, type=int)
@click.option("-a", "--all", "all_", is_flag=True, help="Every unfinished job.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def cancel(cluster: str, job_ids: tuple[int, ...], all_: bool, yes: bool) -> None:
    """Cancel running jobs of a cluster (kills their processes on every node)."""
    record = require_cluster(cluster)
    jobs = refresh_jobs(cluster)
    if all_:
        targets = [j for j in jobs if j.status not in JOB_TERMINAL]
    elif job_ids:
        targets = [j for j in jobs if j.job_id in job_ids]
        missing = set(job_ids) - {j.job_id for j in targets}
        if missing:
            raise UserError(
                f"Cluster '{cluster}' has no job(s) {sorted(missing)}; 'skycore queue "
                f"{cluster}' lists its jobs."
            )
    else:
        raise UserError("Name the job id(s) to cancel, or pass --all.")
    targets = [j for j in targets if j.status not in JOB_TERMINAL]
    if not targets:
        console.print("No unfinished jobs to cancel.")
        return
    if not yes and not click.confirm(
        f"Cancel job(s) {', '.join(str(j.job_id) for j in targets)} on {cluster}?", default=True
    ):
        raise click.Abort()
    for j, already in cancel_jobs(record, targets, load_config()):
        if already is None:
            console.print(f"Job {j.job_id} cancelled.")
        else:
            console.print(f"Job {j.job_id} already finished ({already}); nothing to cancel.")
