"""The staged pipeline: launch / exec / stop / start / down as lists of stages.

launch: PROVISION -> SYNC_WORKDIR -> SYNC_FILE_MOUNTS -> SETUP -> EXEC [-> DOWN]
exec:   SYNC_WORKDIR -> EXEC (on an UP cluster)

Each stage prints one line with its duration; node output streams to the terminal and to
``~/sky_logs/<timestamp>/``. A failed stage shows the last lines of its log and the log path.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from skycore import logs
from skycore.backend.handle import ClusterHandle, get_handle, resources_of
from skycore.backend.mounts import STORE_WAIT_S, remount
from skycore.backend.provision import node_problems
from skycore.backend.sync import (
    WORKDIR,
    check_bucket_sources,
    start_storage_prepare,
    sync_file_mounts,
    sync_workdir,
)
from skycore.config import SkycoreConfig, load_config
from skycore.core import clusters, fit, jobs, shutdown
from skycore.stages import (
    EXIT_JOB_CANCELLED,
    EXIT_JOB_FAILED,
    LOG_NAMES,
    Reporter,
    RunResult,
    Stage,
    StageResult,
)
from skycore.state.clusters import CLUSTER_STOPPED, CLUSTER_UP, add_cluster_event, get_cluster
from skycore.state.jobs import (
    JOB_CANCELLED,
    JOB_FAILED,
    JOB_FAILED_SETUP,
    JOB_PENDING,
    JOB_RUNNING,
    JOB_SETTING_UP,
    JOB_SUCCEEDED,
    JobRecord,
    get_job,
)
from skycore.task import Task


def _console(console: Console | None) -> Console:
    return console or Console()


# ---------------------------------------------------------------------------------------------
# launch
# ---------------------------------------------------------------------------------------------


def launch(
    task: Task,
    cluster_name: str,
    *,
    down: bool = False,
    no_setup: bool = False,
    console: Console | None = None,
    config: SkycoreConfig | None = None,
    stream: bool = True,
    task_id: str | None = None,
    detach_run: bool = False,
) -> RunResult:
    """Launch ``task`` on ``cluster_name``: provision (or reuse), sync, set up, run.

    ``detach_run`` (``-d``): return once the run started on the nodes (the cluster owns it;
    'skycore logs' follows it, 'skycore queue' shows its outcome).

    ``task_id`` fixes SKYPILOT_TASK_ID (managed jobs keep one across recoveries); by default
    each job gets a new one.

    Returns the stage timings and the job's outcome; ``exit_code`` is 0, 100 (FAILED or
    FAILED_SETUP) or 103 (cancelled). Infrastructure failures raise StageError; user mistakes
    raise a UserError subclass.
    """
    clusters.check_name(cluster_name)
    config = config or load_config()
    console = _console(console)
    provider = fit.provider_of(task)
    log_dir = logs.new_log_dir(config)
    result = RunResult(cluster_name, log_dir)
    rep = Reporter(console, result)
    console.print(
        f"Launching task{f' {task.name!r}' if task.name else ''} on cluster "
        f"[bold]{escape(cluster_name)}[/bold] ({task.num_nodes} node(s)). Logs: {log_dir}",
        highlight=False,
    )
    touched = False  # --down only tears down what this launch got to provision
    background = ThreadPoolExecutor(
        max_workers=max(1, min(16, len(task.storage_mounts))), thread_name_prefix="prepare"
    )
    prepared: dict[str, Future[None]] | None = None
    try:
        with clusters.cluster_lock(cluster_name):
            record = get_cluster(cluster_name)
            if record is not None:
                fit.check_same_resources(record, task)
            fm_log = log_dir / LOG_NAMES[Stage.SYNC_FILE_MOUNTS]
            checked = check_bucket_sources(task, config, fm_log)  # before any change
            touched = True
            if task.storage_mounts:  # buckets and uploads need no node: made as nodes come up
                prepared = start_storage_prepare(task, config, fm_log, background, checked=checked)
            # INIT (SYNCING) from here until the workdir and every mount are in place
            # (Ctrl-C, SIGKILL meanwhile: the next launch repairs it).
            handle = _launch_provision(task, cluster_name, provider, config, rep, log_dir)
            n_copies, n_storage = _sync_workdir_and_file_mounts(
                handle, task, rep, log_dir, prepared
            )
            clusters.mark_ready(
                cluster_name, handle.num_nodes, f"{n_copies + n_storage} file mount(s)"
            )
            job = jobs.submit_job(handle, task, log_dir, JOB_SETTING_UP, task_id)
            result.job_id = job.job_id
            if not _setup(handle, task, job, rep, log_dir, no_setup, stream):
                current = get_job(cluster_name, job.job_id)
                result.job_status = current.status if current else JOB_FAILED_SETUP
                cancelled = result.job_status == JOB_CANCELLED
                result.exit_code = EXIT_JOB_CANCELLED if cancelled else EXIT_JOB_FAILED
                return result
        _exec(handle, task, job, rep, log_dir, stream, result, detach_run)
        return result
    finally:
        background.shutdown(wait=True, cancel_futures=True)
        if down and touched and get_cluster(cluster_name) is not None:
            # (a launch refused before its cluster was recorded has nothing to tear down,
            # and its own error is the one to show)
            _down_stage(cluster_name, config, rep, log_dir)


def _launch_provision(
    task: Task,
    name: str,
    provider: str,
    config: SkycoreConfig,
    rep: Reporter,
    log_dir: Path,
) -> ClusterHandle:
    """PROVISION: reuse an UP and healthy cluster, or provision (repair, resume) its nodes;
    either way the cluster is INIT (SYNCING) when this returns."""
    log_path = log_dir / LOG_NAMES[Stage.PROVISION]
    record = get_cluster(name)
    with rep.stage(Stage.PROVISION) as step:
        if record is not None and record.status == CLUSTER_UP:
            handle = get_handle(record, config)
            problems = node_problems(handle, task.num_nodes)
            if not problems:
                step.skipped = True
                step.note = "cluster is UP and healthy: provisioning skipped"
                logs.append(log_path, step.note)
                add_cluster_event(name, "relaunch: UP and healthy, provisioning skipped")
                clusters.mark_syncing(name)  # provision_cluster records it for the other paths
                return handle
            reason = "relaunch: repairing (" + "; ".join(problems) + ")"
        elif record is None:
            reason = "launch: new cluster"
        else:
            reason = f"launch: cluster was {record.status}, bringing it up"
        rep.progress(f"provisioning {task.num_nodes} node(s)")
        handle = clusters.provision_cluster(
            name,
            provider,
            task.num_nodes,
            task.resources.image_id,
            resources_of(task),
            config,
            log_path,
            reason,
        )
        if record is not None and record.status == CLUSTER_STOPPED:
            # The nodes came back from a stop: their mounts are gone; mount them again.
            remount(handle, log_path)
        step.note = f"{handle.num_nodes} node(s) up: {', '.join(handle.info.ips)}"
        return handle


def _sync_workdir_and_file_mounts(
    handle: ClusterHandle,
    task: Task,
    rep: Reporter,
    log_dir: Path,
    prepared: dict[str, Future[None]] | None,
) -> tuple[int, int]:
    """SYNC_WORKDIR and SYNC_FILE_MOUNTS run side by side on every node (the file mounts in
    a thread, started first); the stages still report in that order, and this returns (the
    caller then runs setup) only once both are done. A file mount inside the workdir's
    destination waits for the workdir instead. Returns (copies, storages)."""
    fm_log = log_dir / LOG_NAMES[Stage.SYNC_FILE_MOUNTS]
    wd = WORKDIR
    nested = any(
        d == wd or d.startswith(wd + "/") for d in (*task.file_mounts, *task.storage_mounts)
    )
    if task.workdir is None or nested:
        _sync_workdir(handle, task, rep, log_dir)
        with rep.stage(Stage.SYNC_FILE_MOUNTS) as step:
            n_copies, n_storage = sync_file_mounts(
                handle, task, fm_log, rep.progress, prepared=prepared
            )
            step.note = f"{n_copies} copies, {n_storage} storage(s) on {handle.num_nodes} node(s)"
        return n_copies, n_storage
    held: list[str] = []  # the file mounts' progress, shown once their stage reports
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="file-mounts") as pool:
        fm = pool.submit(sync_file_mounts, handle, task, fm_log, held.append, prepared=prepared)
        _sync_workdir(handle, task, rep, log_dir)  # a failure still waits for the mounts
        with rep.stage(Stage.SYNC_FILE_MOUNTS) as step:
            for msg in held:
                rep.progress(msg)
            n_copies, n_storage = fm.result()
            step.note = (
                f"{n_copies} copies, {n_storage} storage(s) on {handle.num_nodes} node(s), "
                "alongside the workdir sync"
            )
    return n_copies, n_storage


def _sync_workdir(handle: ClusterHandle, task: Task, rep: Reporter, log_dir: Path) -> None:
    with rep.stage(Stage.SYNC_WORKDIR) as step:
        if task.workdir is None:
            step.note = "no workdir"
            step.skipped = True
            logs.append(log_dir / LOG_NAMES[Stage.SYNC_WORKDIR], "no workdir in the task")
            return
        sent = sync_workdir(handle, Path(task.workdir), log_dir / LOG_NAMES[Stage.SYNC_WORKDIR])
        step.note = f"{task.workdir} -> {WORKDIR} ({sent} changed file(s) sent per node)"


def _setup(
    handle: ClusterHandle,
    task: Task,
    job: JobRecord,
    rep: Reporter,
    log_dir: Path,
    no_setup: bool,
    stream: bool,
) -> bool:
    """Run setup on every node; False (job FAILED_SETUP, cluster stays UP) if it failed."""
    with rep.stage(Stage.SETUP, quiet_progress=True) as step:
        if no_setup or not task.setup:
            step.skipped = True
            step.note = "skipped (--no-setup)" if no_setup and task.setup else "no setup"
            return True
        codes = jobs.run_job_part(handle, task, task.setup, "setup", log_dir, job, stream)
        failed = [r for r, c in enumerate(codes) if c != 0]
        if not failed:
            step.note = f"done on {len(codes)} node(s)"
            return True
        step.ok = False
        current = get_job(handle.name, job.job_id)
        if current is not None and current.status == JOB_CANCELLED:
            step.note = f"job {job.job_id} cancelled during setup"
            return False
        rank = failed[0]
        step.note = (
            f"setup failed on node(s) {', '.join(map(str, failed))} (exit {codes[rank]}); "
            f"job {job.job_id} is FAILED_SETUP, the cluster stays UP"
        )
    jobs.setup_failed(handle.name, job.job_id, rank, codes[rank])
    setup_log = log_dir / f"setup-{rank}.log"
    rep.show_failure(logs.tail(setup_log, 20), setup_log)
    rep.console.print(
        f"Fix the setup and run it again with 'skycore launch -c {handle.name} TASK.yaml', or "
        f"run commands on the cluster with 'skycore exec {handle.name} ...'.",
        highlight=False,
    )
    return False


def _exec(
    handle: ClusterHandle,
    task: Task,
    job: JobRecord,
    rep: Reporter,
    log_dir: Path,
    stream: bool,
    result: RunResult,
    detach_run: bool = False,
) -> None:
    name = handle.name
    with rep.stage(Stage.EXEC, quiet_progress=True) as step:
        if not task.run:
            result.job_status, _ = jobs.finish_job(name, job.job_id, [])
            step.skipped = True
            step.note = "no run command"
            return
        status = jobs.start_job(name, job.job_id)
        if status != JOB_RUNNING:
            # Cancelled (or otherwise finished) before it started: run nothing.
            result.job_status = status
            if status == JOB_CANCELLED:
                result.exit_code = EXIT_JOB_CANCELLED
            step.ok = status == JOB_SUCCEEDED
            step.note = f"job {job.job_id} {status} before it started"
            return
        if detach_run:
            jobs.run_job_part(handle, task, task.run, "run", log_dir, job, stream, follow=False)
            result.job_status = JOB_RUNNING
            step.note = (
                f"job {job.job_id} runs on the cluster (detached): 'skycore logs {name} "
                f"{job.job_id}' follows it"
            )
            return
        codes = jobs.run_job_part(handle, task, task.run, "run", log_dir, job, stream)
        if not any(codes):
            # Every node's part ended and its follow printed it all. (After a failure, a
            # short copy cannot be told from a failed follow: 'skycore logs' fetches it.)
            logs.mark_complete(log_dir, "run")
        # A job is done only after its cached mounts are drained: each node drained them
        # before it recorded its exit code, and says so here if that drain failed.
        jobs.check_node_drains(handle, name, job.job_id, log_dir, len(codes), rep.progress)
        failed = [r for r, c in enumerate(codes) if c != 0]
        status, code = jobs.finish_job(name, job.job_id, codes)
        if status == JOB_CANCELLED:
            result.exit_code = EXIT_JOB_CANCELLED
        elif status != JOB_SUCCEEDED:
            result.exit_code = EXIT_JOB_FAILED
        result.job_status = status
        step.ok = status == JOB_SUCCEEDED
        step.note = f"job {job.job_id} {status}" + (
            f" (exit {code} on node {failed[0]})" if failed and status == JOB_FAILED else ""
        )
    if failed and status == JOB_FAILED:
        run_log = log_dir / f"run-{failed[0]}.log"
        rep.show_failure(logs.tail(run_log, 20), run_log)


def _down_stage(name: str, config: SkycoreConfig, rep: Reporter, log_dir: Path) -> None:
    with clusters.cluster_lock(name), rep.stage(Stage.DOWN) as step:
        step.note = shutdown.teardown(name, config, log_dir / LOG_NAMES[Stage.DOWN], rep.progress)


# ---------------------------------------------------------------------------------------------
# exec
# ---------------------------------------------------------------------------------------------


def exec_task(
    task: Task,
    cluster_name: str,
    *,
    console: Console | None = None,
    config: SkycoreConfig | None = None,
    stream: bool = True,
    detach_run: bool = False,
    options: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``task`` on an UP cluster: SYNC_WORKDIR -> EXEC (no provisioning, no setup);
    with ``detach_run``, return once the run started on the nodes. The task must fit the
    cluster (``core.check_exec_fits``; ``options``: the command-line option behind each field)."""
    config = config or load_config()
    console = _console(console)
    known = get_cluster(cluster_name)
    if known is not None:
        fit.check_exec_fits(known, task, options)  # before any node is asked
    _, handle = clusters.require_up(cluster_name, config)
    log_dir = logs.new_log_dir(config)
    result = RunResult(cluster_name, log_dir)
    rep = Reporter(console, result)
    console.print(
        f"Running on cluster [bold]{escape(cluster_name)}[/bold]. Logs: {log_dir}",
        highlight=False,
    )
    _sync_workdir(handle, task, rep, log_dir)
    job = jobs.submit_job(handle, task, log_dir, JOB_PENDING)
    result.job_id = job.job_id
    _exec(handle, task, job, rep, log_dir, stream, result, detach_run)
    return result


