"""Command runners: how the core runs commands on a node and copies files to and from it.

Everything the core does on a node goes through a CommandRunner. DockerCommandRunner reaches
a container with ``docker exec`` (commands run in ``bash --login -c``) and copies files with
``rsync -e 'docker exec -i'``, so a resync only sends files that changed.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_print_lock = threading.Lock()

# Written where the user sees it; tests may swap it for another stream.
OutputSink = Callable[[str], None]


def _default_sink(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


@dataclass
class RsyncResult:
    """What an rsync did: its exit code, how many files it sent, and its output."""

    returncode: int
    files_transferred: int
    output: str


def remote_path_expr(path: str) -> str:
    """A bash word for ``path`` on the node: quoted, with a leading ``~`` left to expand."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def ignore_args(src: Path) -> list[str]:
    """rsync filter options for a directory: its .skyignore if present, else .gitignore."""
    if not src.is_dir():
        return []
    if (src / ".skyignore").is_file():
        return [f"--exclude-from={src / '.skyignore'}"]
    if (src / ".gitignore").is_file():
        # dir-merge: every .gitignore in the tree applies to its own folder, like git.
        return ["--filter=:- .gitignore"]
    return []


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(f"invalid environment variable name {name!r}")
    return name


class CommandRunner:
    """Runs commands on one node and copies files to it. Subclasses implement the transport."""

    node_name: str = "node"

    def _exec_argv(self, cmd: str, env: Mapping[str, str] | None, interactive: bool) -> list[str]:
        raise NotImplementedError

    def _rsync_shell(self) -> tuple[str, str]:
        """(value for rsync -e, host part of the remote path)."""
        raise NotImplementedError

    # -- commands ---------------------------------------------------------------------------

    def _with_env(
        self, cmd: str, env: Mapping[str, str] | None, stdin: bytes | None
    ) -> tuple[str, bytes | None]:
        """``cmd`` and stdin that give the command ``env`` without putting a value on any
        command line (``ps``) or in the container's exec records (``docker inspect``).

        Without other stdin, the exports travel through stdin and the command then reads
        /dev/null as before; with stdin, they go to a 0600 file on the node (written through
        stdin) that the command sources and removes before anything else runs.
        """
        if not env:
            return cmd, stdin
        exports = "".join(f"export {_env_name(k)}={shlex.quote(v)}\n" for k, v in env.items())
        if stdin is None:
            prefix = '__sky_env="$(cat)"; eval "$__sky_env"; unset __sky_env; exec </dev/null'
            return f"{prefix}\n{cmd}", exports.encode()
        path = f"~/.sky/env/{uuid.uuid4().hex}"
        self.write_file(path, exports, 0o600)
        expr = remote_path_expr(path)
        return f". {expr}; rm -f {expr}\n{cmd}", stdin

    def run(
        self,
        cmd: str,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        stream: bool = False,
        stdin: bytes | None = None,
        prefix: str = "",
        sink: OutputSink | None = None,
        timeout: float | None = None,
    ) -> int:
        """Run ``cmd`` in ``bash --login -c`` on the node and return its exit code.

        Output (stdout and stderr merged) is appended to ``log_path`` line by line and, with
        ``stream``, written to the terminal with ``prefix`` before each line. ``stdin`` is fed
        to the command (use it for secrets: never put them on a command line).
        """
        cmd, stdin = self._with_env(cmd, env, stdin)
        argv = self._exec_argv(cmd, None, interactive=stdin is not None)
        sink = sink or _default_sink
        log: IO[bytes] | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            if stdin is not None:
                feeder = threading.Thread(target=_feed, args=(proc, stdin), daemon=True)
                feeder.start()
            assert proc.stdout is not None
            for raw in pipe_lines(proc.stdout):
                if log is not None:
                    log.write(raw)
                    log.flush()
                if stream:
                    sink(prefix + raw.decode(errors="replace"))
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.wait()
        finally:
            if log is not None:
                log.close()

    def run_output(
        self,
        cmd: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = 120,
    ) -> tuple[int, str]:
        """Run ``cmd`` and return (exit code, merged output)."""
        cmd, stdin = self._with_env(cmd, env, stdin)
        argv = self._exec_argv(cmd, None, interactive=stdin is not None)
        try:
            proc = subprocess.run(
                argv,
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            out = e.output.decode(errors="replace") if e.output else ""
            return 124, out + f"\n(timed out after {timeout} s)"
        return proc.returncode, proc.stdout.decode(errors="replace")

    def write_file(self, path: str, content: str | bytes, mode: int = 0o600) -> None:
        """Write ``content`` to ``path`` on the node (through stdin) with ``mode``, atomically."""
        data = content.encode() if isinstance(content, str) else content
        target = remote_path_expr(path)
        cmd = (
            f'set -e; umask 077; p={target}; mkdir -p "$(dirname "$p")"; '
            f'cat > "$p.skytmp"; chmod {mode:o} "$p.skytmp"; mv -f "$p.skytmp" "$p"'
        )
        rc, out = self.run_output(cmd, stdin=data)
        if rc != 0:
            raise RuntimeError(f"writing {path} on {self.node_name} failed ({rc}): {out.strip()}")

    _home: str | None = None

    def remember_home(self, path: str) -> None:
        """Cache the home directory another command already read (the health check)."""
        if path.startswith("/"):
            self._home = path

    def home(self) -> str:
        """The node user's home directory (cached)."""
        if self._home is None:
            rc, out = self.run_output('printf "%s" "$HOME"')
            if rc != 0 or not out.startswith("/"):
                raise RuntimeError(f"cannot read $HOME on {self.node_name}: {out.strip()}")
            self._home = out.strip()
        return self._home

    def abs_path(self, path: str) -> str:
        """``path`` with a leading ``~`` replaced by the node's home."""
        if path == "~":
            return self.home()
        if path.startswith("~/"):
            return self.home() + path[1:]
        return path

    # -- files ------------------------------------------------------------------------------

    def rsync_up(
        self,
        src: str | Path,
        dst: str,
        log_path: Path | None = None,
        use_ignore_files: bool = True,
    ) -> RsyncResult:
        """Copy a local file or folder to ``dst`` on the node; unchanged files are skipped.

        A folder's contents land in ``dst``; its .skyignore (else .gitignore) is honoured.
        """
        srcp = Path(src).expanduser()
        dst_abs = self.abs_path(dst)
        parent = dst_abs if srcp.is_dir() else os.path.dirname(dst_abs) or "/"
        # rsync creates the destination folder itself when the folder holding it exists (the
        # home for the workdir): one exec per node less. Deeper paths are made first.
        if not (srcp.is_dir() and os.path.dirname(parent.rstrip("/")) == self.home()):
            rc, out = self.run_output(f"mkdir -p {shlex.quote(parent)}")
            if rc != 0:
                return RsyncResult(rc, 0, out)
        args = ignore_args(srcp) if use_ignore_files else []
        source = str(srcp) + ("/" if srcp.is_dir() else "")
        target = dst_abs.rstrip("/") + ("/" if srcp.is_dir() else "")
        return self._rsync(source, target, up=True, extra=args, log_path=log_path)

    def rsync_down(self, src: str, dst: str | Path, log_path: Path | None = None) -> RsyncResult:
        """Copy a file or folder from the node to a local path."""
        src_abs = self.abs_path(src)
        Path(dst).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return self._rsync(src_abs, str(Path(dst).expanduser()), up=False, log_path=log_path)

    def _rsync(
        self,
        src: str,
        dst: str,
        up: bool,
        extra: list[str] | None = None,
        log_path: Path | None = None,
    ) -> RsyncResult:
        shell, host = self._rsync_shell()
        argv = [
            "rsync",
            "-a",
            "--no-owner",
            "--no-group",
            "--stats",
            "--blocking-io",
            "-e",
            shell,
            *(extra or []),
        ]
        if up:
            argv += [src, f"{host}:{dst}"]
        else:
            argv += [f"{host}:{src}", dst]
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        out = proc.stdout.decode(errors="replace")
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "a") as f:
                f.write(f"$ {shlex.join(argv)}\n{out}\n")
        m = re.search(r"Number of regular files transferred: ([\d,]+)", out)
        count = int(m.group(1).replace(",", "")) if m else 0
        return RsyncResult(proc.returncode, count, out)


