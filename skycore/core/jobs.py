"""Job operations on a cluster: submit, reconcile a job whose terminal is gone, adopt one
another terminal submitted, complete its logs, drain failures, refresh, cancel."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from skycore import logs
from skycore.backend import job_parts
from skycore.backend.handle import ClusterHandle, get_handle, up_nodes
from skycore.backend.mounts import drain_mounts
from skycore.config import SkycoreConfig, load_config
from skycore.errors import StageError
from skycore.node.mountd.rc import RCLONE_GONE
from skycore.processes import pid_alive
from skycore.state.clusters import ClusterRecord, ClusterStatus, add_cluster_event, get_cluster
from skycore.state.jobs import (
    JOB_CANCELLED,
    JOB_FAILED,
    JOB_FAILED_DRIVER,
    JOB_FAILED_SETUP,
    JOB_PENDING,
    JOB_RUNNING,
    JOB_SETTING_UP,
    JOB_SUCCEEDED,
    JOB_TERMINAL,
    JobRecord,
    add_job,
    get_job,
    list_jobs,
    new_task_id,
    next_job_id,
    set_job_status,
)
from skycore.state.mounts import get_cluster_mounts
from skycore.task import Task


def cached_mounts(cluster: str) -> list[str]:
    """Mount points of the cluster's MOUNT_CACHED entries (drained before a run is done)."""
    return [m.dst for m in get_cluster_mounts(cluster) if m.mode == "MOUNT_CACHED"]


def reconcile_job(record: ClusterRecord, job: JobRecord, config: SkycoreConfig) -> str:
    """The status of an unfinished job whose terminal is gone, from the cluster's own job
    table: SUCCEEDED / FAILED once every node recorded its run's exit code (the nodes drain
    their cached mounts before they record it), still RUNNING while any runs, FAILED when a
    worker node of the job is gone, FAILED_DRIVER only when the head node itself is gone (or
    the job never reached its run)."""
    if job.status in JOB_TERMINAL or pid_alive(job.driver_pid):
        return job.status
    handle = up_nodes(get_handle(record, config))
    if handle is None or job.status == JOB_PENDING:
        set_job_status(record.name, job.job_id, JOB_FAILED_DRIVER)
        return JOB_FAILED_DRIVER
    if job.status == JOB_SETTING_UP:
        # The terminal sequenced setup and run: with it gone the run never starts.
        job_parts.cancel_job(handle, job.job_id)
        set_job_status(record.name, job.job_id, JOB_FAILED_DRIVER)
        return JOB_FAILED_DRIVER
    up_ranks = {n.rank for n in handle.info.nodes}
    gone = [rank for rank in range(job.num_nodes) if rank not in up_ranks]
    if gone:
        # A node of the job vanished (preempted, removed) with its part and its exit code.
        status = JOB_FAILED_DRIVER if 0 in gone else JOB_FAILED
        reason = f"job {job.job_id}: node {gone[0]} is gone, and its part's outcome with it"
        if set_job_status(record.name, job.job_id, status, None):
            add_cluster_event(record.name, reason)
        return status
    recorded = job_parts.job_exit_codes(handle, job.job_id, job.num_nodes, "run")
    if job_parts.NEVER_STARTED in recorded:
        # Its terminal died while starting it: some nodes never got their part.
        job_parts.cancel_job(handle, job.job_id)
        set_job_status(record.name, job.job_id, JOB_FAILED_DRIVER)
        return JOB_FAILED_DRIVER
    codes = [c for c in recorded if c is not None]
    if len(codes) < len(recorded):
        return job.status
    failed = [c for c in codes if c != 0]
    if not failed:
        status, code = JOB_SUCCEEDED, 0
    elif job_parts.CANCELLED_EXIT in failed:
        status, code = JOB_CANCELLED, job_parts.CANCELLED_EXIT
    else:
        status, code = JOB_FAILED, failed[0]
    # The terminal died while following the run: its copy of the run's log is short.
    job_parts.refresh_job_logs(handle, job.job_id, "run", Path(job.log_dir), recorded)
    set_job_status(record.name, job.job_id, status, code)
    current = get_job(record.name, job.job_id)
    return current.status if current is not None else status


def submit_job(
    handle: ClusterHandle,
    task: Task,
    log_dir: Path,
    status: str,
    task_id: str | None = None,
) -> JobRecord:
    """A new job of the cluster, recorded here with the id the head node's job table
    reserved for it (ids are the cluster's, whichever terminal or skycore home submits)."""
    now = time.time()
    meta: dict[str, object] = {
        "name": task.name,
        "num_nodes": task.num_nodes,
        "task_id": task_id or new_task_id(handle.name, job_parts.ID_PLACEHOLDER, now),
        "submitted_at": now,
    }
    job_id = job_parts.reserve_job_id(handle, next_job_id(handle.name), meta)
    return add_job(
        handle.name,
        task.name,
        task.num_nodes,
        str(log_dir),
        os.getpid(),
        status=status,
        task_id=str(meta["task_id"]).replace(job_parts.ID_PLACEHOLDER, str(job_id)),
        job_id=job_id,
        submitted_at=now,
    )