# ---------------------------------------------------------------------------------------------
# stop / start / down
# ---------------------------------------------------------------------------------------------


def _cluster_op(
    name: str, stage: Stage, console: Console | None, config: SkycoreConfig | None
) -> tuple[SkycoreConfig, Reporter, Path]:
    """What stop / start / down share: the config, a reporter and the stage's log file."""
    clusters.check_name(name)
    config = config or load_config()
    log_dir = logs.new_log_dir(config)
    return config, Reporter(_console(console), RunResult(name, log_dir)), log_dir / LOG_NAMES[stage]


def stop(
    name: str, *, console: Console | None = None, config: SkycoreConfig | None = None
) -> StageResult:
    """STOP: drain cached mounts (nothing written is lost), unmount, stop the nodes."""
    config, rep, log_path = _cluster_op(name, Stage.STOP, console, config)
    with clusters.cluster_lock(name):
        record = clusters.existing(name)
        with rep.stage(Stage.STOP) as step:
            note = shutdown.stop_nodes(record, config, log_path, rep.progress)
            step.note, step.skipped = note or "already stopped", note is None
        return step


def start(
    name: str,
    *,
    console: Console | None = None,
    config: SkycoreConfig | None = None,
    store_wait_s: float = STORE_WAIT_S,
) -> StageResult:
    """START: resume the nodes, check health, mount recorded storage again -> UP.

    A mount is back only once it answers a listing of its bucket: while its store does not
    answer, start waits (saying so every few seconds) up to ``store_wait_s``, then fails
    naming the mount and leaves the cluster INIT with the reason."""
    config, rep, log_path = _cluster_op(name, Stage.START, console, config)
    with clusters.cluster_lock(name):
        record = clusters.existing(name)
        with rep.stage(Stage.START) as step:
            note = clusters.start_nodes(record, config, log_path, rep.progress, store_wait_s)
            step.note, step.skipped = note or "already UP", note is None
        return step


def down(
    name: str, *, console: Console | None = None, config: SkycoreConfig | None = None
) -> StageResult:
    """Drain and unmount, remove the nodes, delete persistent: false storage, forget it."""
    config, rep, log_path = _cluster_op(name, Stage.DOWN, console, config)
    with clusters.cluster_lock(name):
        clusters.existing_or_nodes(name, config)
        with rep.stage(Stage.DOWN) as step:
            step.note = shutdown.teardown(name, config, log_path, rep.progress)
            return step
