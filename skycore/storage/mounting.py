"""rclone on the nodes: daemon folders and the node steps that mount, copy, drain and
unmount (``MountStep`` for mounts and copies, as objects until a node runs them; each renders
as the node program skycore/node/mountd.sh with its request as data). A mount's options are
storage/vfs_options; the credential files are storage/rclone_env. Secrets live only in the
rclone config file, never on a command line. The paths of rclone, its config and the daemons'
folders are parameters (``RcloneEnv``, storage/rclone_env) so the same steps run on a node
and, in tests, on the host.

One ``rclone rcd`` per node serves every mount of that node (``mount/mount`` over a unix rc
socket; nodes share the host network, so never a TCP rc port). ``--transfers`` (and any
``MountOptions.extra_flags``) are global to a daemon, so a node runs one daemon per distinct
setting: in practice one, since every uncached or read-only mount goes to the default daemon.
Each daemon has a folder (``daemon_dirs``) with its socket, log and VFS cache. What talks to
the daemons is the node program skycore/node/mountd (start, mount, live-mount probe, the
drain rule, unmount, and for a writable MOUNT_CACHED mount, which keeps its listing for its
life (``KEEP_LISTING``) so that a writer never waits for the store, the refresher and the
order keeper), which gets one JSON request per step.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from skycore import node
from skycore.node.mountd.order import hold_back
from skycore.storage.common import StorageMode
from skycore.storage.rclone_env import NODE_ENV, NODE_MOUNTS_BASE, RcloneEnv
from skycore.storage.rclone_env import node_credential_files as node_credential_files
from skycore.storage.rclone_env import node_files as node_files
from skycore.storage.rclone_env import rclone_config_text as rclone_config_text
from skycore.storage.vfs_options import KEEP_LISTING as KEEP_LISTING
from skycore.storage.vfs_options import (
    MountOptions,
    keeps_listing,
    mount_options,
    ordered,
    rc_config,
)

DEFAULT_DRAIN_TIMEOUT_S = 600.0
P = ParamSpec("P")


@dataclass(frozen=True)
class MountDirs:
    """A daemon's folder: VFS cache, log file and rc unix socket."""

    base: str
    cache_dir: str
    log_file: str
    rc_socket: str

    @classmethod
    def of(cls, d: str) -> MountDirs:
        return cls(d, cache_dir=f"{d}/cache", log_file=f"{d}/rclone.log", rc_socket=f"{d}/rc.sock")

    @property
    def rc_addr(self) -> str:
        """Value for ``--rc-addr``."""
        return f"unix://{self.rc_socket}"


def daemon_key(mode: StorageMode, options: MountOptions) -> tuple[int, tuple[str, ...]]:
    """(transfers, extra flags) of the daemon serving a mount: the mount's own for a writable
    MOUNT_CACHED mount (they decide its uploads), the default daemon's otherwise."""
    if mode is StorageMode.MOUNT_CACHED and not options.read_only:
        return options.transfers, options.extra_flags
    return 1, ()


def daemon_dirs(
    transfers: int = 1, extra_flags: tuple[str, ...] = (), base: str = NODE_MOUNTS_BASE
) -> MountDirs:
    """The folder of the node daemon with these global settings (short enough for a unix
    socket path)."""
    name = f"rcd-t{transfers}"
    if extra_flags:
        name += "-" + hashlib.sha256("\0".join(extra_flags).encode()).hexdigest()[:8]
    return MountDirs.of(f"{base.rstrip('/')}/{name}")


def mount_dirs(
    dst: str,
    base: str = NODE_MOUNTS_BASE,
    mode: StorageMode = StorageMode.MOUNT,
    options: MountOptions | None = None,
) -> MountDirs:
    """The folder of the daemon that serves the mount at ``dst`` (the same for every mount
    point with the same settings)."""
    del dst  # one daemon serves every mount point
    transfers, extra = daemon_key(mode, options or MountOptions())
    return daemon_dirs(transfers, extra, base)


# --- Node steps: what a node runs to mount, copy, drain and unmount -------------------------


def _mountd(command: str, request: dict[str, Any], helper: str | None = None) -> str:
    """Bash running mountd ``command`` with ``request`` (the node program mountd.sh): the
    program's text inlined, or run from the file ``helper`` that node_files wrote (mount
    steps, many per batch)."""
    program = (
        {"SKYCORE_MOUNTD_FILE": helper}
        if helper
        else {"SKYCORE_MOUNTD_PROGRAM": node.program("mounts.py")}
    )
    arguments = {
        "SKYCORE_MOUNTD_COMMAND": command,
        node.REQUEST_ENV: json.dumps(request, sort_keys=True),
    }
    return node.script("mountd.sh", arguments | program)


