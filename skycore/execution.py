"""The staged pipeline: launch / exec / stop / start / down as lists of stages.

launch: PROVISION -> SYNC_WORKDIR -> SYNC_FILE_MOUNTS -> SETUP -> EXEC [-> DOWN]
exec:   SYNC_WORKDIR -> EXEC (on an UP cluster)

Each stage prints one line with its duration; node output streams to the terminal and to
``~/sky_logs/<timestamp>/``. A failed stage shows the last lines of its log and the log path.
"""

from __future__ import annotations

import enum
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
from rich.console import Console
from rich.markup import escape

from skycore import backend, logs, provision, state
from skycore.backend import ClusterError, ClusterHandle, StageError
from skycore.config import SkycoreConfig, load_config, skycore_home
from skycore.node import mounts as node_mounts
from skycore.provision import ProvisionError
from skycore.task import Task

EXIT_JOB_FAILED = 100  # FAILED and FAILED_SETUP, as SkyPilot's JobExitCode.FAILED
EXIT_JOB_CANCELLED = 103


class Stage(enum.Enum):
    """A step of a pipeline, in the order they run."""

    PROVISION = "PROVISION"
    SYNC_WORKDIR = "SYNC_WORKDIR"
    SYNC_FILE_MOUNTS = "SYNC_FILE_MOUNTS"
    SETUP = "SETUP"
    EXEC = "EXEC"
    DOWN = "DOWN"
    STOP = "STOP"
    START = "START"


LOG_NAMES = {
    Stage.PROVISION: "provision.log",
    Stage.SYNC_WORKDIR: "workdir_sync.log",
    Stage.SYNC_FILE_MOUNTS: "file_mounts.log",
    Stage.DOWN: "teardown.log",
    Stage.STOP: "stop.log",
    Stage.START: "start.log",
}


@dataclass
class StageResult:
    """How a stage went."""

    stage: Stage
    seconds: float
    note: str = ""
    ok: bool = True
    skipped: bool = False


@dataclass
class RunResult:
    """The outcome of launch / exec: stage timings, the job and the exit code for the CLI."""

    cluster: str
    log_dir: Path
    stages: list[StageResult] = field(default_factory=list)
    job_id: int | None = None
    job_status: str | None = None
    exit_code: int = 0

    def seconds(self, stage: Stage) -> float | None:
        """Duration of a stage, None if it did not run."""
        for s in self.stages:
            if s.stage is stage:
                return s.seconds
        return None


class Reporter:
    """Prints one line per stage (with its duration) and progress while a stage runs."""

    def __init__(self, console: Console, result: RunResult) -> None:
        self.console = console
        self.result = result
        self._status: Any = None

    @contextmanager
    def stage(self, stage: Stage, quiet_progress: bool = False) -> Iterator[StageResult]:
        """Time a stage; on StageError print the failure (log tail and path) and re-raise."""
        res = StageResult(stage, 0.0)
        start = time.monotonic()
        status = None
        if not quiet_progress and self.console.is_terminal:
            status = self.console.status(f"{stage.value}...")
            status.start()
        self._status = status
        try:
            yield res
        except StageError as e:
            res.ok = False
            res.seconds = time.monotonic() - start
            self._stop_status()
            self.result.stages.append(res)
            self.line(res, note=e.message)
            self.show_failure(e.tail, e.log_path)
            raise
        except BaseException:
            res.ok = False
            res.seconds = time.monotonic() - start
            self._stop_status()
            self.result.stages.append(res)
            self.line(res, note="failed")
            raise
        res.seconds = time.monotonic() - start
        self._stop_status()
        self.result.stages.append(res)
        self.line(res)

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def progress(self, msg: str) -> None:
        """Progress inside a stage: spinner text on a terminal, a dim line otherwise."""
        if self._status is not None:
            self._status.update(escape(msg))
        else:
            self.console.print(f"  [dim]{escape(msg)}[/dim]", highlight=False)

    def line(self, res: StageResult, note: str | None = None) -> None:
        """The one line of a stage."""
        mark = "[green]✓[/green]" if res.ok else "[red]✗[/red]"
        if res.skipped:
            mark = "[yellow]-[/yellow]"
        text = escape(note if note is not None else res.note)
        self.console.print(
            f"{mark} {res.stage.value:<17} {res.seconds:6.1f}s  {text}", highlight=False
        )

    def show_failure(self, tail: str, log_path: Path | None) -> None:
        """The last lines of a failed stage's log and where the whole log is."""
        if tail:
            self.console.print("[dim]" + escape(_indent(tail)) + "[/dim]", highlight=False)
        if log_path is not None:
            self.console.print(f"  Full log: {escape(str(log_path))}", highlight=False)


def _indent(text: str) -> str:
    return "\n".join("  | " + line for line in text.splitlines())


