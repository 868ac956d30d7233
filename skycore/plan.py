"""``skycore launch --dryrun``: validate a task against the clouds and show the plan.

Nothing is created or changed: access checks only read (a store that probes write access does
it without leaving an object; see each store's ``access``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from skycore import node_images
from skycore.config import SkycoreConfig
from skycore.storage import Storage, StorageAccessError, StoragePlan, make_store, parse_url, recipes
from skycore.storage.common import is_cloud_url
from skycore.storage.entry_spec import order_given_up
from skycore.task import Task


@dataclass(frozen=True)
class MountPlan:
    """One file_mounts entry as the dry run sees it."""

    dst: str
    source: str
    store: str
    mode: str
    kind: str
    bucket: str
    action: str
    access: str = ""
    """``read-write`` or ``read-only`` for a mount, '' for a copy."""


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def stages(task: Task) -> list[str]:
    """The launch stages this task goes through."""
    out = ["PROVISION"]
    if task.workdir is not None:
        out.append("SYNC_WORKDIR")
    if task.file_mounts or task.storage_mounts:
        out.append("SYNC_FILE_MOUNTS")
    if task.setup:
        out.append("SETUP")
    out.append("EXEC")
    return out


def order_notes(task: Task) -> list[str]:
    """One line per writable MOUNT_CACHED entry whose type, config or transfers uploads
    several files at once, giving up creation order (as SkyPilot does): launch says it once."""
    lines = []
    for dst, st in task.storage_mounts.items():
        line = order_given_up(dst, st.mode, st.mount_type, st.transfers_from, st.mount_options)
        if line is not None:
            lines.append(line)
    return lines


def node_shape(task: Task) -> str:
    """What each node asks for (``", 4 CPUs, 16 GiB memory, 256 GiB disk"``; '' if nothing)."""
    res = task.resources
    parts = [f"{res.cpus:g} CPUs" if res.cpus is not None else ""]
    parts.append(f"{res.memory:g} GiB memory" if res.memory is not None else "")
    parts.append(f"{res.disk_size} GiB disk" if res.disk_size is not None else "")
    return "".join(f", {p}" for p in parts if p)


def _check_url_copy(dst: str, url: str, config: SkycoreConfig) -> None:
    parsed = parse_url(url, f"file_mounts.{dst}")
    info = make_store(parsed.store, parsed.bucket, config, parsed.account).access()
    if not info.exists:
        raise StorageAccessError(
            f"file_mounts.{dst}: the source {url} is in a bucket that does not exist. Check "
            "the URL."
        )
    if not info.can_read:
        raise StorageAccessError(
            f"file_mounts.{dst}: {url} is in a private bucket your credentials cannot read. "
            "Ask its owner for access or use a bucket you own."
        )


def mount_plans(task: Task, config: SkycoreConfig) -> list[MountPlan]:
    """Check every file mount (in parallel) and describe what launch would do with it.
    Raises StorageError / TaskError-like UserErrors on the first problem."""
    storages = list(task.storage_mounts.items())
    urls = [(d, s) for d, s in task.file_mounts.items() if is_cloud_url(s)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        checks = {dst: pool.submit(st.check, config) for dst, st in storages}
        url_checks = [pool.submit(_check_url_copy, d, u, config) for d, u in urls]
        for fut in url_checks:
            fut.result()
        results: dict[str, StoragePlan] = {dst: f.result() for dst, f in checks.items()}
    out = [_plain_copy(dst, src) for dst, src in task.file_mounts.items()]
    for dst, st in storages:
        out.append(_describe(dst, st, results[dst], config))
    return out


def _access(st: Storage, plan: StoragePlan) -> tuple[str, str]:
    """(``read-write`` or ``read-only``, why read-only) of the bucket's mount on a node."""
    if st.mount_options.read_only:
        return "read-only", " (the entry's type or config asks for it)"
    if plan.read_only:
        return "read-only", " (your credentials cannot write to it)"
    return "read-write", ""