@dataclass(frozen=True)
class CopyRequest:
    """One COPY snapshot a node makes: the first of ``sources`` (rclone paths, tried in turn)
    that works, copied to ``dst`` (a folder for a bucket or prefix, a file for an object)."""

    sources: tuple[str, ...]
    dst: str


@dataclass(frozen=True)
class MountRequest:
    """One mount a node makes: ``remote_path`` at ``dst`` in ``mode``."""

    remote_path: str
    dst: str
    mode: StorageMode
    options: MountOptions = field(default_factory=MountOptions)


def copy_daemon_dirs(base: str = NODE_MOUNTS_BASE) -> MountDirs:
    """The folder of the daemon that makes a node's COPY snapshots: a daemon of its own,
    started for a batch's copies and quitting after them, so the memory a copy takes is
    given back at once (in the mounts' daemon it stayed, ~16 MiB in some runs)."""
    return MountDirs.of(f"{base.rstrip('/')}/rcd-copy")


def daemon_flags(dirs: MountDirs, transfers: int, extra_flags: tuple[str, ...] = ()) -> list[str]:
    """Global flags of a node daemon (what node/mountd passes besides rc address, cache
    folder and log; listed here for documentation and tests)."""
    return [
        "--rc-addr", dirs.rc_addr, "--rc-no-auth",
        "--cache-dir", dirs.cache_dir,
        "--transfers", str(transfers),
        "--log-file", dirs.log_file,
        *extra_flags,
    ]  # fmt: skip


def refresh_every(mode: StorageMode, options: MountOptions) -> float | None:
    """For a mount that keeps its listing: seconds between the background refreshes of it
    (0: only the one at mount time); None for any other mount (rclone lists on demand)."""
    return max(0.0, options.refresh_s) if keeps_listing(mode, options) else None


def _serialize_releases(mode: StorageMode, options: MountOptions) -> str:
    """The fusectl setting of an ordered MOUNT_CACHED mount's FUSE connection that the node
    sets to 1 once the mount answered, so that the kernel sends its FUSE RELEASE requests
    one at a time ('' for any other mount). If the setting cannot be applied (and read back)
    the node undoes the fresh mount and the step fails: order is a promise, never a warning.

    rclone queues a cached file for upload when it handles the file's RELEASE. The kernel
    sends RELEASE asynchronously after close() and rclone serves requests concurrently, so
    files closed microseconds apart can be queued out of order, and --transfers 1 then
    uploads them out of order. With the connection's max_background at 1 (fusectl), the
    next RELEASE is sent only after rclone answered the previous one: queue order is close
    order. Only background requests (RELEASE, async reads) are affected.
    """
    if mode is not StorageMode.MOUNT_CACHED or options.transfers != 1 or options.read_only:
        return ""
    return "max_background"


def tagged_remote(remote_path: str, dst: str, params: str = "") -> str:
    """``remote_path`` with the mount's backend ``params`` and one naming the mount point
    (``remote,description=skycore-<hash of dst>...:path``: every backend has it and it changes
    only the Fs name), so two mounts of the same bucket stay two VFSes that ``vfs/stats fs=``
    tells apart, each with its own cache folder (stable across remounts)."""
    from skycore.node.mountd.copying import remote_colon  # the node program's own parser

    tag = hashlib.sha256(dst.encode()).hexdigest()[:10]
    j = remote_colon(remote_path)
    if j < 0:
        return remote_path
    return f"{remote_path[:j]},description=skycore-{tag}{params}{remote_path[j:]}"


def _mount_spec(req: MountRequest, env: RcloneEnv) -> dict[str, Any]:
    """What the node program gets for one mount (``mountd.mount``)."""
    transfers, extra = daemon_key(req.mode, req.options)
    dirs = daemon_dirs(transfers, extra, env.mounts_base)
    vfs, mnt = mount_options(req.mode, req.options)
    return {
        "rclone": env.rclone, "config": env.config_file, "dir": dirs.base,
        "transfers": transfers, "extra": list(extra),
        "fs": tagged_remote(req.remote_path, req.dst, req.options.remote_params), "dst": req.dst,
        "vfs": vfs, "mount": mnt, "rc_config": rc_config(req.options),
        "refresh": refresh_every(req.mode, req.options),
        "remote": req.remote_path, "mode": req.mode.value,
        "serialize": _serialize_releases(req.mode, req.options),
        "order": hold_back(req.options.write_back_s) if ordered(req.mode, req.options) else None,
    }  # fmt: skip


def _copy_spec(req: CopyRequest, env: RcloneEnv) -> dict[str, Any]:
    dirs = copy_daemon_dirs(env.mounts_base)
    return {
        "rclone": env.rclone, "config": env.config_file, "dir": dirs.base, "transfers": 1,
        "extra": [], "sources": list(req.sources), "dst": req.dst,
    }  # fmt: skip