@contextmanager
def cluster_lock(name: str, timeout: float = 600) -> Iterator[None]:
    """Serialise commands that change a cluster (launch, stop, start, down). The name is
    checked first: nothing reaches the filesystem under an invalid name."""
    _check_name(name)
    path = skycore_home() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), timeout=timeout)
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            print(
                f"Waiting for another skycore command on cluster '{name}' to finish...",
                file=sys.stderr,
                flush=True,
            )
            lock.acquire()
    except filelock.Timeout:
        raise ClusterError(
            f"Another skycore command is changing cluster '{name}' (lock {path}). Wait for it "
            "to finish, then retry."
        ) from None
    try:
        yield
    finally:
        lock.release()


def refresh_status(name: str, config: SkycoreConfig) -> state.ClusterRecord | None:
    """Reconcile a cluster's recorded status with what its provider reports.

    An UP or STOPPED cluster whose nodes no longer match becomes INIT with the reason (the
    next launch repairs it). Skipped while another command holds the cluster's lock.
    """
    path = skycore_home() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return state.get_cluster(name)
    try:
        record = state.get_cluster(name)
        if record is None or record.status == state.CLUSTER_INIT:
            return record
        nodes = provision.query_instances(record.provider, name, config)
        want = (
            provision.NodeStatus.UP
            if record.status == state.CLUSTER_UP
            else provision.NodeStatus.STOPPED
        )
        wrong = [
            f"node {r} is {nodes[r].value if r in nodes else 'gone'}"
            for r in range(record.num_nodes)
            if nodes.get(r) is not want
        ]
        if wrong:
            state.set_cluster_status(
                name,
                state.CLUSTER_INIT,
                f"refresh: {'; '.join(wrong)} (expected {want.value}); 'skycore launch' repairs it",
            )
        return state.get_cluster(name)
    finally:
        lock.release()


def _console(console: Console | None) -> Console:
    return console or Console()


def _check_name(name: str) -> None:
    problem = provision.check_cluster_name(name)
    if problem:
        raise ClusterError(problem + " Pass it with -c/--cluster.")


def _provider(task: Task) -> str:
    try:
        return provision.provider_for_cloud(task.resources.cloud)
    except ProvisionError as e:
        raise ClusterError(str(e)) from None


def _check_same_resources(record: state.ClusterRecord, task: Task) -> None:
    wanted = backend.resources_of(task)
    if record.resources != wanted:
        diff = [k for k in wanted if record.resources.get(k) != wanted[k]]
        raise ClusterError(
            f"Cluster '{record.name}' was launched with "
            f"{backend.describe_resources(record.resources)}, but the task asks for "
            f"{backend.describe_resources(wanted)} (different: {', '.join(diff)}). Launch on a "
            f"new cluster (-c NEW_NAME), run 'skycore down {record.name}' first, or change the "
            "task's num_nodes/resources back to match."
        )


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
    _check_name(cluster_name)
    config = config or load_config()
    console = _console(console)
    provider = _provider(task)
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
        with cluster_lock(cluster_name):
            record = state.get_cluster(cluster_name)
            if record is not None:
                _check_same_resources(record, task)
            touched = True
            if task.storage_mounts:
                # Buckets and uploads need no node: they run while the nodes come up.
                prepared = backend.start_storage_prepare(
                    task, config, log_dir / LOG_NAMES[Stage.SYNC_FILE_MOUNTS], background
                )
            handle = _launch_provision(task, cluster_name, provider, config, rep, log_dir)
            # Until the workdir and every mount are in place the cluster is INIT: a launch
            # interrupted here (Ctrl-C, SIGKILL) never leaves an UP cluster with bare mount
            # points that exec could write into; the next launch repairs it.
            state.set_cluster_status(cluster_name, state.CLUSTER_INIT, backend.SYNCING)
            n_copies, n_storage = _sync_workdir_and_file_mounts(
                handle, task, rep, log_dir, prepared
            )
            mark_ready(cluster_name, handle.num_nodes, f"{n_copies + n_storage} file mount(s)")
            job = _submit_job(handle, task, log_dir, state.JOB_SETTING_UP, task_id)
            result.job_id = job.job_id
            if not _setup(handle, task, job, rep, log_dir, no_setup, stream):
                current = state.get_job(cluster_name, job.job_id)
                result.job_status = current.status if current else state.JOB_FAILED_SETUP
                cancelled = result.job_status == state.JOB_CANCELLED
                result.exit_code = EXIT_JOB_CANCELLED if cancelled else EXIT_JOB_FAILED
                return result
        _exec(handle, task, job, rep, log_dir, stream, result, detach_run)
        return result
    finally:
        background.shutdown(wait=True, cancel_futures=True)
        if down and touched:
            _down_stage(cluster_name, config, rep, log_dir)


def mark_ready(name: str, num_nodes: int, what: str) -> None:
    """Record UP: the nodes are healthy and the workdir and ``what`` are in place."""
    state.set_cluster_status(
        name, state.CLUSTER_UP, f"all {num_nodes} node(s) healthy; workdir and {what} in place"
    )


