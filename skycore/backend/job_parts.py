"""SETUP and EXEC on the nodes: a job's parts, started detached and followed, its ids, exit
codes, logs and cancel, all kept in the head node's job table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skycore import logs, node
from skycore.backend.handle import ClusterHandle
from skycore.backend.mounts import cached_drain_script
from skycore.backend.sync import WORKDIR
from skycore.concurrency import parallel
from skycore.errors import StageError

if TYPE_CHECKING:
    from skycore.task import Task

JOBS_DIR = "~/.sky/jobs"
CANCELLED_EXIT = 143  # a job script that finds its cancel marker exits like SIGTERM
# Lines the follow command prints after a part's own output (read back by the terminal).
DRAIN_FAILED_MARK = "skycore: draining the cached mounts on this node failed"
START_FAILED_MARK = "skycore: the job part did not start on this node"


# ---------------------------------------------------------------------------------------------
# SETUP / EXEC
# ---------------------------------------------------------------------------------------------


def job_env(
    handle: ClusterHandle, task: Task, rank: int, num_nodes: int, task_id: str
) -> dict[str, str]:
    """The environment of setup and run on node ``rank``: task envs and secrets + SKYPILOT_*
    variables (the runner passes them on stdin, never on a command line)."""
    env = dict(task.envs) | dict(task.secrets)
    env.update(
        {
            "SKYPILOT_NODE_RANK": str(rank),
            "SKYPILOT_NODE_IPS": "\n".join(handle.info.ips[:num_nodes]),
            "SKYPILOT_NUM_NODES": str(num_nodes),
            "SKYPILOT_TASK_ID": task_id,
            "SKYPILOT_CLUSTER_NAME": handle.name,
        }
    )
    return env


def _part_env(job_id: int | None, kind: str, rank: int) -> dict[str, str]:
    """Where a job part lives in the node's job table (``~/.sky/jobs/<job>/<kind>-<rank>``), as
    the node programs job_*.sh take it."""
    return {
        "SKYCORE_JOBS": JOBS_DIR,
        "SKYCORE_JOB_ID": "" if job_id is None else str(int(job_id)),
        "SKYCORE_JOB_PART": f"{kind}-{rank}",
    }


def _start_env(
    body: str, job_id: int | None, kind: str, rank: int, has_workdir: bool, drain: str
) -> dict[str, str]:
    """The arguments of node program job_start.sh (see there)."""
    return _part_env(job_id, kind, rank) | {
        "SKYCORE_JOB_WORKDIR": WORKDIR if has_workdir else "",
        "SKYCORE_JOB_BODY": body,
        "SKYCORE_JOB_DRAIN": drain,
    }


def follow_part_command() -> str:
    """Bash (node program job_follow.sh; arguments ``_part_env``) that prints a job part's
    node log from the start and follows it until the part ends, then exits with the part's
    exit code (CANCELLED_EXIT if it was cancelled, 137 if it died without one). If the node's
    drain after the part failed, a DRAIN_FAILED_MARK line and the drain log's tail follow the
    part's output (:func:`drain_failure`)."""
    return node.program("job_follow.sh")


