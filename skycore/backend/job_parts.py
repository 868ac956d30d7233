"""SETUP and EXEC on the nodes: a job's parts, started detached and followed, its ids, exit
codes, logs and cancel, all kept in the head node's job table."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skycore import logs
from skycore.backend.handle import ClusterHandle
from skycore.backend.mounts import DRAIN_TIMEOUT_S
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
    """The environment of setup and run on node ``rank``: task envs + SKYPILOT_* variables."""
    env = dict(task.envs)
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


def _script(body: str, job_id: int | None, has_workdir: bool) -> str:
    lines = []
    if job_id is not None:
        # A cancel that came before the job started left a marker (see cancel_job).
        lines.append(f"[ -e {JOBS_DIR}/{job_id}.cancelled ] && exit {CANCELLED_EXIT}")
    if has_workdir:
        lines.append(f"cd {WORKDIR}")
    else:
        lines.append('cd "$HOME"')
    lines.append(body)
    return "\n".join(lines)


def _part_paths(job_id: int | None, kind: str, rank: int) -> dict[str, str]:
    """Where a job part lives in the node's job table (``~/.sky/jobs/<job>/``)."""
    d = f"{JOBS_DIR}/{job_id if job_id is not None else 'adhoc'}"
    stem = f"{d}/{kind}-{rank}"
    return {
        "dir": d,
        "script": f"{stem}.sh",
        "log": f"{stem}.log",
        "exit": f"{stem}.exit",
        "pid": f"{stem}.pid",
        "drain": f"{stem}.drain.log",
    }


def _start_part_command(script: str, paths: dict[str, str], job_id: int | None, drain: str) -> str:
    """Bash that starts one job part on a node, detached from the caller: its own session
    (the job's process group, which cancel kills), output to the node's job log, and, once
    it ends, the node's cached mounts drained (``drain``) BEFORE its exit code is written:
    a finished part is durable whether or not any terminal still watches it."""
    pid_files = [paths["pid"]] + ([f"{JOBS_DIR}/{job_id}.pid"] if job_id is not None else [])
    wrapper = (
        "echo $$ | tee "
        + " ".join(pid_files)
        + " >/dev/null\n"
        + f"bash {paths['script']} >> {paths['log']} 2>&1\n"
        + "rc=$?\n"
        + (
            f"(\n{drain}\n) >> {paths['drain']} 2>&1 || "
            f"{{ rc=$(( rc ? rc : 1 )); : > {paths['exit']}.drain-failed; }}\n"
            if drain
            else ""
        )
        + f'echo "$rc" > {paths["exit"]}.tmp && mv -f {paths["exit"]}.tmp {paths["exit"]}\n'
    )
    return (
        f"set -e; mkdir -p {paths['dir']}; "
        f"rm -f {paths['exit']} {paths['exit']}.drain-failed {paths['log']}\n"
        + f"cat > {paths['script']} <<'SKYCORE_JOB_SCRIPT_EOF'\n{script}\nSKYCORE_JOB_SCRIPT_EOF\n"
        + f"cat > {paths['script']}.wrap <<'SKYCORE_JOB_WRAP_EOF'\n{wrapper}SKYCORE_JOB_WRAP_EOF\n"
        + f"setsid -f bash {paths['script']}.wrap </dev/null >/dev/null 2>&1\n"
        + f"for _ in $(seq 200); do [ -s {paths['pid']} ] && exit 0; sleep 0.02; done\n"
        + f"echo '{START_FAILED_MARK}' >&2; exit 1\n"
    )