def _launch_provision(
    task: Task,
    name: str,
    provider: str,
    config: SkycoreConfig,
    rep: Reporter,
    log_dir: Path,
) -> ClusterHandle:
    log_path = log_dir / LOG_NAMES[Stage.PROVISION]
    record = state.get_cluster(name)
    with rep.stage(Stage.PROVISION) as st:
        if record is not None and record.status == state.CLUSTER_UP:
            handle = backend.get_handle(record, config)
            problems = backend.node_problems(handle, task.num_nodes)
            if not problems:
                st.skipped = True
                st.note = "cluster is UP and healthy: provisioning skipped"
                logs.append(log_path, st.note)
                state.add_cluster_event(name, "relaunch: UP and healthy, provisioning skipped")
                return handle
            reason = "relaunch: repairing (" + "; ".join(problems) + ")"
        elif record is None:
            reason = "launch: new cluster"
        else:
            reason = f"launch: cluster was {record.status}, bringing it up"
        rep.progress(f"provisioning {task.num_nodes} node(s)")
        handle = backend.provision_cluster(
            name,
            provider,
            task.num_nodes,
            task.resources.image_id,
            backend.resources_of(task),
            config,
            log_path,
            reason,
        )
        if record is not None and record.status == state.CLUSTER_STOPPED:
            # The nodes came back from a stop: their mounts are gone; mount them again.
            backend.remount(handle, log_path)
        st.note = f"{handle.num_nodes} node(s) up: {', '.join(handle.info.ips)}"
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
    wd = backend.WORKDIR
    nested = any(
        d == wd or d.startswith(wd + "/") for d in (*task.file_mounts, *task.storage_mounts)
    )
    if task.workdir is None or nested:
        _sync_workdir(handle, task, rep, log_dir)
        with rep.stage(Stage.SYNC_FILE_MOUNTS) as st:
            n_copies, n_storage = backend.sync_file_mounts(
                handle, task, fm_log, rep.progress, prepared=prepared
            )
            st.note = f"{n_copies} copies, {n_storage} storage(s) on {handle.num_nodes} node(s)"
        return n_copies, n_storage
    held: list[str] = []  # the file mounts' progress, shown once their stage reports
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="file-mounts") as pool:
        fm = pool.submit(
            backend.sync_file_mounts, handle, task, fm_log, held.append, prepared=prepared
        )
        _sync_workdir(handle, task, rep, log_dir)  # a failure still waits for the mounts
        with rep.stage(Stage.SYNC_FILE_MOUNTS) as st:
            for msg in held:
                rep.progress(msg)
            n_copies, n_storage = fm.result()
            st.note = (
                f"{n_copies} copies, {n_storage} storage(s) on {handle.num_nodes} node(s), "
                "alongside the workdir sync"
            )
    return n_copies, n_storage


def _sync_workdir(handle: ClusterHandle, task: Task, rep: Reporter, log_dir: Path) -> None:
    with rep.stage(Stage.SYNC_WORKDIR) as st:
        if task.workdir is None:
            st.note = "no workdir"
            st.skipped = True
            logs.append(log_dir / LOG_NAMES[Stage.SYNC_WORKDIR], "no workdir in the task")
            return
        sent = backend.sync_workdir(
            handle, Path(task.workdir), log_dir / LOG_NAMES[Stage.SYNC_WORKDIR]
        )
        st.note = f"{task.workdir} -> {backend.WORKDIR} ({sent} changed file(s) sent per node)"


def _setup(
    handle: ClusterHandle,
    task: Task,
    job: state.JobRecord,
    rep: Reporter,
    log_dir: Path,
    no_setup: bool,
    stream: bool,
) -> bool:
    """Run setup on every node; False (job FAILED_SETUP, cluster stays UP) if it failed."""
    with rep.stage(Stage.SETUP, quiet_progress=True) as st:
        if no_setup or not task.setup:
            st.skipped = True
            st.note = "skipped (--no-setup)" if no_setup and task.setup else "no setup"
            return True
        codes = _run_job_part(handle, task, task.setup, "setup", log_dir, job, stream)
        failed = [r for r, c in enumerate(codes) if c != 0]
        if not failed:
            st.note = f"done on {len(codes)} node(s)"
            return True
        st.ok = False
        current = state.get_job(handle.name, job.job_id)
        if current is not None and current.status == state.JOB_CANCELLED:
            st.note = f"job {job.job_id} cancelled during setup"
            return False
        rank = failed[0]
        st.note = (
            f"setup failed on node(s) {', '.join(map(str, failed))} (exit {codes[rank]}); "
            f"job {job.job_id} is FAILED_SETUP, the cluster stays UP"
        )
    state.set_job_status(handle.name, job.job_id, state.JOB_FAILED_SETUP, codes[rank])
    state.add_cluster_event(
        handle.name, f"job {job.job_id}: setup failed on node {rank} (exit {codes[rank]})"
    )
    setup_log = log_dir / f"setup-{rank}.log"
    rep.show_failure(logs.tail(setup_log, 20), setup_log)
    rep.console.print(
        f"Fix the setup and run it again with 'skycore launch -c {handle.name} TASK.yaml', or "
        f"run commands on the cluster with 'skycore exec {handle.name} ...'.",
        highlight=False,
    )
    return False