def adopt_job(record: ClusterRecord, job_id: int, config: SkycoreConfig) -> JobRecord | None:
    """Record here a job that another terminal or skycore home submitted to the cluster
    (read from the head node's job table; None if the cluster has no such job): its status
    and whole log then come from the nodes like those of any job whose terminal is gone."""
    up = up_nodes(get_handle(record, config))
    if up is None:
        return None
    meta = job_parts.read_job_meta(up, job_id)
    if meta is None:
        return None
    name = meta.get("name")
    num_nodes = meta.get("num_nodes")
    task_id = meta.get("task_id")
    submitted = meta.get("submitted_at")
    return add_job(
        record.name,
        name if isinstance(name, str) else None,
        num_nodes if isinstance(num_nodes, int) and num_nodes > 0 else 1,
        str(logs.new_log_dir(config)),
        None,
        status=JOB_RUNNING,
        task_id=task_id if isinstance(task_id, str) else None,
        job_id=job_id,
        submitted_at=float(submitted) if isinstance(submitted, int | float) else None,
    )


def complete_job_logs(record: ClusterRecord, job: JobRecord, config: SkycoreConfig) -> str | None:
    """Make the local copy of an ended job's run logs whole, once: a terminal that died
    while following the run (or one that never followed it) left it short, while each node
    keeps its part's whole log in the cluster's job table. Every rank is fetched; afterwards
    the copy is marked complete and kept. Returns None when the copy is whole, else one
    line saying where the rest is and how to get it (a stopped cluster, nodes that do not
    answer)."""
    log_dir = Path(job.log_dir)
    if job.status not in JOB_TERMINAL or logs.is_complete(log_dir, "run"):
        return None
    where = (
        f"This copy of job {job.job_id}'s log may be short; its whole log is on the nodes of "
        f"cluster '{record.name}'"
    )
    again = f"'skycore logs {record.name} {job.job_id}'"
    if record.status == ClusterStatus.STOPPED:
        return (
            f"This copy of job {job.job_id}'s log may be short (no terminal followed it to "
            f"its end); its whole log is on the nodes of cluster '{record.name}', which is "
            f"stopped: run 'skycore start {record.name}', then {again}."
        )
    handle = get_handle(record, config)
    up = up_nodes(handle)
    if up is None or len(up.runners) < len(handle.runners) or len(up.runners) < job.num_nodes:
        return (
            f"{where}, and not every node answers ('skycore status -r {record.name}' shows "
            f"them); once they are back, {again} fetches it."
        )
    codes = job_parts.job_exit_codes(up, job.job_id, job.num_nodes, "run")
    if job.status == JOB_CANCELLED:
        # A cancel kills a part before it records a code; its log ends there.
        codes = [job_parts.CANCELLED_EXIT if c is None else c for c in codes]
    if job_parts.refresh_job_logs(up, job.job_id, "run", log_dir, codes):
        return None
    return f"{where}, but some node did not give its whole log; {again} tries again."


def check_node_drains(
    handle: ClusterHandle,
    cluster: str,
    job_id: int,
    log_dir: Path,
    num_nodes: int,
    say: Callable[[str], None],
) -> None:
    """Raise StageError (the job ends FAILED, saying why) if a node's drain after the run
    failed; its drain log's tail goes to ``drain.log`` and to ``say``."""
    drain_log = log_dir / "drain.log"
    failed = {}
    for rank in range(num_nodes):
        tail = job_parts.drain_failure(log_dir, "run", rank)
        if tail is not None:
            failed[rank] = tail
    if not failed:
        return
    for rank, tail in failed.items():
        node = handle.runners[rank].node_name
        for line in tail:
            logs.append(drain_log, f"[{node}] {line}")
            say(f"[{node}] {line}")
    nodes = ", ".join(handle.runners[r].node_name for r in failed)
    why = (
        f"Draining the cached mounts on {nodes} failed after the run; nothing was unmounted, "
        "so no write is lost. Retry the command; if the store is unreachable, fix that first."
    )
    if any(RCLONE_GONE in line for tail in failed.values() for line in tail):
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
    if set_job_status(cluster, job_id, JOB_FAILED, None):
        add_cluster_event(cluster, f"job {job_id}: {reason}")


