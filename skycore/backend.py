"""The backend: what each pipeline stage does to a cluster's nodes.

provision (create/resume nodes, health check), sync_workdir, sync_file_mounts (plain copies,
COPY snapshots, MOUNT / MOUNT_CACHED mounts), setup, execute (run a job on every node, drain
cached mounts before it is done), and the lifecycle steps stop / start / teardown. Nodes are
reached only through the provider API and CommandRunners, never through docker directly.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from skycore import logs, node, provision, state
from skycore.config import SkycoreConfig
from skycore.errors import UserError
from skycore.provision import ClusterInfo, NodeStatus, ProvisionError
from skycore.runner import CommandRunner

if TYPE_CHECKING:
    from skycore.storage.storage import Storage
    from skycore.task import Task

WORKDIR = "~/sky_workdir"
JOBS_DIR = "~/.sky/jobs"
CANCELLED_EXIT = 143  # a job script that finds its cancel marker exits like SIGTERM
# Lines the follow command prints after a part's own output (read back by the terminal).
DRAIN_FAILED_MARK = "skycore: draining the cached mounts on this node failed"
START_FAILED_MARK = "skycore: the job part did not start on this node"
DRAIN_TIMEOUT_S = 600
HEALTH_TIMEOUT_S = 30.0

T = TypeVar("T")
Say = Callable[[str], None]


class ClusterError(UserError):
    """The cluster is not in a state that allows the command; the message says what to run."""


class StageError(Exception):
    """A stage failed for a reason outside the user's code; carries the log path."""

    exit_code = 1

    def __init__(self, message: str, log_path: Path | None = None, tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log_path = log_path
        self.tail = tail


def parallel(fn: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
    """``fn`` on every item in threads; results in order; the first exception is re-raised."""
    if not items:
        return []
    if len(items) == 1:
        return [fn(items[0])]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, it) for it in items]
        excs = [f.exception() for f in futures]
    for e in excs:
        if e is not None:
            raise e
    return [f.result() for f in futures]


@dataclass
class ClusterHandle:
    """A cluster's nodes and a command runner for each, in rank order (head first)."""

    name: str
    provider: str
    info: ClusterInfo
    runners: list[CommandRunner]
    config: SkycoreConfig = field(repr=False)

    @property
    def num_nodes(self) -> int:
        """How many nodes the handle covers."""
        return len(self.info.nodes)

    def node_label(self, rank: int) -> str:
        """'head' or 'workerN', as SkyPilot names nodes in output prefixes."""
        return "head" if rank == 0 else f"worker{rank}"


def resources_of(task: Task) -> dict[str, Any]:
    """What a cluster is launched with; a relaunch must ask for the same."""
    r = task.resources
    return {
        "cloud": r.cloud,
        "image_id": r.image_id,
        "use_spot": bool(r.use_spot),
        "num_nodes": task.num_nodes,
    }


def describe_resources(res: dict[str, Any]) -> str:
    """A short human form of a resources dict."""
    return ", ".join(f"{k}={v}" for k, v in res.items())


def up_nodes(handle: ClusterHandle) -> ClusterHandle | None:
    """The part of ``handle`` whose nodes are UP (None if no node is)."""
    up = [i for i, n in enumerate(handle.info.nodes) if n.status is provision.NodeStatus.UP]
    if not up:
        return None
    return ClusterHandle(
        handle.name,
        handle.provider,
        provision.ClusterInfo(handle.name, handle.provider, [handle.info.nodes[i] for i in up]),
        [handle.runners[i] for i in up],
        handle.config,
    )


def get_handle(record: state.ClusterRecord, config: SkycoreConfig) -> ClusterHandle:
    """The handle of a recorded cluster, with the nodes that exist now."""
    info = provision.get_cluster_info(record.provider, record.name, config)
    runners = provision.get_command_runners(record.provider, info, config)
    return ClusterHandle(record.name, record.provider, info, runners, config)


# ---------------------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------------------


def node_problems(handle: ClusterHandle, expected_nodes: int) -> list[str]:
    """Why the cluster is not healthy ([] when every node is UP and passes the health check)."""
    return _node_problems(handle, expected_nodes)[0]