def _run_job_part(
    handle: ClusterHandle,
    task: Task,
    body: str,
    kind: str,
    log_dir: Path,
    job: state.JobRecord,
    stream: bool,
    follow: bool = True,
) -> list[int]:
    """Setup or run of a job on its nodes. The nodes own the run: Ctrl-C while it streams
    detaches (the job goes on; 'skycore logs' reattaches, 'skycore cancel' stops it). Ctrl-C
    during setup cancels the job: nothing would start its run afterwards. Without
    ``follow`` the part is only started (exit codes: [])."""
    drain = _cached_mounts(handle.name) if kind == "run" else []
    try:
        return backend.run_on_nodes(
            handle, task, body, kind, log_dir, job.task_id, job.job_id, stream, drain, follow
        )
    except KeyboardInterrupt:
        if kind == "run":
            print(
                f"\nDetached from job {job.job_id} on {handle.name}: it keeps running on the "
                f"cluster. Reattach with 'skycore logs {handle.name} {job.job_id} --follow'; "
                f"stop it with 'skycore cancel {handle.name} {job.job_id}'.",
                file=sys.stderr,
                flush=True,
            )
            raise
        state.set_job_status(handle.name, job.job_id, state.JOB_CANCELLED)
        backend.cancel_job(handle, job.job_id)
        raise


def _cached_mounts(cluster: str) -> list[str]:
    """Mount points of the cluster's MOUNT_CACHED entries (drained before a run is done)."""
    return [m.dst for m in state.get_cluster_mounts(cluster) if m.mode == "MOUNT_CACHED"]


def reconcile_job(record: state.ClusterRecord, job: state.JobRecord, config: SkycoreConfig) -> str:
    """The status of an unfinished job whose terminal is gone, from the cluster's own job
    table: SUCCEEDED / FAILED once every node recorded its run's exit code (the nodes drain
    their cached mounts before they record it), still RUNNING while any runs, FAILED_DRIVER
    only when the head node itself is gone (or the job never reached its run)."""
    if job.status in state.JOB_TERMINAL or backend.pid_alive(job.driver_pid):
        return job.status
    handle = backend.up_nodes(backend.get_handle(record, config))
    if handle is None or job.status == state.JOB_PENDING:
        state.set_job_status(record.name, job.job_id, state.JOB_FAILED_DRIVER)
        return state.JOB_FAILED_DRIVER
    if job.status == state.JOB_SETTING_UP:
        # The terminal sequenced setup and run: with it gone the run never starts.
        backend.cancel_job(handle, job.job_id)
        state.set_job_status(record.name, job.job_id, state.JOB_FAILED_DRIVER)
        return state.JOB_FAILED_DRIVER
    recorded = backend.job_exit_codes(handle, job.job_id, job.num_nodes, "run")
    if backend.NEVER_STARTED in recorded:
        # Its terminal died while starting it: some nodes never got their part.
        backend.cancel_job(handle, job.job_id)
        state.set_job_status(record.name, job.job_id, state.JOB_FAILED_DRIVER)
        return state.JOB_FAILED_DRIVER
    codes = [c for c in recorded if c is not None]
    if len(codes) < len(recorded):
        return job.status
    failed = [c for c in codes if c != 0]
    if not failed:
        status, code = state.JOB_SUCCEEDED, 0
    elif backend.CANCELLED_EXIT in failed:
        status, code = state.JOB_CANCELLED, backend.CANCELLED_EXIT
    else:
        status, code = state.JOB_FAILED, failed[0]
    # The terminal died while following the run: its copy of the run's log is short.
    backend.refresh_job_logs(handle, job.job_id, "run", Path(job.log_dir), recorded)
    state.set_job_status(record.name, job.job_id, status, code)
    current = state.get_job(record.name, job.job_id)
    return current.status if current is not None else status


def _submit_job(
    handle: ClusterHandle,
    task: Task,
    log_dir: Path,
    status: str,
    task_id: str | None = None,
) -> state.JobRecord:
    """A new job of the cluster, recorded here with the id the head node's job table
    reserved for it (ids are the cluster's, whichever terminal or skycore home submits)."""
    now = time.time()
    meta: dict[str, object] = {
        "name": task.name,
        "num_nodes": task.num_nodes,
        "task_id": task_id or state.new_task_id(handle.name, backend.ID_PLACEHOLDER, now),
        "submitted_at": now,
    }
    job_id = backend.reserve_job_id(handle, state.next_job_id(handle.name), meta)
    return state.add_job(
        handle.name,
        task.name,
        task.num_nodes,
        str(log_dir),
        os.getpid(),
        status=status,
        task_id=str(meta["task_id"]).replace(backend.ID_PLACEHOLDER, str(job_id)),
        job_id=job_id,
        submitted_at=now,
    )


