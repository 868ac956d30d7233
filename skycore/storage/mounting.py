"""rclone command builders: node credential files, copy, mount, drain and unmount scripts.

Everything here returns plain bash (to run through a CommandRunner) or file contents (to write
through the runner's stdin). Secrets live only in the rclone config file, never on a command
line. The paths of rclone, its config and the daemons' folders are parameters (``RcloneEnv``)
so the same scripts run on a node and, in tests, on the host.

One ``rclone rcd`` per node serves every mount of that node (``mount/mount`` over a unix rc
socket; nodes share the host network, so never a TCP rc port). ``--transfers`` (and any
``MountOptions.extra_flags``) are global to a daemon, so a node runs one daemon per distinct
setting: in practice one, since every uncached or read-only mount goes to the default daemon.
Each daemon has a folder (``daemon_dirs``) with its socket, log and VFS cache. What talks to
the daemons on the node is the node program skycore/node/mounts.py (start, mount, live-mount
probe, the drain rule, unmount), streamed inside these scripts.

A writable MOUNT_CACHED mount never waits for the store to create, write or close a file.
rclone's VFS lists a directory from the store whenever its listing is older than the mount's
DirCacheTime (vfs/dir.go ``_age``), and a create looks the name up in that listing first: with
the 10 s of the other mounts, a create after 10 s without a listing failed under a 403 and
waited out an outage or a 503 storm. So such a mount keeps its listing for its life
(``KEEP_LISTING``): the node program lists its top directory when mounting it, and the
node's refresher (skycore/node/mounts.py) lists its whole tree right after, then every
``MountOptions.refresh_s``, in the background (rc ``vfs/refresh`` recursive, which lists
without holding the directories' locks and keeps the old listing when it fails, so that a
writer never waits for it).
The same refresher keeps such a mount's uploads in creation order when the store fails them
(``OrderKeeper`` there): rclone alone puts a failed upload behind the files created after
it, which a writer that goes on during a fault would otherwise see.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skycore import node
from skycore.config import SkycoreConfig
from skycore.storage.common import StorageMode

NODE_RCLONE = "/usr/local/bin/rclone"
NODE_RCLONE_CONFIG = "/root/.config/rclone/rclone.conf"
NODE_MOUNTS_BASE = "/var/lib/skycore/mounts"
NODE_HELPER = "/var/lib/skycore/bin/skycore-mounts.py"

DEFAULT_DRAIN_TIMEOUT_S = 600.0

KEEP_LISTING = "876000h"
"""DirCacheTime of a writable MOUNT_CACHED mount: 100 years, i.e. the mount's life. Its
listing is never re-read on demand (a create would then wait for the store); the node's
refresher re-reads it in the background instead."""

DIR_CACHE_TIME = "10s"
"""DirCacheTime of every other mount (MOUNT, read-only MOUNT_CACHED): listings re-read on
demand once they are 10 s old."""


@dataclass(frozen=True)
class RcloneEnv:
    """Where rclone, its config file, the daemons' folders and the mount helper are (node
    defaults)."""

    rclone: str = NODE_RCLONE
    config_file: str = NODE_RCLONE_CONFIG
    mounts_base: str = NODE_MOUNTS_BASE
    helper: str = NODE_HELPER  # skycore/node/mounts.py as written by node_files


NODE_ENV = RcloneEnv()


@dataclass(frozen=True)
class MountOptions:
    """Per-mount tuning. ``transfers=1`` keeps cached uploads in creation order.

    ``write_back_s``: how long a closed file waits before its upload starts (rclone never
    uploads a file that is open for writing; reopening a queued file takes it off the queue).
    It is the time the node's order keeper has to see a new upload before rclone may start
    it (1 s: at 0.1 s a loaded node's keeper missed some, and uploads lost their order); a
    drain lets waiting uploads go at once, so a flush never pays it. From HOLD_FOR_S / 2 (30 s)
    on, the node's programs read an upload as held back (tests use 120 s to keep uploads
    pending).
    ``refresh_s``: how often the node re-reads a writable MOUNT_CACHED mount's listing from
    the store in the background (0: never after the one at mount time); objects that others
    add to the bucket show up in the mount after at most about that long.
    ``transfers`` and ``extra_flags`` (rclone global flags) belong to the node's daemon: a
    mount with other values gets a daemon of its own. ``upload_config`` is rclone global
    options (name, value) for this mount alone, sent as ``mount/mount``'s ``_config``: they
    apply to its VFS, so to its write-back uploads (the store's ``cached_upload_config``).
    """

    transfers: int = 1
    write_back_s: float = 1.0
    read_only: bool = False
    refresh_s: float = 10.0
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    upload_config: tuple[tuple[str, str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class MountDirs:
    """A daemon's folder: VFS cache, log file and rc unix socket."""

    base: str
    cache_dir: str
    log_file: str
    rc_socket: str

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
    d = f"{base.rstrip('/')}/{name}"
    return MountDirs(
        base=d, cache_dir=f"{d}/cache", log_file=f"{d}/rclone.log", rc_socket=f"{d}/rc.sock"
    )


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


def sh_path(path: str) -> str:
    """Quote a path for bash, keeping a leading ``~/`` expandable."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + (shlex.quote(path[1:]) if len(path) > 1 else "")
    return shlex.quote(path)


# ---------------------------------------------------------------------------------------------
# Credentials
# ---------------------------------------------------------------------------------------------


def rclone_section(name: str, options: Mapping[str, str | None]) -> str:
    """One rclone.conf section ``[name]`` (options whose value is None are left out)."""
    lines = [f"[{name}]"] + [f"{k} = {v}" for k, v in options.items() if v is not None]
    return "\n".join(lines) + "\n"


def rclone_config_text(config: SkycoreConfig) -> str:
    """rclone.conf with the remotes of every configured store (each store writes its own)."""
    from skycore.storage.registry import store_classes

    parts = [
        cls.rclone_config(section)
        for cls in store_classes().values()
        if (section := config.section(cls.config_section)) is not None
    ]
    return "\n".join(parts)


def node_credential_files(
    config: SkycoreConfig, rclone_config_path: str = NODE_RCLONE_CONFIG
) -> dict[str, str]:
    """{remote path: content} of the credential files a node needs (write them mode 0600,
    owned by root, through stdin). Holds rclone remotes for every configured store."""
    return {rclone_config_path: rclone_config_text(config)}


def node_files(config: SkycoreConfig, env: RcloneEnv = NODE_ENV) -> dict[str, str]:
    """{path: content} of every file a node needs before mounting: the credential files and
    the mount helper (skycore/node/mounts.py, which mount scripts run from a file: inlined,
    a batch of mount scripts would exceed the kernel's limit on one argument)."""
    return node_credential_files(config, env.config_file) | {env.helper: node.program("mounts.py")}


# ---------------------------------------------------------------------------------------------
# Scripts
# ---------------------------------------------------------------------------------------------

_PRELUDE = "set -euo pipefail\nunset AWS_CA_BUNDLE\n"

_IS_MOUNTED = "is_mounted() { awk -v d=\"$1\" '$2 == d {f=1} END {exit !f}' /proc/self/mounts; }\n"

# The node program skycore/node/mounts.py as a bash function: inlined (standalone scripts run
# once per node: drain, unmount, live probe) or run from the file node_files wrote (mount
# scripts, many per batch).
_NEED_PY = (
    "command -v python3 >/dev/null 2>&1 || { echo 'skycore: python3 is missing on this node "
    "(skycore runs its mount helper with it); install python3 in the node image.' >&2; "
    "exit 127; }\n"
)
_NODE_FN = _NEED_PY + node.python_function("skycore_mounts")


def _node_fn_file(env: RcloneEnv) -> str:
    h = shlex.quote(env.helper)
    return (
        _NEED_PY
        + "skycore_mounts() {\n"
        + f"  if [ ! -f {h} ]; then echo 'skycore: the mount helper '{h}' is missing on this "
        + "node; it is written with the credentials (skycore launch or start does that).' >&2; "
        + "return 1; fi\n"
        + f'  python3 {h} "$@"\n'
        + "}\n"
    )


def _rclone(env: RcloneEnv) -> str:
    return f"{shlex.quote(env.rclone)} --config {shlex.quote(env.config_file)}"


@dataclass(frozen=True)
class CopyRequest:
    """One COPY snapshot a node makes: the first of ``sources`` (rclone paths, tried in turn)
    that works, copied to ``dst`` (a folder for a bucket or prefix, a file for an object)."""

    sources: tuple[str, ...]
    dst: str


# A copy script names its request on a comment line, so a node batch can merge it with the
# mount scripts (copy_requests_of + mount_many_command): the daemon then copies, with no
# rclone process of its own.
_COPY_TAG = "# skycore-copy-request "


def copy_daemon_dirs(base: str = NODE_MOUNTS_BASE) -> MountDirs:
    """The folder of the daemon that makes a node's COPY snapshots: a daemon of its own,
    started for a batch's copies and quitting after them, so the memory a copy takes is
    given back at once (in the mounts' daemon it stayed, ~16 MiB in some runs)."""
    d = f"{base.rstrip('/')}/rcd-copy"
    return MountDirs(
        base=d, cache_dir=f"{d}/cache", log_file=f"{d}/rclone.log", rc_socket=f"{d}/rc.sock"
    )


def _copy_spec(req: CopyRequest, env: RcloneEnv) -> dict[str, Any]:
    dirs = copy_daemon_dirs(env.mounts_base)
    return {
        "rclone": env.rclone, "config": env.config_file, "dir": dirs.base, "transfers": "1",
        "extra": [], "sources": list(req.sources), "dst": req.dst,
    }  # fmt: skip


def _copy_tag(req: CopyRequest, env: RcloneEnv) -> str:
    data = {"sources": list(req.sources), "dst": req.dst}
    data["env"] = [env.rclone, env.config_file, env.mounts_base, env.helper]
    return _COPY_TAG + json.dumps(data, sort_keys=True) + "\n"


def copy_requests_of(script: str) -> tuple[list[CopyRequest], RcloneEnv] | None:
    """The copy requests and environment of a script made by ``copy_command`` /
    ``copy_with_fallback_command`` (None for any other script)."""
    reqs: list[CopyRequest] = []
    envs = set()
    for line in script.splitlines():
        if line.startswith(_COPY_TAG):
            d = json.loads(line[len(_COPY_TAG) :])
            envs.add(tuple(d["env"]))
            reqs.append(CopyRequest(tuple(d["sources"]), d["dst"]))
    if not reqs or len(envs) != 1:
        return None
    rclone, config_file, mounts_base, helper = envs.pop()
    return reqs, RcloneEnv(rclone, config_file, mounts_base, helper)


def copy_command(remote_path: str, dst: str, env: RcloneEnv = NODE_ENV) -> str:
    """Bash that copies ``remote_path`` (an object or a folder) to ``dst`` on the node,
    through the node's copy daemon (``copy_daemon_dirs``; it quits after the copies): a
    bucket or prefix into the folder ``dst``, an object to the file ``dst``."""
    return copy_with_fallback_command([remote_path], dst, env)


def copy_with_fallback_command(remote_paths: list[str], dst: str, env: RcloneEnv = NODE_ENV) -> str:
    """Like copy_command, trying each remote path in turn (user credentials, then anonymous)."""
    req = CopyRequest(tuple(remote_paths), dst)
    return (
        _PRELUDE
        + _copy_tag(req, env)
        + _NODE_FN
        + f"skycore_mounts copy-many {shlex.quote(json.dumps([_copy_spec(req, env)]))}\n"
    )


def daemon_flags(dirs: MountDirs, transfers: int, extra_flags: tuple[str, ...] = ()) -> list[str]:
    """Global flags of a node daemon (what node/mounts.py passes besides rc address, cache
    folder and log; listed here for documentation and tests)."""
    return [
        "--rc-addr", dirs.rc_addr, "--rc-no-auth",
        "--cache-dir", dirs.cache_dir,
        "--transfers", str(transfers),
        "--log-file", dirs.log_file,
        *extra_flags,
    ]  # fmt: skip


def keeps_listing(mode: StorageMode, options: MountOptions) -> bool:
    """True for a mount whose writer must never wait for the store (writable MOUNT_CACHED):
    it keeps its directory listing for its life, refreshed in the background."""
    return mode is StorageMode.MOUNT_CACHED and not options.read_only


def mount_options(
    mode: StorageMode, options: MountOptions
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(vfsOpt, mountOpt) of rclone's ``mount/mount`` for a mount in ``mode``."""
    vfs: dict[str, Any] = {"DirCacheTime": DIR_CACHE_TIME}
    if mode is StorageMode.MOUNT_CACHED:
        vfs |= {
            "CacheMode": "full",
            "WriteBack": f"{options.write_back_s:g}s",
            "CacheMaxAge": "24h",
        }
        if keeps_listing(mode, options):
            vfs["DirCacheTime"] = KEEP_LISTING
    elif mode is StorageMode.MOUNT:
        vfs["CacheMode"] = "off"
    else:
        raise ValueError("COPY is not a mount mode")
    if options.read_only:
        vfs["ReadOnly"] = True
    return vfs, {"AllowOther": True}


def refresh_every(mode: StorageMode, options: MountOptions) -> float | None:
    """For a mount that keeps its listing: seconds between the background refreshes of it
    (0: only the one at mount time); None for any other mount (rclone lists on demand)."""
    return max(0.0, options.refresh_s) if keeps_listing(mode, options) else None


def _serialize_releases(mode: StorageMode, options: MountOptions) -> str:
    """Bash (after the mount answered) that makes the kernel send this mount's FUSE RELEASE
    requests one at a time, for an ordered MOUNT_CACHED mount ('' otherwise). If the setting
    cannot be applied (and read back) the fresh mount is undone and the script fails: order
    is a promise, never a warning.

    rclone queues a cached file for upload when it handles the file's RELEASE. The kernel
    sends RELEASE asynchronously after close() and rclone serves requests concurrently, so
    files closed microseconds apart can be queued out of order, and --transfers 1 then
    uploads them out of order. With the connection's max_background at 1 (fusectl), the
    next RELEASE is sent only after rclone answered the previous one: queue order is close
    order. Only background requests (RELEASE, async reads) are affected.
    """
    if mode is not StorageMode.MOUNT_CACHED or options.transfers != 1 or options.read_only:
        return ""
    return (
        'conn=/sys/fs/fuse/connections/$(mountpoint -d "$DST" | cut -d: -f2)\n'
        'if [ ! -d "$conn" ]; then\n'
        "  mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true\n"
        "fi\n"
        'if ! { echo 1 > "$conn/max_background" && '
        '[ "$(cat "$conn/max_background")" = 1 ]; } 2>/dev/null; then\n'
        '  echo "skycore: cannot serialize FUSE releases for $DST (writing 1 to '
        "$conn/max_background failed: fusectl is not mounted or is read-only), so uploads "
        "could leave in another order than the files were closed; the mount is undone. "
        "Run nodes with a writable /sys/fs/fuse/connections, or set transfers > 1 on this "
        'mount to accept unordered uploads." >&2\n'
        '  skycore_mounts unmount "$BASE" 10 "$DST" >/dev/null 2>&1 || true\n'
        '  if is_mounted "$DST"; then fusermount3 -u "$DST" 2>/dev/null || umount -l "$DST" '
        "|| true; fi\n"
        "  exit 1\n"
        "fi\n"
        'echo 1 > "$conn/congestion_threshold" 2>/dev/null || true\n'
    )


def tagged_remote(remote_path: str, dst: str) -> str:
    """``remote_path`` with a connection-string parameter naming the mount point
    (``remote,description=skycore-<hash of dst>:path``; every backend has that option and it
    changes nothing but the Fs name), so two mounts of the same bucket stay two VFSes that
    ``vfs/stats fs=`` tells apart, each with its own cache folder (stable across remounts)."""
    from skycore.node.mounts import remote_colon  # the node program's own parser

    tag = hashlib.sha256(dst.encode()).hexdigest()[:10]
    j = remote_colon(remote_path)
    if j < 0:
        return remote_path
    return f"{remote_path[:j]},description=skycore-{tag}{remote_path[j:]}"


@dataclass(frozen=True)
class MountRequest:
    """One mount a node script makes: ``remote_path`` at ``dst`` in ``mode``."""

    remote_path: str
    dst: str
    mode: StorageMode
    options: MountOptions = field(default_factory=MountOptions)


# A mount script names its requests on comment lines, so a node batch can merge the mount
# scripts of many entries into one (mount_requests_of + mount_many_command): one python
# process per node then mounts them all (python's start-up was most of a mount's CPU).
_REQUEST_TAG = "# skycore-mount-request "


def _request_json(req: MountRequest, env: RcloneEnv) -> str:
    o = req.options
    return json.dumps(
        {
            "remote": req.remote_path, "dst": req.dst, "mode": req.mode.value,
            "transfers": o.transfers, "write_back_s": o.write_back_s,
            "read_only": o.read_only, "extra_flags": list(o.extra_flags),
            "upload_config": [list(kv) for kv in o.upload_config], "refresh_s": o.refresh_s,
            "env": [env.rclone, env.config_file, env.mounts_base, env.helper],
        },
        sort_keys=True,
    )  # fmt: skip


def mount_requests_of(script: str) -> tuple[list[MountRequest], RcloneEnv] | None:
    """The requests and environment of a script made by ``mount_command`` /
    ``mount_many_command`` (None for any other script)."""
    reqs: list[MountRequest] = []
    envs = set()
    for line in script.splitlines():
        if not line.startswith(_REQUEST_TAG):
            continue
        d = json.loads(line[len(_REQUEST_TAG) :])
        envs.add(tuple(d["env"]))
        opts = MountOptions(
            transfers=d["transfers"],
            write_back_s=d["write_back_s"],
            read_only=d["read_only"],
            extra_flags=tuple(d["extra_flags"]),
            upload_config=tuple((k, v) for k, v in d.get("upload_config", [])),
            refresh_s=d.get("refresh_s", MountOptions.refresh_s),
        )
        reqs.append(MountRequest(d["remote"], d["dst"], StorageMode(d["mode"]), opts))
    if not reqs or len(envs) != 1:
        return None
    rclone, config_file, mounts_base, helper = envs.pop()
    return reqs, RcloneEnv(rclone, config_file, mounts_base, helper)


def mount_command(
    remote_path: str,
    dst: str,
    mode: StorageMode,
    options: MountOptions | None = None,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Idempotent bash that mounts ``remote_path`` at ``dst`` through the node's daemon
    (started if none answers). See ``mount_many_command``."""
    return mount_many_command(
        [MountRequest(remote_path, dst, mode, options or MountOptions())], env
    )


def mount_many_command(
    requests: Sequence[MountRequest],
    env: RcloneEnv = NODE_ENV,
    copies: Sequence[CopyRequest] = (),
) -> str:
    """Idempotent bash that mounts every request through the node's daemons (started if none
    answers), all mount calls issued at once by one run of the node program, which also
    makes the COPY snapshots ``copies`` meanwhile (through ``copy_daemon_dirs``).

    A live mount is left alone; a stale one (rclone gone) is lazily unmounted first; files in
    a mount point that is not mounted (stray local writes) are moved aside to
    ``<dst>.skycore-stray-<time>`` with a warning, never deleted and never blocking the mount;
    the script returns only once every mount answers (exit 1 if any failed); a writable
    MOUNT_CACHED mount then holds a listing of its top directory (a listing that fails is a
    warning: the node's refresher tries again) and its refresher runs, which lists the
    whole tree in the background at once.
    """
    q = shlex.quote
    specs = []
    for req in requests:
        transfers, extra = daemon_key(req.mode, req.options)
        dirs = daemon_dirs(transfers, extra, env.mounts_base)
        vfs, mnt = mount_options(req.mode, req.options)
        specs.append(
            {
                "rclone": env.rclone, "config": env.config_file, "dir": dirs.base,
                "transfers": str(transfers), "extra": list(extra),
                "fs": tagged_remote(req.remote_path, req.dst), "dst": req.dst,
                "vfs": vfs, "mount": mnt, "rc_config": dict(req.options.upload_config),
                "refresh": refresh_every(req.mode, req.options),
            }
        )  # fmt: skip
    copy_arg = ""
    if copies:
        copy_arg = "--copies " + q(json.dumps([_copy_spec(c, env) for c in copies])) + " "
    out = [
        _PRELUDE,
        *(_REQUEST_TAG + _request_json(r, env) + "\n" for r in requests),
        *(_copy_tag(c, env) for c in copies),
        _IS_MOUNTED,
        _node_fn_file(env),
        f"BASE={q(env.mounts_base)}\n",
        # 0: mount it; 3: already live; anything else: failed (explicit returns: set -e is
        # off inside a function called in a condition)
        "prep() {\n"
        '  DST="$1"\n'
        '  if is_mounted "$DST"; then\n'
        '    if timeout 10 stat "$DST" >/dev/null 2>&1 && '
        'grep -qxF "SKYCORE_LIVE $DST" <<<"$LIVE"; then\n'
        '      echo "skycore: $DST is already mounted"; return 3\n'
        "    fi\n"
        '    echo "skycore: $DST holds a stale mount; unmounting it lazily" >&2\n'
        '    fusermount3 -uz "$DST" 2>/dev/null || fusermount -uz "$DST" 2>/dev/null '
        '|| umount -l "$DST" || return 1\n'
        "  fi\n"
        '  mkdir -p "$DST" || return 1\n'
        '  if [ -n "$(ls -A "$DST" 2>/dev/null)" ]; then\n'
        '    STRAY="$DST.skycore-stray-$(date +%Y%m%d-%H%M%S)-$$"\n'
        '    { mv "$DST" "$STRAY" && mkdir -p "$DST"; } || return 1\n'
        '    echo "skycore: warning: $DST held files that are not in the bucket (written '
        'while it was not mounted); they were moved aside to $STRAY, not deleted" >&2\n'
        "  fi\n"
        "  return 0\n"
        "}\n",
        "UP=()\n",
        # One live-mount probe for every mount point already mounted (a relaunch).
        "MOUNTED=()\n",
        *(f'D={sh_path(r.dst)}; if is_mounted "$D"; then MOUNTED+=("$D"); fi\n' for r in requests),
        'LIVE=""\n',
        'if [ "${#MOUNTED[@]}" -gt 0 ]; then\n'
        '  LIVE=$(skycore_mounts live "$BASE" "${MOUNTED[@]}" || true)\n'
        "fi\n",
    ]
    for i, req in enumerate(requests):
        out.append(
            f"rc=0; prep {sh_path(req.dst)} || rc=$?\n"
            f"case $rc in 0) UP+=({i});; 3) ;; *) exit $rc;; esac\n"
        )
    out.append(
        f'if [ "${{#UP[@]}}" -gt 0 ] || [ {int(bool(copies))} = 1 ]; then\n'
        f'  skycore_mounts up-many {q(json.dumps(specs))} {copy_arg}"${{UP[@]}}" || exit 1\n'
        "fi\n"
    )
    for i, req in enumerate(requests):
        out.append(
            f'if [[ " ${{UP[*]}} " == *" {i} "* ]]; then\n'
            f"DST={sh_path(req.dst)}\n"
            + _serialize_releases(req.mode, req.options)
            + f'echo "skycore: mounted "{q(req.remote_path)}" at $DST ({req.mode.value})"\n'
            + "fi\n"
        )
    out.append("exit 0\n")
    return "".join(out)


def _dst_words(dsts: str | Sequence[str]) -> str:
    return " ".join(sh_path(d) for d in ([dsts] if isinstance(dsts, str) else dsts))


def drain_command(
    dst: str | Sequence[str],
    timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Bash that waits until every mount in ``dst`` (one or several mount points) is durable:
    the drain rule of skycore/node/mounts.py, printing progress. Exits 0 when drained (or
    not a skycore mount), 1 on timeout with uploads pending, 2 when rclone does not answer."""
    return (
        _PRELUDE
        + _NODE_FN
        + f"skycore_mounts drain {shlex.quote(env.mounts_base)} {timeout_s:g} {_dst_words(dst)}\n"
    )


def unmount_command(
    dst: str | Sequence[str],
    timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Bash that drains the mount at ``dst`` and then unmounts it. With uploads still pending
    after ``timeout_s`` it refuses (exit 1) and leaves the mount in place. A stale mount whose
    rclone is gone is unmounted lazily (its cache stays on disk for the next mount). A daemon
    left without mounts quits."""
    return (
        _PRELUDE
        + _NODE_FN
        + f"skycore_mounts unmount {shlex.quote(env.mounts_base)} {timeout_s:g} "
        + f"{_dst_words(dst)}\n"
    )


def live_command(dsts: Sequence[str], env: RcloneEnv = NODE_ENV) -> str:
    """Bash printing ``SKYCORE_LIVE <dst>`` for each of ``dsts`` that is mounted and served by
    an answering daemon (the live-mount probe)."""
    return (
        _PRELUDE
        + _NODE_FN
        + f"skycore_mounts live {shlex.quote(env.mounts_base)} {shlex.join(list(dsts))}\n"
    )