def follow_part_command(paths: dict[str, str], job_id: int | None) -> str:
    """Bash that prints a job part's node log from the start and follows it until the part
    ends, then exits with the part's exit code (CANCELLED_EXIT if it was cancelled, 137 if
    it died without one). Safe to run from any terminal, any number of times. If the node's
    drain after the part failed, a DRAIN_FAILED_MARK line and the drain log's tail follow
    the part's output (:func:`drain_failure`)."""
    cancelled = f"{JOBS_DIR}/{job_id}.cancelled" if job_id is not None else "/nonexistent"
    return (
        f"for _ in $(seq 500); do [ -s {paths['pid']} ] && break; sleep 0.02; done\n"
        + f"[ -s {paths['pid']} ] || {{ echo 'skycore: no such job part on this node' >&2; "
        + "exit 2; }\n"
        + f"p=$(cat {paths['pid']}); touch {paths['log']}\n"
        # tail --pid can stop (under load) before printing what the part wrote last: count
        # what it printed and print the rest of the log once it is done.
        + "cnt=$(mktemp)\n"
        + f'{{ tail -n +1 -s 0.1 -F --pid="$p" {paths["log"]} 2>/dev/null | tee /dev/fd/3 '
        + '| wc -c > "$cnt"; } 3>&1 || true\n'
        + 'n=$(cat "$cnt" 2>/dev/null || echo 0); rm -f "$cnt"\n'
        + f"tail -c +$((${{n:-0}} + 1)) {paths['log']} 2>/dev/null || true\n"
        + f"if [ -f {paths['exit']} ]; then\n"
        + f"  if [ -f {paths['exit']}.drain-failed ]; then\n"
        + f"    echo '{DRAIN_FAILED_MARK} (its log on the node: {paths['drain']}):'\n"
        + f"    tail -n 20 {paths['drain']} 2>/dev/null | sed 's/^/  | /'\n"
        + "  fi\n"
        + f'  exit "$(cat {paths["exit"]})"\n'
        + "fi\n"
        + f"[ -e {cancelled} ] && exit {CANCELLED_EXIT}\n"
        + "exit 137\n"
    )


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
    from skycore.storage import mounting

    n = task.num_nodes
    has_workdir = task.workdir is not None
    script = _script(body, job_id, has_workdir)
    drain = mounting.drain_command(list(drain_dsts), DRAIN_TIMEOUT_S) if drain_dsts else ""

    def start(rank: int) -> None:
        paths = _part_paths(job_id, kind, rank)
        runner = handle.runners[rank]
        cmd = _start_part_command(script, paths, job_id, drain)
        rc, out = runner.run_output(cmd, env=job_env(handle, task, rank, n, task_id), timeout=60)
        if rc != 0:
            raise StageError(
                f"Starting the {kind} of job {job_id} on {runner.node_name} failed (exit {rc}): "
                f"{out.strip()}",
                log_path=log_dir / f"{kind}-{rank}.log",
            )

    def start_and_follow(rank: int) -> int:
        # One exec per node: start the part detached, then follow it (a docker exec costs
        # CPU on the engine; four nodes' execs share two cores).
        paths = _part_paths(job_id, kind, rank)
        runner = handle.runners[rank]
        log_path = log_dir / f"{kind}-{rank}.log"
        cmd = (
            f"(\n{_start_part_command(script, paths, job_id, drain)}\n) || "
            f"{{ echo '{START_FAILED_MARK} (exit '$?')'; exit 2; }}\n"
            + follow_part_command(paths, job_id)
        )
        rc = runner.run(
            cmd,
            env=job_env(handle, task, rank, n, task_id),
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
            follow_part_command(_part_paths(job_id, kind, rank), job_id),
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
            follow_part_command(_part_paths(job_id, kind, rank), job_id),
            log_path=fetched,
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

    text = json.dumps(meta)
    cmd = (
        f"mkdir -p {JOBS_DIR} && n={int(first)} && "
        # taken ids exist; any other mkdir failure (a full disk, say) ends the loop
        f"while ! mkdir {JOBS_DIR}/$n 2>/dev/null; do [ -e {JOBS_DIR}/$n ] || exit 1; "
        "n=$((n + 1)); done && "
        f"printf '%s' {shlex.quote(text)} | sed \"s/{ID_PLACEHOLDER}/$n/g\" "
        f"> {JOBS_DIR}/$n/job.json && echo SKYCORE_JOB_ID $n"
    )
    rc, out = handle.runners[0].run_output(cmd, timeout=60)
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
        paths = _part_paths(job_id, kind, rank)
        rc, out = handle.runners[rank].run_output(
            f"cat {paths['exit']} 2>/dev/null || {{ [ -s {paths['pid']} ] && echo RUNNING; }} "
            "|| echo NEVER",
            timeout=30,
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
    cmd = (
        f"mkdir -p {JOBS_DIR}; : > {JOBS_DIR}/{job_id}.cancelled; "
        f"f={JOBS_DIR}/{job_id}.pid; [ -f $f ] || exit 0; p=$(cat $f); "
        "kill -TERM -- -$p 2>/dev/null || true; "
        "for i in $(seq 20); do kill -0 -- -$p 2>/dev/null || exit 0; sleep 0.1; done; "
        "kill -KILL -- -$p 2>/dev/null || true"
    )
    parallel(lambda r: r.run_output(cmd), handle.runners)