def adopt_job(
    record: state.ClusterRecord, job_id: int, config: SkycoreConfig
) -> state.JobRecord | None:
    """Record here a job that another terminal or skycore home submitted to the cluster
    (read from the head node's job table; None if the cluster has no such job): its status
    and whole log then come from the nodes like those of any job whose terminal is gone."""
    up = backend.up_nodes(backend.get_handle(record, config))
    if up is None:
        return None
    meta = backend.read_job_meta(up, job_id)
    if meta is None:
        return None
    name = meta.get("name")
    num_nodes = meta.get("num_nodes")
    task_id = meta.get("task_id")
    submitted = meta.get("submitted_at")
    return state.add_job(
        record.name,
        name if isinstance(name, str) else None,
        num_nodes if isinstance(num_nodes, int) and num_nodes > 0 else 1,
        str(logs.new_log_dir(config)),
        None,
        status=state.JOB_RUNNING,
        task_id=task_id if isinstance(task_id, str) else None,
        job_id=job_id,
        submitted_at=float(submitted) if isinstance(submitted, int | float) else None,
    )


def complete_job_logs(
    record: state.ClusterRecord, job: state.JobRecord, config: SkycoreConfig
) -> str | None:
    """Make the local copy of an ended job's run logs whole, once: a terminal that died
    while following the run (or one that never followed it) left it short, while each node
    keeps its part's whole log in the cluster's job table. Every rank is fetched; afterwards
    the copy is marked complete and kept. Returns None when the copy is whole, else one
    line saying where the rest is and how to get it (a stopped cluster, nodes that do not
    answer)."""
    log_dir = Path(job.log_dir)
    if job.status not in state.JOB_TERMINAL or logs.is_complete(log_dir, "run"):
        return None
    where = (
        f"This copy of job {job.job_id}'s log may be short; its whole log is on the nodes of "
        f"cluster '{record.name}'"
    )
    again = f"'skycore logs {record.name} {job.job_id}'"
    if record.status == state.ClusterStatus.STOPPED:
        return (
            f"This copy of job {job.job_id}'s log may be short (no terminal followed it to "
            f"its end); its whole log is on the nodes of cluster '{record.name}', which is "
            f"stopped: run 'skycore start {record.name}', then {again}."
        )
    handle = backend.get_handle(record, config)
    up = backend.up_nodes(handle)
    if up is None or len(up.runners) < len(handle.runners) or len(up.runners) < job.num_nodes:
        return (
            f"{where}, and not every node answers ('skycore status -r {record.name}' shows "
            f"them); once they are back, {again} fetches it."
        )
    codes = backend.job_exit_codes(up, job.job_id, job.num_nodes, "run")
    if job.status == state.JOB_CANCELLED:
        # A cancel kills a part before it records a code; its log ends there.
        codes = [backend.CANCELLED_EXIT if c is None else c for c in codes]
    if backend.refresh_job_logs(up, job.job_id, "run", log_dir, codes):
        return None
    return f"{where}, but some node did not give its whole log; {again} tries again."


def _exec(
    handle: ClusterHandle,
    task: Task,
    job: state.JobRecord,
    rep: Reporter,
    log_dir: Path,
    stream: bool,
    result: RunResult,
    detach_run: bool = False,
) -> None:
    name = handle.name
    with rep.stage(Stage.EXEC, quiet_progress=True) as st:
        if not task.run:
            state.set_job_status(name, job.job_id, state.JOB_SUCCEEDED, 0)
            st.skipped = True
            st.note = "no run command"
            result.job_status = state.JOB_SUCCEEDED
            return
        if not state.set_job_status(name, job.job_id, state.JOB_RUNNING):
            # Cancelled (or otherwise finished) before it started: run nothing.
            current = state.get_job(name, job.job_id)
            status = current.status if current is not None else state.JOB_CANCELLED
            result.job_status = status
            if status == state.JOB_CANCELLED:
                result.exit_code = EXIT_JOB_CANCELLED
            st.ok = status == state.JOB_SUCCEEDED
            st.note = f"job {job.job_id} {status} before it started"
            return
        if detach_run:
            _run_job_part(handle, task, task.run, "run", log_dir, job, stream, follow=False)
            result.job_status = state.JOB_RUNNING
            st.note = (
                f"job {job.job_id} runs on the cluster (detached): 'skycore logs {name} "
                f"{job.job_id}' follows it"
            )
            return
        codes = _run_job_part(handle, task, task.run, "run", log_dir, job, stream)
        if not any(codes):
            # Every node's part ended and its follow printed it all. (After a failure, a
            # short copy cannot be told from a failed follow: 'skycore logs' fetches it.)
            logs.mark_complete(log_dir, "run")
        # A job is done only after its cached mounts are drained: each node drained them
        # before it recorded its exit code, and says so here if that drain failed.
        _check_node_drains(handle, name, job.job_id, log_dir, len(codes), rep)
        failed = [r for r, c in enumerate(codes) if c != 0]
        if failed:
            status, code = state.JOB_FAILED, codes[failed[0]]
        else:
            status, code = state.JOB_SUCCEEDED, 0
        if not state.set_job_status(name, job.job_id, status, code):
            # Someone finished it first (a cancel): that outcome stands.
            current = state.get_job(name, job.job_id)
            status = current.status if current is not None else state.JOB_CANCELLED
        if status == state.JOB_CANCELLED:
            result.exit_code = EXIT_JOB_CANCELLED
        elif status != state.JOB_SUCCEEDED:
            result.exit_code = EXIT_JOB_FAILED
        result.job_status = status
        st.ok = status == state.JOB_SUCCEEDED
        st.note = f"job {job.job_id} {status}" + (
            f" (exit {code} on node {failed[0]})" if failed and status == state.JOB_FAILED else ""
        )
    if failed and status == state.JOB_FAILED:
        run_log = log_dir / f"run-{failed[0]}.log"
        rep.show_failure(logs.tail(run_log, 20), run_log)