def run_on_nodes(
    handle: ClusterHandle,
    task: Task,
    body: str,
    kind: str,
    log_dir: Path,
    task_id: str,
    job_id: int | None,
    stream: bool,
    drain_dsts: Sequence[str] = (),
    follow: bool = True,
) -> list[int]:
    """Run ``body`` on the first task.num_nodes nodes in parallel; exit codes by rank.

    Each node runs its part detached from this process (the cluster owns the job: a killed
    or detached terminal changes nothing there) and keeps its output in the node's job
    table; this process follows that log into ``<kind>-<rank>.log`` and, with ``stream``,
    the terminal (prefixed by the node when there is more than one). With ``drain_dsts``
    each node drains those cached mounts before it records the part's exit code. Without
    ``follow`` the parts are only started (returns []).
    """
    n = task.num_nodes
    has_workdir = task.workdir is not None
    drain = cached_drain_script(handle.config, drain_dsts) if drain_dsts else ""

    def env(rank: int) -> dict[str, str]:
        part = _start_env(body, job_id, kind, rank, has_workdir, drain)
        return job_env(handle, task, rank, n, task_id) | part

    def start(rank: int) -> None:
        runner = handle.runners[rank]
        cmd = node.program("job_start.sh")
        rc, out = runner.run_output(cmd, env=env(rank), timeout=60)
        if rc != 0:
            raise StageError(
                f"Starting the {kind} of job {job_id} on {runner.node_name} failed (exit {rc}): "
                f"{out.strip()}",
                log_path=log_dir / f"{kind}-{rank}.log",
            )

    def start_and_follow(rank: int) -> int:
        # One exec per node: start the part detached, then follow it (a docker exec costs
        # CPU on the engine; four nodes' execs share two cores).
        runner = handle.runners[rank]
        log_path = log_dir / f"{kind}-{rank}.log"
        cmd = (
            f"(\n{node.program('job_start.sh')}\n) || "
            f"{{ echo '{START_FAILED_MARK} (exit '$?')'; exit 2; }}\n" + follow_part_command()
        )
        rc = runner.run(
            cmd,
            env=env(rank),
            log_path=log_path,
            stream=stream,
            prefix=f"({handle.node_label(rank)}, rank={rank}) " if n > 1 else "",
        )
        if rc == 2:
            tail = logs.tail(log_path, 5).strip()
            if tail.splitlines()[-1:] and tail.splitlines()[-1].startswith(START_FAILED_MARK):
                raise StageError(
                    f"Starting the {kind} of job {job_id} on {runner.node_name} failed: "
                    f"{' '.join(tail.split())}",
                    log_path=log_path,
                )
        return rc

    if not follow:
        parallel(start, list(range(n)))
        return []
    return parallel(start_and_follow, list(range(n)))


def drain_failure(log_dir: Path, kind: str, rank: int) -> list[str] | None:
    """The node drain log's tail if the drain after part ``kind`` on node ``rank`` failed
    (as follow_part_command printed it into ``<kind>-<rank>.log``); None if it did not."""
    path = log_dir / f"{kind}-{rank}.log"
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    marks = [i for i, line in enumerate(lines) if DRAIN_FAILED_MARK in line]
    if not marks:
        return None
    return [line.removeprefix("  | ") for line in lines[marks[-1] + 1 :]]


def follow_job(
    handle: ClusterHandle,
    job_id: int,
    num_nodes: int,
    kind: str,
    log_dir: Path,
    stream: bool,
) -> list[int]:
    """Follow an already started job part on every node (another terminal's job, a
    detached one): rewrite ``<kind>-<rank>.log`` from the node's log; exit codes by rank."""

    def one(rank: int) -> int:
        local = log_dir / f"{kind}-{rank}.log"
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(b"")
        prefix = f"({handle.node_label(rank)}, rank={rank}) " if num_nodes > 1 else ""
        return handle.runners[rank].run(
            follow_part_command(),
            env=_part_env(job_id, kind, rank),
            log_path=local,
            stream=stream,
            prefix=prefix,
        )

    return parallel(one, list(range(num_nodes)))