def _node_problems(handle: ClusterHandle, expected_nodes: int) -> tuple[list[str], bool]:
    """(problems, definitive): definitive when a node's runtime answered but the node itself
    is unfit (no FUSE, no SYS_ADMIN): waiting will not fix that."""
    statuses = provision.query_instances(handle.provider, handle.name, handle.config)
    problems = []
    for rank in range(expected_nodes):
        st = statuses.get(rank)
        if st is None:
            problems.append(f"node {rank} is gone")
        elif st is not NodeStatus.UP:
            problems.append(f"node {rank} is {st.value}")
    if problems:
        return problems, False

    def check(runner: CommandRunner) -> tuple[str | None, bool]:
        rc, out = runner.run_output(node.program("health.sh"), timeout=30)
        if rc == 0 and "skycore-node-ok" in out:
            for line in out.splitlines():  # the home comes with it: no exec of its own later
                if line.startswith("skycore-home "):
                    runner.remember_home(line.split(" ", 1)[1].strip())
            return None, False
        lines = [ln for ln in out.strip().splitlines() if ln != "skycore-health-start"]
        last = lines[-1] if lines else "no output"
        ran = "skycore-health-start" in out
        what = "failed the health check (FUSE or SYS_ADMIN missing)" if ran else "did not answer"
        return f"{runner.node_name} {what} (exit {rc}: {last})", ran

    results = parallel(check, handle.runners[:expected_nodes])
    return [p for p, _ in results if p], any(d for p, d in results if p)


def wait_healthy(handle: ClusterHandle, expected_nodes: int, log_path: Path) -> None:
    """Poll the health check until every node passes; StageError after HEALTH_TIMEOUT_S."""
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while True:
        problems, definitive = _node_problems(handle, expected_nodes)
        if not problems:
            logs.append(log_path, f"health check passed on {expected_nodes} node(s)")
            return
        logs.append(log_path, "health check: " + "; ".join(problems))
        if definitive or time.monotonic() > deadline:
            raise StageError(
                "Nodes did not become healthy: " + "; ".join(problems), log_path=log_path
            )
        time.sleep(0.3)


# ---------------------------------------------------------------------------------------------
# PROVISION
# ---------------------------------------------------------------------------------------------


def provision_cluster(
    name: str,
    provider: str,
    num_nodes: int,
    image_id: str | None,
    resources: dict[str, Any],
    config: SkycoreConfig,
    log_path: Path,
    reason: str,
) -> ClusterHandle:
    """Record INIT, create or resume the nodes and wait for health. The cluster stays INIT
    (reason SYNCING): the caller puts the workdir and file mounts in place and only then
    records UP (execution.mark_ready). A failure leaves the cluster INIT with the reason
    recorded (the next launch repairs it)."""
    state.upsert_cluster(name, state.CLUSTER_INIT, provider, num_nodes, resources, reason)
    logs.append(log_path, f"{reason}: {num_nodes} node(s) on provider {provider}")
    try:
        info = provision.run_instances(provider, name, num_nodes, image_id, config)
    except ProvisionError as e:
        msg = f"provisioning failed: {e}"
        logs.append(log_path, msg)
        state.set_cluster_status(name, state.CLUSTER_INIT, msg)
        state.add_cluster_event(name, msg)
        raise StageError(str(e), log_path=log_path) from None
    state.set_cluster_handle(name, info.to_dict())
    for n in info.nodes:
        logs.append(log_path, f"node {n.rank}: {n.name} hostname={n.hostname} ip={n.ip}")
    runners = provision.get_command_runners(provider, info, config)
    handle = ClusterHandle(name, provider, info, runners, config)
    try:
        wait_healthy(handle, num_nodes, log_path)
    except StageError as e:
        state.set_cluster_status(name, state.CLUSTER_INIT, e.message)
        state.add_cluster_event(name, e.message)
        raise
    state.set_cluster_status(name, state.CLUSTER_INIT, SYNCING)
    return handle


SYNCING = (
    "nodes healthy; workdir and file mounts not all in place yet (an interrupted launch "
    "leaves it so: 'skycore launch' repairs it)"
)


# ---------------------------------------------------------------------------------------------
# SYNC_WORKDIR / SYNC_FILE_MOUNTS
# ---------------------------------------------------------------------------------------------


def sync_workdir(handle: ClusterHandle, workdir: Path, log_path: Path) -> int:
    """rsync the workdir to ~/sky_workdir on every node in parallel; files sent per node."""

    def one(runner: CommandRunner) -> int:
        res = runner.rsync_up(workdir, WORKDIR, log_path=log_path)
        if res.returncode != 0:
            raise StageError(
                f"Syncing workdir {workdir} to {runner.node_name} failed (rsync exit "
                f"{res.returncode}).",
                log_path=log_path,
                tail=logs.tail(log_path, 10),
            )
        return res.files_transferred

    counts = parallel(one, handle.runners)
    return max(counts) if counts else 0