def _describe(dst: str, st: Storage, plan: StoragePlan, config: SkycoreConfig) -> MountPlan:
    actions = []
    if plan.create:
        actions.append("create bucket")
    if st.is_local_source:
        actions.append(
            f"upload {plan.upload_files} files ({_size(plan.upload_bytes)}) from {st.source}"
        )
    access = ""
    if st.mode.is_mount:
        access, why = _access(st, plan)
        recipe = recipes.takes(config, st.mode)
        by = f" with the {recipe.name} mount recipe" if recipe is not None else ""
        actions.append(f"mount {access} on every node{by}{why}")
    else:
        what = f"the objects under {st.prefix}" if st.prefix else "the bucket's objects"
        actions.append(f"copy {what} to every node (a snapshot: writes stay on the node)")
    if plan.note and "read-only" not in plan.note:
        actions.append(plan.note)
    kind = st.kind.replace("_", "-")
    if st.kind == "sky_managed" and not st.persistent:
        kind += " (deleted at down)"
    return MountPlan(
        dst=dst,
        source=st.source or "(empty scratch bucket)",
        store=st.store,
        mode=st.mode.value,
        kind=kind,
        bucket=str(st.url(config)),
        action=", ".join(actions),
        access=access,
    )


def _plain_copy(dst: str, src: str) -> MountPlan:
    """A plain file_mounts entry: a local path or a bucket URL copied to every node."""
    if is_cloud_url(src):
        store, what = parse_url(src).store, f"bucket path {src}"
    else:
        store, what = "-", f"local {'folder' if os.path.isdir(src) else 'file'} {src}"
    action = f"copy {what} to every node"
    return MountPlan(dst, src, store, "COPY", "plain copy", src, action, access="")


def dryrun_plan(task: Task, config: SkycoreConfig) -> RenderableType:
    """Validate ``task`` (including bucket access) without creating or changing anything and
    return a rich renderable of the plan: stages, nodes, each mount (store, mode, bucket
    kind) and the buckets to create. Raises a UserError (exit 2) on any problem, also an
    ``image_id`` the local provider cannot run (``node_images.usable_image``: only reads)."""
    res = task.resources
    if res.image_id:
        node_images.usable_image(res.image_id, config)
    mounts = mount_plans(task, config)
    lines: list[RenderableType] = []
    title = f"Plan for task {escape(task.name)}" if task.name else "Plan"
    lines.append(Text.from_markup(f"[bold]{title}[/bold] (dry run: nothing was changed)"))
    lines.append(Text("Stages: " + " -> ".join(stages(task))))
    node_desc = f"Nodes: {task.num_nodes} on {res.cloud or 'the default cloud'}{node_shape(task)}"
    if res.image_id:
        node_desc += f", image {res.image_id}"
    if res.use_spot:
        node_desc += ", spot"
    if res.job_recovery:
        jr = res.job_recovery
        node_desc += f", recovery {jr.strategy} (max {jr.max_restarts_on_errors} restarts)"
    lines.append(Text(node_desc))
    if task.workdir is not None:
        lines.append(Text(f"Workdir: {task.workdir} -> ~/sky_workdir"))
    if mounts:
        table = Table(title="File mounts", title_justify="left", show_lines=False)
        table.add_column("Destination", overflow="fold")
        for col in ("Store", "Mode", "Kind"):
            table.add_column(col, no_wrap=True)
        table.add_column("Bucket / URL", overflow="fold")
        table.add_column("Action", overflow="fold")
        for m in mounts:
            table.add_row(
                escape(m.dst), m.store, m.mode, m.kind, escape(m.bucket), escape(m.action)
            )
        lines.append(table)
    to_create = [m.bucket for m in mounts if m.action.startswith("create bucket")]
    lines.append(Text("Buckets to create: " + (", ".join(to_create) if to_create else "none")))
    lines.extend(Text(line) for line in order_notes(task))
    return Group(*lines)