def _check_node_drains(
    handle: ClusterHandle,
    cluster: str,
    job_id: int,
    log_dir: Path,
    num_nodes: int,
    rep: Reporter,
) -> None:
    """Raise StageError (the job ends FAILED, saying why) if a node's drain after the run
    failed; its drain log's tail goes to ``drain.log`` and the reporter."""
    drain_log = log_dir / "drain.log"
    failed = {}
    for rank in range(num_nodes):
        tail = backend.drain_failure(log_dir, "run", rank)
        if tail is not None:
            failed[rank] = tail
    if not failed:
        return
    for rank, tail in failed.items():
        node = handle.runners[rank].node_name
        for line in tail:
            logs.append(drain_log, f"[{node}] {line}")
            rep.progress(f"[{node}] {line}")
    nodes = ", ".join(handle.runners[r].node_name for r in failed)
    why = (
        f"Draining the cached mounts on {nodes} failed after the run; nothing was unmounted, "
        "so no write is lost. Retry the command; if the store is unreachable, fix that first."
    )
    if any(node_mounts.RCLONE_GONE in line for tail in failed.values() for line in tail):
        why = (
            f"Draining the cached mounts on {nodes} failed after the run: the rclone daemon "
            "serving them is gone. The files it had not uploaded are kept in its cache on the "
            f"node, so no write is lost: 'skycore launch' of the task on {cluster} again "
            "re-mounts the dead mounts, and the new daemon uploads them."
        )
    _job_drain_failed(cluster, job_id, drain_log, why)
    raise StageError(why, log_path=drain_log, tail=logs.tail(drain_log, 10))


def _job_drain_failed(cluster: str, job_id: int, drain_log: Path, why: str) -> None:
    """A job whose final drain failed ends FAILED (not RUNNING forever), saying why."""
    reason = (
        f"drain failed; uploads may be pending: run 'skycore down {cluster}' only after a "
        f"drain succeeds ('skycore stop {cluster}' drains again and stops nothing while "
        f"uploads are pending). {why}"
    )
    logs.append(drain_log, f"job {job_id}: FAILED: {reason}")
    if state.set_job_status(cluster, job_id, state.JOB_FAILED, None):
        state.add_cluster_event(cluster, f"job {job_id}: {reason}")


def _down_stage(name: str, config: SkycoreConfig, rep: Reporter, log_dir: Path) -> None:
    with cluster_lock(name), rep.stage(Stage.DOWN) as st:
        st.note = _teardown(name, config, log_dir / LOG_NAMES[Stage.DOWN], rep.progress)


# ---------------------------------------------------------------------------------------------
# exec
# ---------------------------------------------------------------------------------------------


def require_up(name: str, config: SkycoreConfig) -> tuple[state.ClusterRecord, ClusterHandle]:
    """The record and handle of an UP cluster, or a ClusterError saying what to run instead."""
    _check_name(name)
    record = state.get_cluster(name)
    if record is None:
        raise ClusterError(
            f"Cluster '{name}' does not exist. Launch it first: 'skycore launch -c {name} "
            "TASK.yaml'."
        )
    if record.status == state.CLUSTER_STOPPED:
        raise ClusterError(
            f"Cluster '{name}' is STOPPED. Run 'skycore start {name}' first, or 'skycore "
            f"launch -c {name} TASK.yaml' to start it and run the task."
        )
    if record.status != state.CLUSTER_UP:
        raise ClusterError(
            f"Cluster '{name}' is {record.status} ({record.status_reason}); its nodes are not "
            f"ready. Run 'skycore launch -c {name} TASK.yaml' to repair it."
        )
    handle = backend.get_handle(record, config)
    statuses = provision.query_instances(record.provider, name, config)
    missing = [r for r in range(record.num_nodes) if statuses.get(r) is not provision.NodeStatus.UP]
    if missing:
        reason = f"node(s) {', '.join(map(str, missing))} not running"
        state.set_cluster_status(name, state.CLUSTER_INIT, reason)
        raise ClusterError(
            f"Cluster '{name}' is not healthy: {reason}. Run 'skycore launch -c {name} "
            "TASK.yaml' to repair it."
        )
    return record, handle