@dataclass(frozen=True)
class MountStep:
    """A node step that mounts ``mounts`` and makes the COPY snapshots ``copies`` through the
    node's rclone daemons, in one run of the node program (python's and rclone's start-ups per
    mount were most of a node's mounting CPU). Steps with the same ``env`` merge
    (``merged``); ``script`` is the bash a node runs for it."""

    mounts: tuple[MountRequest, ...] = ()
    copies: tuple[CopyRequest, ...] = ()
    env: RcloneEnv = NODE_ENV

    def merged(self, other: MountStep) -> MountStep | None:
        """This step and ``other`` as one (None when their environments differ)."""
        if other.env != self.env:
            return None
        return MountStep(self.mounts + other.mounts, self.copies + other.copies, self.env)

    def request(self) -> dict[str, Any]:
        """The JSON request the node program gets (``mountd.mount``, ``copy-many``)."""
        out: dict[str, Any] = {"copies": [_copy_spec(c, self.env) for c in self.copies]}
        if self.mounts:
            out["base"] = self.env.mounts_base
            out["mounts"] = [_mount_spec(r, self.env) for r in self.mounts]
        return out

    def script(self) -> str:
        """Idempotent bash that mounts every request (skycore/node/mountd/mount.py) and makes
        the copies meanwhile; copies alone run through the copy daemon, which quits after
        them, the program inlined. Exit 1 if a mount or copy failed."""
        if not self.mounts:
            return _mountd("copy-many", self.request())
        return _mountd("up-many", self.request(), self.env.helper)


def copy_command(remote_path: str, dst: str, env: RcloneEnv = NODE_ENV) -> str:
    """Bash that copies ``remote_path`` (an object or a folder) to ``dst`` on the node,
    through the node's copy daemon (``copy_daemon_dirs``; it quits after the copies): a
    bucket or prefix into the folder ``dst``, an object to the file ``dst``."""
    return copy_with_fallback_command([remote_path], dst, env)


def copy_step(remote_paths: Sequence[str], dst: str, env: RcloneEnv = NODE_ENV) -> MountStep:
    """The node step copying the first of ``remote_paths`` that works to ``dst``."""
    return MountStep(copies=(CopyRequest(tuple(remote_paths), dst),), env=env)


def mount_step(
    remote_path: str,
    dst: str,
    mode: StorageMode,
    options: MountOptions | None = None,
    env: RcloneEnv = NODE_ENV,
) -> MountStep:
    """The node step mounting ``remote_path`` at ``dst`` (``MountStep``)."""
    return MountStep((MountRequest(remote_path, dst, mode, options or MountOptions()),), env=env)


def _bash_of(make: Callable[P, MountStep], doc: str) -> Callable[P, str]:
    """A function taking ``make``'s arguments and returning the bash of the step it makes
    (``MountStep.script``), documented by ``doc``."""

    def bash(*args: P.args, **kwargs: P.kwargs) -> str:
        return make(*args, **kwargs).script()

    bash.__doc__ = doc
    return bash


copy_with_fallback_command = _bash_of(
    copy_step,
    """Like copy_command, trying each remote path in turn (user credentials, then anonymous).""",
)
mount_command = _bash_of(
    mount_step,
    """Idempotent bash that mounts ``remote_path`` at ``dst`` through the node's daemon
    (started if none answers). See ``MountStep.script``.""",
)


def _drain_request(dst: str | Sequence[str], timeout_s: float, env: RcloneEnv) -> dict[str, Any]:
    dsts = [dst] if isinstance(dst, str) else list(dst)
    return {"base": env.mounts_base, "timeout": timeout_s, "dsts": dsts}


def drain_command(
    dst: str | Sequence[str],
    timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Bash that waits until every mount in ``dst`` (one or several mount points) is durable:
    the drain rule of skycore/node/mountd, printing progress. Exits 0 when drained (or not a
    skycore mount), 1 on timeout with uploads pending, 2 when rclone does not answer."""
    return _mountd("drain", _drain_request(dst, timeout_s, env))


def unmount_command(
    dst: str | Sequence[str],
    timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Bash that drains the mount at ``dst`` and then unmounts it. With uploads still pending
    after ``timeout_s`` it refuses (exit 1) and leaves the mount in place. A stale mount whose
    rclone is gone is unmounted lazily (its cache stays on disk for the next mount). A daemon
    left without mounts quits."""
    return _mountd("unmount", _drain_request(dst, timeout_s, env))


def live_command(dsts: Sequence[str], env: RcloneEnv = NODE_ENV) -> str:
    """Bash printing ``SKYCORE_LIVE <dst>`` for each of ``dsts`` that is mounted and served by
    an answering daemon (the live-mount probe)."""
    return _mountd("live", {"base": env.mounts_base, "dsts": list(dsts)})
