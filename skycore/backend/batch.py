"""One exec per node for many steps: node steps (bash, or mounts and copies as objects), the
merge of mount steps, the batch (node program batch.sh) and its results."""

from __future__ import annotations

import io
import os
import re
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from skycore import logs, node
from skycore.backend.handle import ClusterHandle
from skycore.concurrency import parallel
from skycore.errors import StageError
from skycore.runner import CommandRunner
from skycore.storage.mounting import MountStep


@dataclass(frozen=True)
class ShellStep:
    """A node step that is bash (its whole text)."""

    script: str


NodeStep = ShellStep | MountStep
"""One entry of a node batch: bash, or mounts and copies (merged with the batch's others)."""


def step_script(step: NodeStep) -> str:
    """The bash a node runs for ``step``."""
    return step.script() if isinstance(step, MountStep) else step.script


def batch_script(steps: Sequence[str], files: Mapping[str, str] | None = None) -> tuple[str, bytes]:
    """(bash, stdin) running the bash ``steps`` side by side on a node (the node program
    batch.sh), after writing ``files`` ({path: content}, e.g. credentials): each step's output,
    then a ``SKYCORE_ENTRY_RC <i> <exit code>`` line for it. Files and steps travel as a tar
    on stdin, never on a command line."""
    buf = io.BytesIO()

    def add(name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=buf, mode="w") as tar:
        if files:
            for i, content in enumerate(files.values()):
                add(f"files/{i}", content.encode())
            add("files.paths", b"".join(os.fsencode(p) + b"\0" for p in files))
        for i, step in enumerate(steps):
            add(f"steps/{i}", step.encode())
    return node.program("batch.sh"), buf.getvalue()


def write_files_command(files: Mapping[str, str]) -> tuple[str, bytes]:
    """(bash, stdin) writing every file of ``files`` ({path: content}) on a node in one exec,
    each mode 0600 and replaced atomically (``batch_script`` without steps)."""
    return batch_script([], files)


_ENTRY_RC = re.compile(r"^SKYCORE_ENTRY_RC (\d+) (\d+)$")


def merge_mounts(entries: Sequence[tuple[str, NodeStep]]) -> list[tuple[str, NodeStep]]:
    """``entries`` with every mount and copy step (``mounting.MountStep``) of one environment
    merged into one entry that mounts and copies them all through one run of the node
    program and the node's rclone daemon (python's and rclone's start-ups per entry were most
    of a node's mounting CPU); other entries unchanged, the merged one last."""
    others: list[tuple[str, NodeStep]] = []
    whats: list[str] = []
    merged: MountStep | None = None
    for what, step in entries:
        if isinstance(step, MountStep):
            both = step if merged is None else merged.merged(step)
            if both is not None:
                merged = both
                whats.append(what)
                continue
        others.append((what, step))
    if len(whats) < 2 or merged is None:
        return list(entries)
    return [*others, ("; ".join(whats), merged)]


def run_batch(
    handle: ClusterHandle,
    entries: Sequence[tuple[str, NodeStep]],
    log_path: Path,
    files: Mapping[str, str] | None = None,
) -> None:
    """Run ``entries`` ((what, step) pairs) concurrently on every node, one exec per node
    (mount and copy steps merged into one: ``merge_mounts``); StageError naming the entry and
    node (with its output) if any failed. ``files`` ({path: content}, e.g. credentials) are
    written first, in the same exec, through stdin (``batch_script``)."""
    entries = merge_mounts(entries)
    script, stdin = batch_script([step_script(step) for _, step in entries], files)
    if files:
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