def settle_orphan_jobs(record: ClusterRecord, config: SkycoreConfig) -> None:
    """Before the nodes stop: record the outcome (and fetch the whole logs) of every job
    whose terminal is gone, while the nodes' job table can still be read."""
    for job in list_jobs(record.name):
        if job.status not in JOB_TERMINAL and not pid_alive(job.driver_pid):
            reconcile_job(record, job, config)


def refresh_jobs(cluster: str | None) -> list[JobRecord]:
    """The jobs of ``cluster``; an unfinished one whose terminal is gone is read from the
    cluster's own job table (its nodes run it whatever happened to the terminal)."""
    jobs = list_jobs(cluster)
    orphans = [j for j in jobs if j.status not in JOB_TERMINAL]
    orphans = [j for j in orphans if not pid_alive(j.driver_pid)]
    if orphans:
        config = load_config()
        for j in orphans:
            record = get_cluster(j.cluster)
            if record is None:
                set_job_status(j.cluster, j.job_id, JOB_FAILED_DRIVER)
            else:
                reconcile_job(record, j, config)
    return list_jobs(cluster)


def cancel_jobs(
    record: ClusterRecord, targets: list[JobRecord], config: SkycoreConfig
) -> Iterator[tuple[JobRecord, str | None]]:
    """Cancel each job of ``targets``: record CANCELLED, then kill its processes on every
    node. Yields each job as it is done with None, or with the status it already ended in
    (then nothing is killed)."""
    handle = get_handle(record, config)
    for j in targets:
        if not set_job_status(record.name, j.job_id, JOB_CANCELLED):
            now = get_job(record.name, j.job_id)
            yield j, now.status if now else "gone"
            continue
        job_parts.cancel_job(handle, j.job_id)
        yield j, None


def cancel_job(record: ClusterRecord, job_id: int, config: SkycoreConfig) -> None:
    """Record job ``job_id`` CANCELLED, then kill its processes on every node."""
    set_job_status(record.name, job_id, JOB_CANCELLED)
    job_parts.cancel_job(get_handle(record, config), job_id)


def stop_jobs_and_drain(
    record: ClusterRecord, jobs: list[JobRecord], config: SkycoreConfig, log: Path
) -> int | None:
    """Kill the unfinished ``jobs`` on the nodes that are UP, then drain and unmount their
    cached mounts: how many mounts (None: no node is UP). Raises StageError if the drain
    fails (nothing is unmounted then)."""
    running = up_nodes(get_handle(record, config))
    if running is None:
        return None
    for job in jobs:
        if job.status not in JOB_TERMINAL:
            job_parts.cancel_job(running, job.job_id)
    return drain_mounts(running, log, unmount=True)


def run_job_part(
    handle: ClusterHandle,
    task: Task,
    body: str,
    kind: str,
    log_dir: Path,
    job: JobRecord,
    stream: bool,
    follow: bool = True,
) -> list[int]:
    """Setup or run of a job on its nodes. The nodes own the run: Ctrl-C while it streams
    detaches (the job goes on; 'skycore logs' reattaches, 'skycore cancel' stops it). Ctrl-C
    during setup cancels the job: nothing would start its run afterwards. Without
    ``follow`` the part is only started (exit codes: [])."""
    drain = cached_mounts(handle.name) if kind == "run" else []
    try:
        return job_parts.run_on_nodes(
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
        set_job_status(handle.name, job.job_id, JOB_CANCELLED)
        job_parts.cancel_job(handle, job.job_id)
        raise


def setup_failed(cluster: str, job_id: int, rank: int, code: int) -> None:
    """Record job ``job_id`` FAILED_SETUP (its setup exited ``code`` on node ``rank``); the
    cluster stays UP."""
    set_job_status(cluster, job_id, JOB_FAILED_SETUP, code)
    add_cluster_event(cluster, f"job {job_id}: setup failed on node {rank} (exit {code})")


def start_job(cluster: str, job_id: int) -> str:
    """Record job ``job_id`` RUNNING; the status it has afterwards (CANCELLED or another end
    when it finished before it started: then nothing may run)."""
    if set_job_status(cluster, job_id, JOB_RUNNING):
        return JOB_RUNNING
    current = get_job(cluster, job_id)
    return current.status if current is not None else JOB_CANCELLED


def finish_job(cluster: str, job_id: int, codes: list[int]) -> tuple[str, int]:
    """Record the end of a run from each node's exit code: (status, exit code). When someone
    finished it first (a cancel), that outcome stands."""
    failed = [c for c in codes if c != 0]
    status, code = (JOB_FAILED, failed[0]) if failed else (JOB_SUCCEEDED, 0)
    if not set_job_status(cluster, job_id, status, code):
        current = get_job(cluster, job_id)
        status = current.status if current is not None else JOB_CANCELLED
    return status, code