def exec_task(
    task: Task,
    cluster_name: str,
    *,
    console: Console | None = None,
    config: SkycoreConfig | None = None,
    stream: bool = True,
    detach_run: bool = False,
) -> RunResult:
    """Run ``task`` on an UP cluster: SYNC_WORKDIR -> EXEC (no provisioning, no setup);
    with ``detach_run``, return once the run started on the nodes."""
    config = config or load_config()
    console = _console(console)
    record, handle = require_up(cluster_name, config)
    if task.num_nodes > record.num_nodes:
        raise ClusterError(
            f"num_nodes: the task asks for {task.num_nodes} nodes but cluster '{cluster_name}' "
            f"has {record.num_nodes}. Lower num_nodes, or launch a new cluster with -c."
        )
    log_dir = logs.new_log_dir(config)
    result = RunResult(cluster_name, log_dir)
    rep = Reporter(console, result)
    console.print(
        f"Running on cluster [bold]{escape(cluster_name)}[/bold]. Logs: {log_dir}",
        highlight=False,
    )
    _sync_workdir(handle, task, rep, log_dir)
    job = _submit_job(handle, task, log_dir, state.JOB_PENDING)
    result.job_id = job.job_id
    _exec(handle, task, job, rep, log_dir, stream, result, detach_run)
    return result


# ---------------------------------------------------------------------------------------------
# stop / start / down
# ---------------------------------------------------------------------------------------------


MOUNTS_REMOVED = "mounts removed by stop/down"


def _existing(name: str) -> state.ClusterRecord:
    _check_name(name)
    record = state.get_cluster(name)
    if record is None:
        raise ClusterError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    return record


def _cluster_op(
    name: str, stage: Stage, console: Console | None, config: SkycoreConfig | None
) -> tuple[SkycoreConfig, Reporter, Path]:
    """What stop / start / down share: the config, a reporter and the stage's log file."""
    _check_name(name)
    config = config or load_config()
    log_dir = logs.new_log_dir(config)
    return config, Reporter(_console(console), RunResult(name, log_dir)), log_dir / LOG_NAMES[stage]


def stop(
    name: str, *, console: Console | None = None, config: SkycoreConfig | None = None
) -> StageResult:
    """Drain cached mounts (nothing written is lost), unmount, stop the nodes -> STOPPED."""
    config, rep, log_path = _cluster_op(name, Stage.STOP, console, config)
    with cluster_lock(name):
        record = _existing(name)
        with rep.stage(Stage.STOP) as st:
            running = backend.up_nodes(backend.get_handle(record, config))
            if record.status == state.CLUSTER_STOPPED and running is None:
                st.note = "already stopped"
                st.skipped = True
                return st
            if running is not None:
                _settle_orphan_jobs(record, config)
                rep.progress("draining cached mounts and unmounting")
                n = backend.drain_mounts(running, log_path, unmount=True, say=rep.progress)
                logs.append(log_path, f"drained and unmounted {n} mount(s)")
                if n:
                    # The mount points are plain local folders now: no exec may write there
                    # even if stopping the nodes fails below.
                    state.set_cluster_status(name, state.CLUSTER_INIT, MOUNTS_REMOVED)
            rep.progress("stopping nodes")
            try:
                provision.stop_instances(record.provider, name, config)
            except ProvisionError as e:
                state.set_cluster_status(name, state.CLUSTER_INIT, f"stop failed: {e}")
                raise StageError(f"Stopping the nodes failed: {e}", log_path) from None
            state.set_cluster_status(name, state.CLUSTER_STOPPED, "stopped by user")
            st.note = f"{running.num_nodes if running else 0} node(s) stopped; mounts drained"
        return st


def _settle_orphan_jobs(record: state.ClusterRecord, config: SkycoreConfig) -> None:
    """Before the nodes stop: record the outcome (and fetch the whole logs) of every job
    whose terminal is gone, while the nodes' job table can still be read."""
    for job in state.list_jobs(record.name):
        if job.status not in state.JOB_TERMINAL and not backend.pid_alive(job.driver_pid):
            reconcile_job(record, job, config)


