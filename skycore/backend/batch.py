"""One exec per node for many commands: the batch script, merged mount requests, results."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skycore import logs
from skycore.backend.handle import ClusterHandle
from skycore.concurrency import parallel
from skycore.errors import StageError
from skycore.runner import CommandRunner

if TYPE_CHECKING:
    pass


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