WAKE_S = 0.25
"""How often a thread waiting for a command's output wakes up when none comes."""


def pipe_lines(pipe: IO[bytes], wake_s: float = WAKE_S) -> Iterator[bytes]:
    """The lines of ``pipe`` as they come (the last one may lack its newline), read in a way
    that wakes the calling thread every ``wake_s`` s. A Ctrl-C that the kernel hands to
    another thread of this process (the stdin feeder, a progress display) sets Python's flag
    but does not interrupt the main thread's blocking read: a main thread that followed a
    quiet job with ``readline`` ignored Ctrl-C until the job printed again. Waking up, it
    acts on it at once. Linear in the output, long lines included (a progress bar's ``\\r``
    updates are one line)."""
    fd = pipe.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    partial: list[bytes] = []
    while True:
        if not poller.poll(wake_s * 1000):
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        if b"\n" not in chunk:
            partial.append(chunk)
            continue
        first, *middle, last = chunk.split(b"\n")
        yield b"".join([*partial, first, b"\n"])
        for line in middle:
            yield line + b"\n"
        partial = [last] if last else []
    if partial:
        yield b"".join(partial)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


class DockerCommandRunner(CommandRunner):
    """Runs commands in a container with the docker CLI (``docker -H HOST exec``)."""

    def __init__(self, container: str, docker_host: str, docker_bin: str = "docker") -> None:
        self.container = container
        self.docker_host = docker_host
        self.docker_bin = docker_bin
        self.node_name = container

    def _docker(self) -> list[str]:
        return [self.docker_bin, "-H", self.docker_host]

    def _exec_argv(self, cmd: str, env: Mapping[str, str] | None, interactive: bool) -> list[str]:
        argv = [*self._docker(), "exec"]
        if interactive:
            argv.append("-i")
        for k, v in (env or {}).items():
            argv += ["-e", f"{k}={v}"]
        return [*argv, self.container, "bash", "--login", "-c", cmd]

    def _rsync_shell(self) -> tuple[str, str]:
        return shlex.join([*self._docker(), "exec", "-i"]), self.container