def write_credentials(handle: ClusterHandle, log_path: Path) -> None:
    """Write the store credential files and the mount helper on every node (mode 0600,
    through stdin)."""
    from skycore.storage import mounting

    files = mounting.node_files(handle.config)
    if not files:
        return

    cmd, data = write_files_command(files)

    def one(runner: CommandRunner) -> None:
        rc, out = runner.run_output(cmd, stdin=data)
        if rc != 0:
            raise StageError(
                f"Writing the credential files on {runner.node_name} failed (exit {rc}).",
                log_path=log_path,
                tail=out.strip()[-2000:],
            )

    parallel(one, handle.runners)
    logs.append(log_path, f"wrote {len(files)} credential file(s) on {handle.num_nodes} node(s)")


def write_files_command(files: Mapping[str, str]) -> tuple[str, bytes]:
    """(bash, stdin) writing every file of ``files`` ({path: content}) on a node in one exec,
    each mode 0600 and replaced atomically: the contents travel as a tar on stdin (never on
    a command line), are unpacked into a private folder and renamed into place."""
    import io
    import tarfile

    from skycore.storage import mounting

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i, content in enumerate(files.values()):
            data = content.encode()
            info = tarfile.TarInfo(str(i))
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    lines = ['set -e; umask 077; t=$(mktemp -d /tmp/skycore-files.XXXXXX); tar -x -C "$t" -f -']
    for i, path in enumerate(files):
        q = mounting.sh_path(path)
        lines.append(
            f'p={q}; mkdir -p "$(dirname "$p")"; mv -f "$t/{i}" "$p.skytmp"; '
            f'chmod 600 "$p.skytmp"; mv -f "$p.skytmp" "$p"'
        )
    lines.append('rm -rf "$t"')
    return "\n".join(lines), buf.getvalue()


def _prepare_one(
    dst: str, st: Storage, config: SkycoreConfig, log_path: Path, upload_progress: bool
) -> None:
    logs.append(log_path, f"prepare {dst}: {st.bucket_url} ({st.kind}, {st.mode.value})")
    res = st.prepare(config, progress=upload_progress)
    if res is not None:
        logs.append(log_path, f"prepare {dst}: {res}")


def start_storage_prepare(
    task: Task,
    config: SkycoreConfig,
    log_path: Path,
    pool: ThreadPoolExecutor,
    upload_progress: bool = False,
) -> dict[str, Future[None]]:
    """Start the client side of each storage entry (create bucket, upload source) in ``pool``.

    Needs no node, so launch starts it before PROVISION; returns a future per destination.
    """
    return {
        dst: pool.submit(_prepare_one, dst, st, config, log_path, upload_progress)
        for dst, st in task.storage_mounts.items()
    }


