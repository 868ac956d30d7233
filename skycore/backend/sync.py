"""SYNC_WORKDIR and SYNC_FILE_MOUNTS on the nodes: the workdir, plain copies, credentials,
storage copies and mounts."""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from skycore import logs
from skycore.backend.batch import NodeStep, run_batch, write_files_command
from skycore.backend.handle import ClusterHandle
from skycore.backend.mounts import mount_entry, prepare_nodes
from skycore.concurrency import parallel
from skycore.config import SkycoreConfig
from skycore.errors import StageError
from skycore.runner import CommandRunner
from skycore.state.mounts import MountRecord, get_cluster_mounts, set_cluster_mounts
from skycore.storage import recipes

if TYPE_CHECKING:
    from skycore.storage.storage import Storage
    from skycore.task import Task

WORKDIR = "~/sky_workdir"
Say = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# SYNC_WORKDIR / SYNC_FILE_MOUNTS
# ---------------------------------------------------------------------------------------------


def _rsync(runner: CommandRunner, src: str | Path, dst: str, log_path: Path, what: str) -> int:
    """rsync ``src`` to ``dst`` on the runner's node: files sent; StageError saying ``what``
    failed (with the log's tail) otherwise."""
    res = runner.rsync_up(src, dst, log_path=log_path)
    if res.returncode != 0:
        raise StageError(
            f"{what} failed (rsync exit {res.returncode}).",
            log_path=log_path,
            tail=logs.tail(log_path, 10),
        )
    return res.files_transferred


def sync_workdir(handle: ClusterHandle, workdir: Path, log_path: Path) -> int:
    """rsync the workdir to ~/sky_workdir on every node in parallel; files sent per node."""

    def one(runner: CommandRunner) -> int:
        what = f"Syncing workdir {workdir} to {runner.node_name}"
        return _rsync(runner, workdir, WORKDIR, log_path, what)

    counts = parallel(one, handle.runners)
    return max(counts) if counts else 0


def write_credentials(handle: ClusterHandle, log_path: Path) -> None:
    """Write the store credential files and the mount helper on every node (mode 0600,
    through stdin)."""
    from skycore.storage import rclone_env

    files = rclone_env.node_files(handle.config)
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


def _prepare_one(
    dst: str, st: Storage, config: SkycoreConfig, log_path: Path, upload_progress: bool
) -> None:
    logs.append(log_path, f"prepare {dst}: {st.bucket_url} ({st.kind}, {st.mode.value})")
    res = st.prepare(config, progress=upload_progress)
    if res is not None:
        logs.append(log_path, f"prepare {dst}: {res}")


def check_bucket_sources(task: Task, config: SkycoreConfig, log_path: Path) -> set[str]:
    """Prepare every entry whose source is an existing bucket (check and record it), in
    parallel, and wait: launch calls it before any node or bucket is made, so a bucket that
    does not exist or cannot be read is refused while nothing has changed (and so is a
    mount_recipe that names no recipe). Returns their destinations."""
    if task.storage_mounts:
        recipes.active(config)
    external = {dst: st for dst, st in task.storage_mounts.items() if st.kind == "external"}
    if not external:
        return set()
    with ThreadPoolExecutor(max_workers=min(16, len(external)), thread_name_prefix="check") as pool:
        checks = [
            pool.submit(_prepare_one, dst, st, config, log_path, False)
            for dst, st in external.items()
        ]
        for check in checks:
            check.result()
    return set(external)


def start_storage_prepare(
    task: Task,
    config: SkycoreConfig,
    log_path: Path,
    pool: ThreadPoolExecutor,
    upload_progress: bool = False,
    checked: Collection[str] = (),
) -> dict[str, Future[None]]:
    """Start the client side of each storage entry (create bucket, upload source) in ``pool``.

    Needs no node, so launch starts it before PROVISION; returns a future per destination.
    ``checked`` entries (``check_bucket_sources``) were prepared already.
    """
    futures: dict[str, Future[None]] = {}
    for dst, st in task.storage_mounts.items():
        if dst in checked:
            futures[dst] = Future()
            futures[dst].set_result(None)
        else:
            futures[dst] = pool.submit(_prepare_one, dst, st, config, log_path, upload_progress)
    return futures


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
        _rsync(runner, src, dst, log_path, f"Copying {src} to {dst} on {runner.node_name}")

    if jobs:
        say(f"copying {len(local)} local file mount(s) to {handle.num_nodes} node(s)")
        parallel(copy_local, jobs)

    storages = dict(task.storage_mounts)
    if not storages and not urls:
        return len(local), 0  # mounts of an earlier launch stay recorded (and drained)

    from skycore.storage.plain_copy import plain_copy_step

    # 2. Storage: each entry waits for its own bucket/upload, then goes to every node; the
    #    entries proceed independently, so a slow upload holds back only its own mount.
    own_pool: ThreadPoolExecutor | None = None
    if prepared is None:
        own_pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(storages))))
        prepared = start_storage_prepare(task, handle.config, log_path, own_pool, upload_progress)
    say(f"{len(storages) + len(urls)} storage entr(ies) to {handle.num_nodes} node(s)")
    records: list[MountRecord] = []

    def node_entry(dst: str) -> tuple[str, NodeStep] | None:
        """(what, node step) for one entry, None if nothing is to be done; records mounts (even if
        they then fail on a node, so that stop/down still drain them)."""
        if dst in urls:
            url = urls[dst]
            return f"copy {url} -> {dst}", plain_copy_step(url, dst, handle.config)
        st = storages[dst]
        prepared[dst].result()  # re-raises a failed bucket creation / upload
        mode = st.mode.value
        # Only buckets skycore created can be deleted by down; external ones never are.
        persistent = st.persistent or st.kind != "sky_managed"
        if mode == "COPY":
            records.append(MountRecord(handle.name, dst, st.name, mode, persistent, None))
            return f"copy {dst} ({st.name})", st.copy_step(dst, handle.config)
        spec = st.mount_spec()
        records.append(MountRecord(handle.name, dst, st.name, mode, persistent, spec))
        # A mount still live from an earlier launch is left alone by the mount script itself
        # (one live probe per node for the whole batch; no separate probe exec).
        return f"mount {dst} ({mode})", mount_entry(st, dst, handle.config)

    previous = get_cluster_mounts(handle.name)
    waiting = [*urls, *storages]
    # The credential files and the mount helper travel with the first batch (one exec per
    # node less); written on their own only if no batch runs.
    from skycore.storage import rclone_env

    files: dict[str, str] = rclone_env.node_files(handle.config)
    prepare_nodes(handle, [st.mode.value for st in storages.values()])
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
        set_cluster_mounts(handle.name, records + [m for m in previous if m.dst not in new])
    return len(local) + len(urls), len(storages)


def _is_url(src: str) -> bool:
    return "://" in src
