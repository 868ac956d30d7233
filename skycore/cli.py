"""The ``skycore`` command line (click + rich), shaped like SkyPilot's ``sky``.

launch, exec, status, stop, start, down, queue, logs, cancel, storage ls|delete.
Errors a user can cause print as one paragraph (exit 2, or the error's own exit code);
stage failures print the log tail and path (exit 1); failed jobs exit 100.
"""

from __future__ import annotations

import getpass
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from skycore import core, execution, provision, state
from skycore.cli_common import check_cluster_name, handle_errors, parse_envs
from skycore.cli_output import make_console, print_json
from skycore.cli_output import table as new_table
from skycore.config import load_config
from skycore.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])

console: Console = make_console()

JSON_HELP = "Print JSON (stable field names, listed in README) instead of a table."


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


def _age(ts: float | None) -> str:
    if not ts:
        return "-"
    secs = max(0, int(time.time() - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def _duration(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    secs = int((end or time.time()) - start)
    return f"{secs // 60}m {secs % 60}s" if secs >= 60 else f"{secs}s"


_STATUS_STYLE = {
    "UP": "green",
    "INIT": "yellow",
    "STOPPED": "dim",
    "SUCCEEDED": "green",
    "RUNNING": "cyan",
    "SETTING_UP": "cyan",
    "PENDING": "yellow",
    "FAILED": "red",
    "FAILED_SETUP": "red",
    "FAILED_DRIVER": "red",
    "CANCELLED": "dim",
}


def _styled(status: str) -> str:
    style = _STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skycore")
def cli() -> None:
    """skycore: launch tasks on clusters of nodes (SkyPilot-style)."""


# ---------------------------------------------------------------------------------------------
# launch / exec
# ---------------------------------------------------------------------------------------------


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
    """Print what launch would do: the plan of the storage engineer's plan module if present."""
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
            f"Job {result.job_id} on {result.cluster}: {_styled(result.job_status or '?')} "
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


# ---------------------------------------------------------------------------------------------
# status / lifecycle
# ---------------------------------------------------------------------------------------------


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("-v", "--verbose", is_flag=True, help="Show nodes and the status history.")
@click.option("-r", "--refresh", is_flag=True, help="Ask the provider for the nodes' state.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def status(clusters: tuple[str, ...], verbose: bool, refresh: bool, as_json: bool) -> None:
    """Show clusters (and with -v their nodes and every status change with its reason).

    With -r, clusters whose nodes no longer match the record (removed or stopped outside
    skycore) become INIT with the reason; 'skycore launch' repairs them.
    """
    for name in clusters:
        check_cluster_name(name, "CLUSTER")
    records = [r for r in state.list_clusters() if not clusters or r.name in clusters]
    if not records and not as_json:
        console.print("No existing clusters.")
        return
    config = load_config() if (refresh or verbose) else None
    if refresh and config is not None:
        refreshed = [core.refresh_status(r.name, config) for r in records]
        records = [r for r in refreshed if r is not None]
    if as_json:
        print_json([_cluster_json(r) for r in records])
        return
    table = new_table(("NAME", "LAUNCHED", "NODES", "RESOURCES", "STATUS", "REASON"))
    nodes_of: dict[str, Any] = {}
    for r in records:
        if config is not None:
            try:
                nodes_of[r.name] = provision.query_instances(r.provider, r.name, config)
            except provision.ProvisionError as e:
                nodes_of[r.name] = str(e)
        res = r.resources
        desc = f"{res.get('cloud') or r.provider}" + (
            f", {res['image_id']}" if res.get("image_id") else ""
        )
        table.add_row(
            r.name,
            _age(r.created_at),
            str(r.num_nodes),
            desc,
            _styled(r.status),
            escape(r.status_reason),
        )
    console.print(table)
    if not verbose:
        return
    for r in records:
        console.print(f"\n[bold]{r.name}[/bold]")
        nodes = nodes_of.get(r.name)
        info = provision.ClusterInfo.from_dict(r.handle) if r.handle else None
        for rank in range(r.num_nodes):
            st = nodes.get(rank) if isinstance(nodes, dict) else None
            ip = info.nodes[rank].ip if info and rank < len(info.nodes) else "-"
            shown = st.value if st else "gone"
            console.print(f"  node {rank} ({'head' if rank == 0 else 'worker'}): {shown}  ip={ip}")
        events = state.cluster_events(r.name)
        for ev in events:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ev.ts))
            change = (
                f"{ev.from_status or '-'} -> {ev.to_status}"
                if ev.from_status != ev.to_status
                else f"{ev.to_status} (no change)"
            )
            console.print(f"  [dim]{when}[/dim]  {change:<24} {escape(ev.reason)}")


def _cluster_json(r: state.ClusterRecord) -> dict[str, Any]:
    """A cluster for ``status --json``."""
    return {
        "name": r.name,
        "status": r.status,
        "status_reason": r.status_reason,
        "num_nodes": r.num_nodes,
        "provider": r.provider,
        "cloud": r.resources.get("cloud"),
        "use_spot": bool(r.resources.get("use_spot", False)),
        "image_id": r.resources.get("image_id"),
        "launched_at": r.created_at,
        "updated_at": r.updated_at,
        "node_ips": [n.get("ip") for n in (r.handle or {}).get("nodes", [])],
    }


def _each_cluster(names: tuple[str, ...], all_: bool, yes: bool, verb: str) -> list[str]:
    for name in names:
        check_cluster_name(name, "CLUSTER")
    if all_:
        names = tuple(r.name for r in state.list_clusters())
    if not names:
        raise UserError(f"Name the cluster(s) to {verb} (or pass --all).")
    if not yes and not click.confirm(f"{verb.capitalize()} {', '.join(names)}?", default=True):
        raise click.Abort()
    return list(names)


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("-a", "--all", "all_", is_flag=True, help="Every cluster.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def stop(clusters: tuple[str, ...], all_: bool, yes: bool) -> None:
    """Stop clusters: drain cached mounts (no write is lost), unmount, stop the nodes."""
    for name in _each_cluster(clusters, all_, yes, "stop"):
        execution.stop(name, console=console)


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("-a", "--all", "all_", is_flag=True, help="Every cluster.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def start(clusters: tuple[str, ...], all_: bool, yes: bool) -> None:
    """Start stopped clusters: resume the nodes and mount their storage again."""
    for name in _each_cluster(clusters, all_, yes, "start"):
        execution.start(name, console=console)


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("-a", "--all", "all_", is_flag=True, help="Every cluster.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def down(clusters: tuple[str, ...], all_: bool, yes: bool) -> None:
    """Tear clusters down: drain, unmount, remove nodes, delete persistent: false storage."""
    for name in _each_cluster(clusters, all_, yes, "tear down"):
        execution.down(name, console=console)


# ---------------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------------


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def queue(clusters: tuple[str, ...], as_json: bool) -> None:
    """Show the job queue of clusters (all by default)."""
    for name in clusters:
        check_cluster_name(name, "CLUSTER")
    names = list(clusters) or [r.name for r in state.list_clusters()]
    for name in names:
        if state.get_cluster(name) is None:
            raise UserError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    if as_json:
        print_json([_job_json(j) for name in names for j in core.refresh_jobs(name)])
        return
    for name in names:
        table = new_table(
            ("ID", "NAME", "SUBMITTED", "DURATION", "NODES", "STATUS", "LOG"),
            title=f"Job queue of {name}",
        )
        for j in reversed(core.refresh_jobs(name)):
            table.add_row(
                str(j.job_id),
                j.name or "-",
                _age(j.submitted_at),
                _duration(j.started_at, j.ended_at),
                str(j.num_nodes),
                _styled(j.status),
                escape(j.log_dir),
            )
        console.print(table)


def _job_json(j: state.JobRecord) -> dict[str, Any]:
    """A cluster job for ``queue --json``."""
    return {
        "cluster": j.cluster,
        "job_id": j.job_id,
        "name": j.name,
        "status": j.status,
        "num_nodes": j.num_nodes,
        "task_id": j.task_id,
        "exit_code": j.exit_code,
        "submitted_at": j.submitted_at,
        "started_at": j.started_at,
        "ended_at": j.ended_at,
        "log_dir": j.log_dir,
    }


@cli.command(name="logs")
@click.argument("cluster")
@click.argument("job_id", required=False, type=int)
@click.option("--follow/--no-follow", default=True, help="Keep printing until the job ends.")
@click.option("--status", "show_status", is_flag=True, help="Print only the job's status.")
@handle_errors()
def logs_cmd(cluster: str, job_id: int | None, follow: bool, show_status: bool) -> None:
    """Print a job's output (the latest job by default); follow it while it runs."""
    check_cluster_name(cluster, "CLUSTER")
    if state.get_cluster(cluster) is None:
        raise UserError(f"Cluster '{cluster}' does not exist ('skycore status' lists clusters).")
    jobs = core.refresh_jobs(cluster)
    if job_id is not None and not any(j.job_id == job_id for j in jobs):
        # Submitted by another terminal or skycore home: the head node's job table has it.
        known = state.get_cluster(cluster)
        if known is not None and core.adopt_job(known, job_id, load_config()):
            jobs = core.refresh_jobs(cluster)
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
    record = state.get_cluster(cluster)
    assert record is not None
    try:
        final, missing = core.print_job_log(record, job, follow, load_config())
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
    check_cluster_name(cluster, "CLUSTER")
    record = state.get_cluster(cluster)
    if record is None:
        raise UserError(f"Cluster '{cluster}' does not exist ('skycore status' lists clusters).")
    jobs = core.refresh_jobs(cluster)
    if all_:
        targets = [j for j in jobs if j.status not in state.JOB_TERMINAL]
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
    targets = [j for j in targets if j.status not in state.JOB_TERMINAL]
    if not targets:
        console.print("No unfinished jobs to cancel.")
        return
    if not yes and not click.confirm(
        f"Cancel job(s) {', '.join(str(j.job_id) for j in targets)} on {cluster}?", default=True
    ):
        raise click.Abort()
    for j, already in core.cancel_jobs(record, targets, load_config()):
        if already is None:
            console.print(f"Job {j.job_id} cancelled.")
        else:
            console.print(f"Job {j.job_id} already finished ({already}); nothing to cancel.")


# ---------------------------------------------------------------------------------------------
# storage
# ---------------------------------------------------------------------------------------------


@cli.group()
def storage() -> None:
    """Buckets skycore created or used."""


@storage.command(name="ls")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def storage_ls(as_json: bool) -> None:
    """List buckets."""
    from skycore.storage import catalog

    rows = catalog.list_storage_rows()
    if as_json:
        print_json(
            [
                {
                    "name": r.name,
                    "store": r.store,
                    "kind": r.kind,
                    "persistent": r.persistent,
                    "source": None if r.source == "-" else r.source,
                    "status": r.status,
                    "created_at": r.created_at,
                }
                for r in rows
            ]
        )
        return
    if not rows:
        console.print("No storage.")
        return
    table = new_table(("NAME", "STORE", "KIND", "PERSISTENT", "CREATED", "SOURCE", "STATUS"))
    for r in rows:
        table.add_row(
            r.name,
            r.store,
            r.kind,
            "yes" if r.persistent else "no",
            r.age,
            escape(r.source),
            _styled(r.status),
        )
    console.print(table)


@storage.command(name="delete")
@click.argument("names", nargs=-1)
@click.option("-a", "--all", "all_", is_flag=True, help="Every sky-managed bucket.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def storage_delete(names: tuple[str, ...], all_: bool, yes: bool) -> None:
    """Delete sky-managed buckets (never external ones)."""
    from skycore.storage import catalog

    if all_:
        names = tuple(r.name for r in catalog.list_storage_rows() if r.kind == "sky-managed")
    if not names:
        raise UserError("Name the storage to delete (see 'skycore storage ls'), or pass --all.")
    if not yes and not click.confirm(f"Delete storage {', '.join(names)}?", default=True):
        raise click.Abort()
    for name in names:
        try:
            console.print(catalog.delete_storage(name))
        except catalog.StorageInUse as e:
            if not all_:
                raise
            console.print(f"Kept {name}: {e}", highlight=False)


def _add_managed_jobs() -> None:
    """``skycore jobs ...``: the managed-jobs group (skycore.jobs.cli), if present."""
    try:
        from skycore.jobs.cli import jobs
    except ImportError:
        return
    cli.add_command(jobs)


_add_managed_jobs()


def main() -> None:
    """Entry point of the ``skycore`` script."""
    cli()


if __name__ == "__main__":
    main()