def sync_file_mounts(
    handle: ClusterHandle,
    task: Task,
    log_path: Path,
    say: Say,
    upload_progress: bool = False,
    prepared: dict[str, Future[None]] | None = None,
) -> tuple[int, int]:
    """Plain copies, storage snapshots and mounts on every node; returns (copies, storages).

    Storage is prepared client-side first (bucket created, source uploaded; ``prepared`` is
    that work already started in the background), then credential files are written, then
    every node copies or mounts each entry. Mounts are recorded so ``start`` can mount them
    again and ``stop``/``down`` can drain them.
    """
    logs.append(
        log_path,
        f"{len(task.file_mounts)} plain copies, {len(task.storage_mounts)} storage entries",
    )
    # 1. Plain copies of local files / folders: rsync to every node, all in parallel.
    local = {d: s for d, s in task.file_mounts.items() if not _is_url(s)}
    urls = {d: s for d, s in task.file_mounts.items() if _is_url(s)}
    jobs = [(r, dst, src) for r in handle.runners for dst, src in local.items()]

    def copy_local(item: tuple[CommandRunner, str, str]) -> None:
        runner, dst, src = item
        res = runner.rsync_up(src, dst, log_path=log_path)
        if res.returncode != 0:
            raise StageError(
                f"Copying {src} to {dst} on {runner.node_name} failed (rsync exit "
                f"{res.returncode}).",
                log_path=log_path,
                tail=logs.tail(log_path, 10),
            )

    if jobs:
        say(f"copying {len(local)} local file mount(s) to {handle.num_nodes} node(s)")
        parallel(copy_local, jobs)

    storages = dict(task.storage_mounts)
    if not storages and not urls:
        return len(local), 0  # mounts of an earlier launch stay recorded (and drained)

    from skycore.storage.storage import plain_copy_command

    # 2. Storage: each entry waits for its own bucket/upload, then goes to every node; the
    #    entries proceed independently, so a slow upload holds back only its own mount.
    own_pool: ThreadPoolExecutor | None = None
    if prepared is None:
        own_pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(storages))))
        prepared = start_storage_prepare(task, handle.config, log_path, own_pool, upload_progress)
    say(f"{len(storages) + len(urls)} storage entr(ies) to {handle.num_nodes} node(s)")
    records: list[state.MountRecord] = []

    def node_entry(dst: str) -> tuple[str, str] | None:
        """(what, bash) for one entry, None if nothing is to be done; records mounts (even if
        they then fail on a node, so that stop/down still drain them)."""
        if dst in urls:
            url = urls[dst]
            return f"copy {url} -> {dst}", plain_copy_command(url, dst, handle.config)
        st = storages[dst]
        prepared[dst].result()  # re-raises a failed bucket creation / upload
        mode = st.mode.value
        # Only buckets skycore created can be deleted by down; external ones never are.
        persistent = st.persistent or st.kind != "sky_managed"
        if mode == "COPY":
            records.append(state.MountRecord(handle.name, dst, st.name, mode, persistent, None))
            return f"copy {dst} ({st.name})", st.copy_command(dst, handle.config)
        spec = st.mount_spec()
        records.append(state.MountRecord(handle.name, dst, st.name, mode, persistent, spec))
        # A mount still live from an earlier launch is left alone by the mount script itself
        # (one live probe per node for the whole batch; no separate probe exec).
        return f"mount {dst} ({mode})", st.mount_command(dst, handle.config)

    previous = state.get_cluster_mounts(handle.name)
    waiting = [*urls, *storages]
    # The credential files and the mount helper travel with the first batch (one exec per
    # node less); written on their own only if no batch runs.
    from skycore.storage import mounting

    files: dict[str, str] = mounting.node_files(handle.config)
    try:
        # Waves: whatever is ready (its bucket prepared) goes to every node in one batch, so
        # a slow upload holds back only its own entries.
        while waiting:
            ready = [d for d in waiting if d in urls or prepared[d].done()]
            if not ready:
                wait([prepared[d] for d in waiting], return_when=FIRST_COMPLETED)
                continue
            waiting = [d for d in waiting if d not in ready]
            todo = [e for e in (node_entry(d) for d in ready) if e is not None]
            if todo:
                run_batch(handle, todo, log_path, files=files)
                files = {}
        if files:
            write_credentials(handle, log_path)
    finally:
        if own_pool is not None:
            own_pool.shutdown(wait=True)
        # Mounts a relaunch no longer asks for stay live on the nodes: keep them recorded
        # so stop/down still drain them.
        new = {r.dst for r in records}
        state.set_cluster_mounts(handle.name, records + [m for m in previous if m.dst not in new])
    return len(local) + len(urls), len(storages)


_ENTRY_RC = re.compile(r"^SKYCORE_ENTRY_RC (\d+) (\d+)$")


def batch_script(commands: Sequence[str]) -> str:
    """Bash running ``commands`` concurrently on a node; prints each one's output, then a
    ``SKYCORE_ENTRY_RC <i> <exit code>`` line for it.

    Output goes through files: a daemon a command leaves behind (rclone mount) must not hold
    docker's output streams (the engine then stalls ~2 s on this exec and the next).
    """
    lines = ["d=$(mktemp -d /tmp/skycore-batch.XXXXXX)"]
    for i, cmd in enumerate(commands):
        lines.append(
            f'( bash -c {shlex.quote(cmd)} >"$d/{i}" 2>&1 </dev/null; echo $? >"$d/{i}.rc" ) &'
        )
    lines.append("wait")
    lines.append(f"for i in $(seq 0 {len(commands) - 1}); do")
    lines.append(
        '  cat "$d/$i"; echo "SKYCORE_ENTRY_RC $i $(cat "$d/$i.rc" 2>/dev/null || echo 255)"'
    )
    lines.append("done")
    lines.append('rm -rf "$d"')
    return "\n".join(lines)