def start(
    name: str,
    *,
    console: Console | None = None,
    config: SkycoreConfig | None = None,
    store_wait_s: float = backend.STORE_WAIT_S,
) -> StageResult:
    """Resume the nodes, check health, mount recorded storage again -> UP.

    A mount is back only once it answers a listing of its bucket: while its store does not
    answer, start waits (saying so every few seconds) up to ``store_wait_s``, then fails
    naming the mount and leaves the cluster INIT with the reason."""
    config, rep, log_path = _cluster_op(name, Stage.START, console, config)
    with cluster_lock(name):
        record = _existing(name)
        with rep.stage(Stage.START) as st:
            if record.status == state.CLUSTER_UP:
                handle = backend.get_handle(record, config)
                if not backend.node_problems(handle, record.num_nodes):
                    st.note = "already UP"
                    st.skipped = True
                    return st
            handle = backend.provision_cluster(
                name,
                record.provider,
                record.num_nodes,
                record.resources.get("image_id"),
                record.resources,
                config,
                log_path,
                f"start: resuming from {record.status}",
            )
            rep.progress("mounting storage again")
            try:
                n = backend.remount(handle, log_path, rep.progress, store_wait_s)
            except StageError as e:
                state.set_cluster_status(name, state.CLUSTER_INIT, f"re-mount failed: {e}")
                raise
            mark_ready(name, handle.num_nodes, f"{n} mount(s) restored")
            st.note = f"{handle.num_nodes} node(s) UP, {n} mount(s) restored"
        return st


def down(
    name: str, *, console: Console | None = None, config: SkycoreConfig | None = None
) -> StageResult:
    """Drain and unmount, remove the nodes, delete persistent: false storage, forget it."""
    config, rep, log_path = _cluster_op(name, Stage.DOWN, console, config)
    with cluster_lock(name):
        record = state.get_cluster(name)
        provider = record.provider if record else "docker"
        if record is None and not provision.query_instances(provider, name, config):
            raise ClusterError(
                f"Cluster '{name}' does not exist ('skycore status' lists clusters)."
            )
        with rep.stage(Stage.DOWN) as st:
            st.note = _teardown(name, config, log_path, rep.progress)
            return st


def _teardown(name: str, config: SkycoreConfig, log_path: Path, say: Callable[[str], None]) -> str:
    record = state.get_cluster(name)
    provider = record.provider if record else "docker"
    if record is None and not provision.query_instances(provider, name, config):
        raise ClusterError(f"Cluster '{name}' does not exist ('skycore status' lists clusters).")
    mounts = state.get_cluster_mounts(name)
    if record is not None:
        running = backend.up_nodes(backend.get_handle(record, config))
        if running is not None and mounts:
            say("draining cached mounts and unmounting")
            backend.drain_mounts(running, log_path, unmount=True, say=say)
            # Until the nodes are gone, nothing may run there against plain local folders.
            state.set_cluster_status(name, state.CLUSTER_INIT, MOUNTS_REMOVED)
    say("removing nodes")
    try:
        provision.terminate_instances(provider, name, config)
    except ProvisionError as e:
        raise StageError(f"Removing the nodes failed: {e}", log_path) from None
    try:
        deleted, kept = _delete_ephemeral_storage(mounts, name, config, log_path, say)
    finally:
        # The nodes are gone: forget the cluster even if deleting its storage failed.
        state.remove_cluster(name, "terminated by user (down)")
    note = "nodes removed"
    if deleted:
        note += f"; deleted storage {', '.join(deleted)} (persistent: false)"
    if kept:
        note += f"; kept storage {', '.join(kept)} (still used by other clusters)"
    return note


def _delete_ephemeral_storage(
    mounts: list[state.MountRecord],
    cluster: str,
    config: SkycoreConfig,
    log_path: Path,
    say: Callable[[str], None],
) -> tuple[list[str], list[str]]:
    """Delete the persistent: false buckets of a torn-down cluster: (deleted, kept).

    A bucket whose record is already gone counts as deleted; one that another cluster's
    recorded mounts still use is kept. Every bucket is tried; failures are reported together.
    """
    names = sorted({m.storage_name for m in mounts if m.storage_name and not m.persistent})
    if not names:
        return [], []
    from skycore.storage import catalog

    deleted: list[str] = []
    kept: list[str] = []
    failures: list[str] = []
    for storage_name in names:
        say(f"deleting storage {storage_name}")
        try:
            summary = catalog.delete_storage(
                storage_name, config, missing_ok=True, for_cluster=cluster
            )
        except catalog.StorageInUse as e:
            kept.append(storage_name)
            logs.append(log_path, f"kept storage {storage_name}: {e}")
            continue
        except Exception as e:
            logs.append(log_path, f"deleting storage {storage_name} failed: {e}")
            failures.append(f"{storage_name} ({e})")
            continue
        deleted.append(storage_name)
        logs.append(log_path, f"storage {storage_name}: {summary}")
    if failures:
        names_left = " ".join(f.split(" ", 1)[0] for f in failures)
        raise StageError(
            f"The nodes of '{cluster}' are removed and the cluster is forgotten, but deleting "
            f"its persistent: false storage failed: {'; '.join(failures)}. Delete it with "
            f"'skycore storage delete {names_left}'.",
            log_path,
        )
    return deleted, kept