def refresh_job_logs(
    handle: ClusterHandle,
    job_id: int,
    kind: str,
    log_dir: Path,
    exit_codes: Sequence[int | None],
) -> bool:
    """Replace the local copies ``<kind>-<rank>.log`` of an ended job part with the nodes'
    complete logs: a terminal that died while following the part left them short (or none
    followed it). ``exit_codes`` are the part's recorded codes by rank (None: not known, or
    NEVER_STARTED: nothing to fetch). A copy is swapped in whole, and only if its node answered
    with that code (a node that no longer answers keeps the old copy). True if every rank
    that ran now has its whole log locally (then ``logs.is_complete`` says so too)."""

    def one(rank: int) -> bool:
        code = exit_codes[rank]
        if code == NEVER_STARTED:
            return True
        if code is None:
            return False
        local = log_dir / f"{kind}-{rank}.log"
        fetched = local.with_name(f"{local.name}.fetching")
        fetched.parent.mkdir(parents=True, exist_ok=True)
        fetched.write_bytes(b"")
        got = handle.runners[rank].run(
            follow_part_command(), env=_part_env(job_id, kind, rank), log_path=fetched
        )
        if got == code:
            fetched.replace(local)
            return True
        fetched.unlink(missing_ok=True)
        return False

    whole = all(parallel(one, list(range(len(exit_codes)))))
    if whole:
        logs.mark_complete(log_dir, kind)
    return whole


ID_PLACEHOLDER = "@SKYCORE_JOB_ID@"
"""reserve_job_id: replaced by the reserved id in the job's metadata."""


def reserve_job_id(handle: ClusterHandle, first: int, meta: dict[str, object]) -> int:
    """Reserve the first free job id >= ``first`` in the head node's job table and record
    ``meta`` (name, num_nodes, task_id, ...; ID_PLACEHOLDER in a string value becomes the id)
    as its ``job.json``. Job ids belong to the cluster: two terminals or skycore homes that
    submit to one cluster never share an id (each id is one ``mkdir`` on the head node)."""
    import json

    env = {
        "SKYCORE_JOBS": JOBS_DIR,
        "SKYCORE_JOB_FIRST": str(int(first)),
        "SKYCORE_JOB_META": json.dumps(meta),
        "SKYCORE_JOB_ID_PLACEHOLDER": ID_PLACEHOLDER,
    }
    rc, out = handle.runners[0].run_output(node.program("job_reserve.sh"), env=env, timeout=60)
    for line in out.splitlines():
        if rc == 0 and line.startswith("SKYCORE_JOB_ID "):
            return int(line.split()[1])
    raise StageError(
        f"Could not reserve a job id on the head node of {handle.name} (exit {rc}): "
        f"{out.strip()[-300:]}",
        None,
    )


def read_job_meta(handle: ClusterHandle, job_id: int) -> dict[str, object] | None:
    """The ``job.json`` the head node keeps for ``job_id`` (None if it has none)."""
    import json

    rc, out = handle.runners[0].run_output(f"cat {JOBS_DIR}/{int(job_id)}/job.json", timeout=30)
    if rc != 0:
        return None
    try:
        meta = json.loads(out)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


NEVER_STARTED = -1
"""job_exit_codes: the part was never started on that node (its terminal died first)."""


def job_exit_codes(
    handle: ClusterHandle, job_id: int, num_nodes: int, kind: str
) -> list[int | None]:
    """The recorded exit code of a job part on each node, read from the nodes' job table:
    None while it runs (or the node does not answer), NEVER_STARTED if it never started."""

    def one(rank: int) -> int | None:
        rc, out = handle.runners[rank].run_output(
            node.program("job_exit.sh"), env=_part_env(job_id, kind, rank), timeout=30
        )
        word = out.strip()
        if rc != 0 or word == "RUNNING":
            return None
        if word == "NEVER":
            return NEVER_STARTED
        try:
            return int(word)
        except ValueError:
            return None

    return parallel(one, list(range(num_nodes)))


def cancel_job(handle: ClusterHandle, job_id: int) -> None:
    """Kill the process group of a job on every node (SIGTERM, then SIGKILL).

    A marker file is written first: a job script that starts (or writes its pid file) after
    this check sees the marker and exits at once, so a cancel that arrives before the pid
    file exists is not lost. Marker before pid check here, pid file before marker check in
    the script: one of the two always sees the other.
    """
    cmd, env = (
        node.program("job_cancel.sh"),
        {"SKYCORE_JOBS": JOBS_DIR, "SKYCORE_JOB_ID": str(int(job_id))},
    )
    parallel(lambda r: r.run_output(cmd, env=env), handle.runners)