def merge_mounts(entries: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``entries`` with every mount script (``mounting.mount_command``) and storage copy
    script (``mounting.copy_command``) merged into one entry that mounts and copies them all
    through one run of the node program and the node's rclone daemon (python's and rclone's
    start-ups per entry were most of a node's mounting CPU); other entries unchanged, the
    merged one last."""
    from skycore.storage import mounting

    others: list[tuple[str, str]] = []
    whats: list[str] = []
    reqs: list[mounting.MountRequest] = []
    copies: list[mounting.CopyRequest] = []
    env: mounting.RcloneEnv | None = None
    for what, cmd in entries:
        parsed_mounts = mounting.mount_requests_of(cmd)
        parsed_copies = mounting.copy_requests_of(cmd) if parsed_mounts is None else None
        parsed = parsed_mounts or parsed_copies
        if parsed is None or (env is not None and parsed[1] != env):
            others.append((what, cmd))
            continue
        env = parsed[1]
        whats.append(what)
        if parsed_mounts is not None:
            reqs += parsed_mounts[0]
        elif parsed_copies is not None:
            copies += parsed_copies[0]
    if len(whats) < 2 or env is None:
        return list(entries)
    return [*others, ("; ".join(whats), mounting.mount_many_command(reqs, env, copies))]


def run_batch(
    handle: ClusterHandle,
    entries: Sequence[tuple[str, str]],
    log_path: Path,
    files: Mapping[str, str] | None = None,
) -> None:
    """Run ``entries`` ((what, bash) pairs) concurrently on every node, one exec per node
    (mount scripts merged into one: ``merge_mounts``); StageError naming the entry and node
    (with its output) if any failed. ``files`` ({path: content}, e.g. credentials) are
    written first, in the same exec, through stdin (``write_files_command``)."""
    entries = merge_mounts(entries)
    script = batch_script([cmd for _, cmd in entries])
    stdin: bytes | None = None
    if files:
        write, stdin = write_files_command(files)
        script = (
            f"if ! bash -c {shlex.quote(write)}; then "
            "echo 'skycore: writing the credential files failed'; exit 3; fi\n" + script
        )
        logs.append(log_path, f"writing {len(files)} credential file(s) with the batch")

    def one(runner: CommandRunner) -> None:
        out: list[str] = []
        rc = runner.run(script, log_path=log_path, stream=True, sink=out.append, stdin=stdin)
        codes: dict[int, int] = {}
        chunks: dict[int, list[str]] = {}
        current: list[str] = []
        for line in out:
            m = _ENTRY_RC.match(line.strip())
            if m:
                codes[int(m.group(1))] = int(m.group(2))
                chunks[int(m.group(1))] = current
                current = []
            else:
                current.append(line.rstrip("\n"))
        for i, (what, _) in enumerate(entries):
            logs.append(log_path, f"[{runner.node_name}] {what}: exit {codes.get(i, rc)}")
        failed = [i for i in range(len(entries)) if codes.get(i, 255) != 0]
        if rc != 0 and not failed:
            failed = [0]
        if failed:
            i = failed[0]
            raise StageError(
                f"{entries[i][0]} failed on {runner.node_name} (exit {codes.get(i, rc)}).",
                log_path=log_path,
                tail="\n".join(chunks.get(i, [])[-15:]),
            )

    parallel(one, handle.runners)


def _is_url(src: str) -> bool:
    return "://" in src


def remount(
    handle: ClusterHandle,
    log_path: Path,
    say: Say | None = None,
    store_wait_s: float | None = None,
) -> int:
    """Mount every recorded MOUNT / MOUNT_CACHED entry again (after start); returns count.

    With ``store_wait_s`` (start), a mount counts as back only once it is mounted and
    answers a listing of its bucket on every node: a mount call returns at once while its
    store is out (rclone asks the store only on first use), and the first read would then
    hang. start waits up to ``store_wait_s`` for a store that does not answer, saying so
    through ``say`` every STORE_PROBE_S; past that, StageError naming the mounts, nodes and
    stores. A mount call that waits for the store itself (a prefix: rclone asks whether it
    is an object) holds the mount batch: start says so meanwhile; if the node program's own
    rc timeout ends that call, rclone still finishes it once the store answers, so the
    mount is waited for, never asked for twice; a batch that failed at once for want of a
    connection is run again."""
    from skycore.storage import mounting
    from skycore.storage.storage import Storage

    mounts = [m for m in state.get_cluster_mounts(handle.name) if m.spec is not None]
    if not mounts:
        return 0
    entries = [
        (f"mount {m.dst}", Storage.from_mount_spec(m.spec).mount_command(m.dst, handle.config))
        for m in mounts
        if m.spec is not None
    ]
    files = mounting.node_files(handle.config)
    if store_wait_s is None:
        run_batch(handle, entries, log_path, files=files)
        return len(mounts)
    where = {
        m.dst: str(Storage.from_mount_spec(m.spec).url(handle.config))
        for m in mounts
        if m.spec is not None
    }
    waited = _StoreWait(handle, where, log_path, say, store_wait_s)
    token = uuid.uuid4().hex[:12]
    mounted = False
    while True:
        if not mounted:
            failure, output = waited.mount_batch(entries, files)
            if failure is not None and _CALL_TIMED_OUT.search(output) is None:
                if not any(marker in output.lower() for marker in _UNREACHABLE):
                    raise failure
                waited.batch_failed(failure)  # nothing pending on the node: mount again
                continue
            mounted = True
        bad = _unanswered_mounts(handle, list(where), token, log_path)
        if not bad:
            if waited.said:
                waited.tell(f"the store answers: {', '.join(where)} mounted again")
            return len(mounts)
        waited.not_answering(bad)


STORE_WAIT_S = 300.0
"""How long start waits for the store of a re-mounted mount that does not answer (then it
fails, naming the mount; the cluster stays INIT)."""
STORE_PROBE_S = 5.0
"""A listing through a re-mounted mount that takes longer is no answer (yet); also how often
start says that it waits."""
_PROBE_LINE = re.compile(r"^SKYCORE_PROBE (\d+) (\d+) ?(.*)$")
# What the node program prints when its rc call to mount timed out (the call goes on in rclone).
_CALL_TIMED_OUT = re.compile(r"skycore: rclone failed to mount .*: timed out")
# A mount batch that failed with one of these found no store to talk to.
_UNREACHABLE = (
    "connection refused",
    "connection reset",
    "no such host",
    "network is unreachable",
    "no route to host",
    "i/o timeout",
    "deadline exceeded",
)
_NOT_MOUNTED = 200  # probe_mounts_command: the mount point is not mounted (yet)


def probe_mounts_command(dsts: Sequence[str], token: str, timeout_s: float = STORE_PROBE_S) -> str:
    """Bash listing every mount point in ``dsts`` at once; prints ``SKYCORE_PROBE <i> <exit
    code> <error>`` per mount: 137 when the listing has not ended in ``timeout_s``,
    _NOT_MOUNTED when no FUSE mount appeared there in ``timeout_s``.

    A listing the store holds cannot be killed (the kernel waits for rclone's answer once
    the request reached it), so each runs in the background, detached, its result in
    ``/tmp/skycore-probe-<token>-<i>.rc``; the next probe with the same ``token`` waits for
    that listing instead of starting another."""
    from skycore.storage import mounting

    steps = max(1, int(timeout_s * 10))
    lines = [
        'is_fuse() { awk -v d="$1" \'$2 == d && ($3 == "fuse" || $3 ~ /^fuse\\./) {f=1} '
        "END {exit !f}' /proc/self/mounts; }",
        "probe() {",
        '  i=$1; d=$(realpath -m -- "$2"); f=/tmp/skycore-probe-' + token + "-$i; n=0",
        '  until is_fuse "$d"; do',
        f"    n=$((n + 1)); if [ $n -ge {steps} ]; then",
        f'      echo "SKYCORE_PROBE $i {_NOT_MOUNTED} not mounted"; return',
        "    fi; sleep 0.1",
        "  done",
        '  if [ ! -e "$f.rc" ] && '
        '! { [ -s "$f.pid" ] && kill -0 "$(cat "$f.pid")" 2>/dev/null; }; then',
        '    setsid bash -c \'ls -A -- "$1" >/dev/null 2>"$2.err"; echo $? >"$2.tmp"; '
        'mv -f "$2.tmp" "$2.rc"\' _ "$d" "$f" </dev/null >/dev/null 2>&1 &',
        '    echo $! >"$f.pid"',
        "  fi",
        f'  for _ in $(seq {steps}); do [ -e "$f.rc" ] && break; sleep 0.1; done',
        '  if [ -e "$f.rc" ]; then',
        '    echo "SKYCORE_PROBE $i $(cat "$f.rc") $(head -c 300 "$f.err" | tr \'\\n\' \' \')"',
        '    rm -f "$f.rc" "$f.err" "$f.pid"',
        "  else",
        '    echo "SKYCORE_PROBE $i 137"',
        "  fi",
        "}",
    ]
    for i, dst in enumerate(dsts):
        lines.append(f"probe {i} {mounting.sh_path(dst)} &")
    lines.append("wait")
    return "\n".join(lines)


def _unanswered_mounts(
    handle: ClusterHandle, dsts: Sequence[str], token: str, log_path: Path
) -> dict[str, dict[str, str]]:
    """{mount point: {node: why}} for every mount that is not mounted yet, or whose listing
    did not end well within STORE_PROBE_S: why is '' when the store has not answered yet,
    else what went wrong (a store that is out may also answer with errors once rclone's own
    retries are spent)."""
    cmd = probe_mounts_command(dsts, token)

    def one(runner: CommandRunner) -> dict[str, str]:
        rc, out = runner.run_output(cmd, timeout=STORE_PROBE_S + 60)
        codes: dict[int, tuple[int, str]] = {}
        for line in out.splitlines():
            m = _PROBE_LINE.match(line.strip())
            if m:
                codes[int(m.group(1))] = (int(m.group(2)), m.group(3).strip())
        bad = {}
        for i, dst in enumerate(dsts):
            code, error = codes.get(i, (rc or 255, " ".join(out.split())[-300:]))
            if code != 0:
                why = "" if code == 137 else (error or f"exit {code}")
                bad[dst] = why
                logs.append(log_path, f"[{runner.node_name}] listing {dst}: {why or 'no answer'}")
        return bad

    found: dict[str, dict[str, str]] = {}
    for runner, bad in zip(handle.runners, parallel(one, handle.runners), strict=True):
        for dst, why in bad.items():
            found.setdefault(dst, {})[runner.node_name] = why
    return found


class _StoreWait:
    """remount's wait for stores that do not answer: progress and the final error."""

    def __init__(
        self,
        handle: ClusterHandle,
        where: dict[str, str],
        log_path: Path,
        say: Say | None,
        wait_s: float,
    ) -> None:
        self.handle = handle
        self.where = where
        self.log_path = log_path
        self.say = say
        self.wait_s = wait_s
        self.started = time.monotonic()
        self.said = False

    def tell(self, msg: str) -> None:
        logs.append(self.log_path, msg)
        if self.say is not None:
            self.say(msg)
        self.said = True

    def _left(self) -> float:
        return self.started + self.wait_s - time.monotonic()

    def _status(self) -> str:
        return (
            f"({time.monotonic() - self.started:.0f} s so far; start waits up to "
            f"{self.wait_s:.0f} s for it)"
        )

    def _mounts(self, dsts: Sequence[str]) -> str:
        return ", ".join(f"{d} ({self.where[d]})" for d in dsts)

    def mount_batch(
        self, entries: Sequence[tuple[str, str]], files: Mapping[str, str]
    ) -> tuple[StageError | None, str]:
        """run_batch, saying every STORE_PROBE_S that the store holds it: (its error, the
        output it logged). Past the wait it gives up (StageError) without waiting for the
        held batch, which ends on the node by itself (a daemon thread here: a CLI exits)."""
        try:
            offset = self.log_path.stat().st_size
        except OSError:
            offset = 0
        outcome: list[BaseException | None] = []

        def batch() -> None:
            try:
                run_batch(self.handle, entries, self.log_path, files)
            except BaseException as e:
                outcome.append(e)
            else:
                outcome.append(None)

        thread = threading.Thread(target=batch, name=f"remount-{self.handle.name}", daemon=True)
        thread.start()
        while True:
            thread.join(timeout=max(0.0, min(STORE_PROBE_S, self._left())))
            if not thread.is_alive():
                break
            if self._left() <= 0:
                self._give_up(list(self.where), [], "Its mount call still waits for the store.")
            self.tell(
                f"mounting {self._mounts(list(self.where))}: waiting for the store to answer "
                f"{self._status()}"
            )
        error = outcome[0] if outcome else None
        if error is not None and not isinstance(error, StageError):
            raise error
        with open(self.log_path, errors="replace") as f:
            f.seek(offset)
            output = f.read()
        return error, output

    def batch_failed(self, failure: StageError) -> None:
        """The mount batch failed for want of a connection: give up past the wait, else say
        so (and try again after a pause)."""
        dsts = list(self.where)
        if self._left() <= 0:
            self._give_up(dsts, [], failure.message)
        self.tell(
            f"mounting {self._mounts(dsts)} failed: the store did not answer; waiting for "
            f"it {self._status()}"
        )
        time.sleep(max(0.0, min(STORE_PROBE_S, self._left())))

    def not_answering(self, bad: dict[str, dict[str, str]]) -> None:
        """Some mounts are not mounted yet, or their listings got no answer (or an error):
        give up past the wait, else say so."""
        dsts = list(bad)
        nodes = sorted({n for by_node in bad.values() for n in by_node})
        errors = sorted({why for by_node in bad.values() for why in by_node.values() if why})
        if not errors:
            how = "does not answer"
        elif errors == ["not mounted"]:
            how = "is not mounted yet (its mount call waits for the store)"
        else:
            how = f"is not ready ({errors[0]})"
        if self._left() <= 0:
            detail = f"Last seen: {errors[0]}" if errors else ""
            self._give_up(dsts, nodes, detail)
        self.tell(
            f"waiting for the store: {self._mounts(dsts)} {how} on {', '.join(nodes)} "
            f"{self._status()}"
        )

    def _give_up(self, dsts: Sequence[str], nodes: Sequence[str], detail: str) -> NoReturn:
        on = f" on {', '.join(nodes)}" if nodes else ""
        name = self.handle.name
        raise StageError(
            f"Re-mounting {self._mounts(dsts)}{on} failed: the store did not answer "
            f"within {self.wait_s:.0f} s.{(' ' + detail.rstrip('.') + '.') if detail else ''} "
            "The nodes are up and nothing on them was removed, but the cluster stays INIT "
            f"until its mounts answer: check that the store is reachable, then run 'skycore "
            f"start {name}' again.",
            log_path=self.log_path,
            tail=logs.tail(self.log_path, 10),
        )


def drain_all_command(dsts: Sequence[str], timeout_s: float = DRAIN_TIMEOUT_S) -> str:
    """Bash draining every cached mount in ``dsts`` with one poller (the drain rule of
    skycore/node/mounts.py); exit 0 when all are durable."""
    from skycore.storage import mounting

    return mounting.drain_command(list(dsts), timeout_s)


class _Throttled:
    """Forwards progress lines to ``say``, at most one per ``interval`` seconds (thread-safe)."""

    def __init__(self, say: Callable[[str], None], interval: float = 1.0) -> None:
        self.say = say
        self.interval = interval
        self._last = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.interval:
                return
            self._last = now
        self.say(text)


def drain_mounts(
    handle: ClusterHandle,
    log_path: Path,
    unmount: bool,
    say: Callable[[str], None] | None = None,
) -> int:
    """Drain every MOUNT_CACHED mount on every node (uploads finish), then maybe unmount.

    The drain's progress lines go to the log and, with ``say``, to the reporter (one line per
    second at most). Raises StageError if a drain fails: unmounting with uploads pending
    would lose them.
    """
    mounts = [m for m in state.get_cluster_mounts(handle.name) if m.is_mount]
    if not mounts:
        return 0
    from skycore.storage import mounting

    cached = [m.dst for m in mounts if m.mode == "MOUNT_CACHED"]
    progress = _Throttled(say) if say is not None else None

    def drain(runner: CommandRunner) -> None:
        logs.append(log_path, f"[{runner.node_name}] drain {', '.join(cached)}")
        rc = runner.run(
            drain_all_command(cached),
            log_path=log_path,
            stream=progress is not None,
            sink=progress,
            prefix=f"[{runner.node_name}] ",
        )
        logs.append(log_path, f"[{runner.node_name}] drain: exit {rc}")
        if rc != 0:
            raise StageError(
                f"Draining the cached mounts on {runner.node_name} failed (exit {rc}); "
                "nothing was unmounted, so no write is lost. Retry the command; if the store "
                "is unreachable, fix that first.",
                log_path=log_path,
                tail=logs.tail(log_path, 10),
            )

    if cached:
        parallel(drain, handle.runners)
    if unmount:
        # unmount_command drains again by itself and refuses to unmount with uploads pending;
        # one command per node unmounts them all, then the idle daemon quits.
        dsts = [m.dst for m in mounts]
        entries = [(f"unmount {', '.join(dsts)}", mounting.unmount_command(dsts, DRAIN_TIMEOUT_S))]
        try:
            run_batch(handle, entries, log_path)
        except StageError as e:
            e.message += (
                " A cached mount with uploads pending is never unmounted, so no write is lost."
                " Retry the command; if the store is unreachable, fix that first."
            )
            raise
    return len(mounts)


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


def pid_alive(pid: int | None) -> bool:
    """True if a local process with ``pid`` exists."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
