"""rclone command builders: node credential files, copy, mount, drain and unmount scripts.

Everything here returns plain bash (to run through a CommandRunner) or file contents (to write
through the runner's stdin). Secrets live only in the rclone config file, never on a command
line. The paths of rclone, its config and the per-mount folders are parameters
(``RcloneEnv``) so the same scripts run on a node and, in tests, on the host.

Per mount (``mount_dirs``) there is one folder holding the VFS cache, the rclone log and the
rc unix socket (nodes share the host network, so never a TCP rc port). ``drain_command`` asks
that socket until nothing is queued or uploading for a moment; ``unmount_command`` drains
first and never unmounts with uploads pending.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from skycore.config import SkycoreConfig
from skycore.storage.common import StorageMode

NODE_RCLONE = "/usr/local/bin/rclone"
NODE_RCLONE_CONFIG = "/root/.config/rclone/rclone.conf"
NODE_MOUNTS_BASE = "/var/lib/skycore/mounts"

DEFAULT_DRAIN_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RcloneEnv:
    """Where rclone, its config file and the per-mount folders are (node defaults)."""

    rclone: str = NODE_RCLONE
    config_file: str = NODE_RCLONE_CONFIG
    mounts_base: str = NODE_MOUNTS_BASE


NODE_ENV = RcloneEnv()


@dataclass(frozen=True)
class MountOptions:
    """Per-mount tuning. ``transfers=1`` keeps cached uploads in creation order."""

    transfers: int = 1
    write_back_s: float = 1.0
    read_only: bool = False
    extra_flags: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class MountDirs:
    """The per-mount folder: VFS cache, log file and rc unix socket."""

    base: str
    cache_dir: str
    log_file: str
    rc_socket: str

    @property
    def rc_addr(self) -> str:
        """Value for ``--rc-addr``."""
        return f"unix://{self.rc_socket}"


def mount_dirs(dst: str, base: str = NODE_MOUNTS_BASE) -> MountDirs:
    """The per-mount folders of mount point ``dst`` (stable across remounts, short enough
    for a unix socket path)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", dst.strip("/~")).strip("_")[-24:] or "root"
    digest = hashlib.sha256(dst.encode()).hexdigest()[:10]
    d = f"{base.rstrip('/')}/{slug}-{digest}"
    return MountDirs(
        base=d, cache_dir=f"{d}/cache", log_file=f"{d}/rclone.log", rc_socket=f"{d}/rc.sock"
    )


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


# ---------------------------------------------------------------------------------------------
# Scripts
# ---------------------------------------------------------------------------------------------

_PRELUDE = "set -euo pipefail\nunset AWS_CA_BUNDLE\n"

_IS_MOUNTED = "is_mounted() { awk -v d=\"$1\" '$2 == d {f=1} END {exit !f}' /proc/self/mounts; }\n"


def _rclone(env: RcloneEnv) -> str:
    return f"{shlex.quote(env.rclone)} --config {shlex.quote(env.config_file)}"


def copy_command(remote_path: str, dst: str, env: RcloneEnv = NODE_ENV) -> str:
    """Bash that copies ``remote_path`` (an object or a folder) to ``dst`` on the node.

    ``rclone copyto`` copies a single object to a file and a prefix/bucket into a folder.
    """
    return (
        _PRELUDE
        + f"DST={sh_path(dst)}\n"
        + 'mkdir -p "$(dirname "$DST")"\n'
        + f'{_rclone(env)} copyto {shlex.quote(remote_path)} "$DST" --transfers 8 '
        + "--checkers 16 --retries 3 --low-level-retries 5\n"
    )


def copy_with_fallback_command(remote_paths: list[str], dst: str, env: RcloneEnv = NODE_ENV) -> str:
    """Like copy_command, trying each remote path in turn (user credentials, then anonymous)."""
    attempts = " || ".join(
        f'{_rclone(env)} copyto {shlex.quote(p)} "$DST" --transfers 8 --retries 2'
        for p in remote_paths
    )
    return _PRELUDE + f"DST={sh_path(dst)}\n" + 'mkdir -p "$(dirname "$DST")"\n' + attempts + "\n"


def mount_flags(mode: StorageMode, dirs: MountDirs, options: MountOptions) -> list[str]:
    """rclone mount flags for ``mode`` (without remote, mount point or config)."""
    flags = [
        "--daemon",
        "--daemon-wait", "60s",
        "--allow-other",
        "--log-file", dirs.log_file,
        "--log-level", "INFO",
        "--rc", "--rc-addr", dirs.rc_addr, "--rc-no-auth",
        "--dir-cache-time", "10s",
        "--retries", "3",
        "--low-level-retries", "10",
    ]  # fmt: skip
    if mode is StorageMode.MOUNT_CACHED:
        flags += [
            "--vfs-cache-mode", "full",
            "--vfs-write-back", f"{options.write_back_s:g}s",
            "--transfers", str(options.transfers),
            "--cache-dir", dirs.cache_dir,
            "--vfs-cache-max-age", "24h",
        ]  # fmt: skip
    elif mode is StorageMode.MOUNT:
        flags += ["--vfs-cache-mode", "off"]
    else:
        raise ValueError("COPY is not a mount mode")
    if options.read_only:
        flags.append("--read-only")
    return flags + list(options.extra_flags)


def _serialize_releases(mode: StorageMode, options: MountOptions) -> str:
    """Bash (inside the mount loop) that makes the kernel send this mount's FUSE RELEASE
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
        '    conn=/sys/fs/fuse/connections/$(mountpoint -d "$DST" | cut -d: -f2)\n'
        '    if [ ! -d "$conn" ]; then\n'
        "      mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true\n"
        "    fi\n"
        '    if ! { echo 1 > "$conn/max_background" && '
        '[ "$(cat "$conn/max_background")" = 1 ]; } 2>/dev/null; then\n'
        '      echo "skycore: cannot serialize FUSE releases for $DST (writing 1 to '
        "$conn/max_background failed: fusectl is not mounted or is read-only), so uploads "
        "could leave in another order than the files were closed; the mount is undone. "
        "Run nodes with a writable /sys/fs/fuse/connections, or set transfers > 1 on this "
        'mount to accept unordered uploads." >&2\n'
        '      fusermount3 -u "$DST" 2>/dev/null || umount -l "$DST" || true\n'
        "      exit 1\n"
        "    fi\n"
        '    echo 1 > "$conn/congestion_threshold" 2>/dev/null || true\n'
    )


def mount_command(
    remote_path: str,
    dst: str,
    mode: StorageMode,
    options: MountOptions | None = None,
    env: RcloneEnv = NODE_ENV,
) -> str:
    """Idempotent bash that mounts ``remote_path`` at ``dst``.

    A live mount is left alone; a stale one (rclone gone) is lazily unmounted first; a
    non-empty mount point is refused with a clear error; the script returns only once the
    mount answers.
    """
    options = options or MountOptions()
    dirs = mount_dirs(dst, env.mounts_base)
    flags = " ".join(shlex.quote(f) for f in mount_flags(mode, dirs, options))
    q = shlex.quote
    return (
        _PRELUDE
        + _IS_MOUNTED
        + f"DST={sh_path(dst)}\nSOCK={q(dirs.rc_socket)}\nLOG={q(dirs.log_file)}\n"
        + f"mkdir -p {q(dirs.base)} {q(dirs.cache_dir)}\nchmod 700 {q(dirs.base)}\n"
        + 'if is_mounted "$DST"; then\n'
        + f'  if timeout 10 stat "$DST" >/dev/null 2>&1 && timeout 10 {_rclone(env)} rc '
        + '--unix-socket "$SOCK" core/pid >/dev/null 2>&1; then\n'
        + '    echo "skycore: $DST is already mounted"; exit 0\n'
        + "  fi\n"
        + '  echo "skycore: $DST holds a stale mount; unmounting it lazily" >&2\n'
        + '  fusermount3 -uz "$DST" 2>/dev/null || fusermount -uz "$DST" 2>/dev/null '
        + '|| umount -l "$DST"\n'
        + "fi\n"
        + 'mkdir -p "$DST"\n'
        + 'if [ -n "$(ls -A "$DST" 2>/dev/null)" ]; then\n'
        + '  echo "skycore: cannot mount at $DST: the folder is not empty. Use an empty or new '
        + 'destination in file_mounts, or empty the folder first." >&2\n'
        + "  exit 1\n"
        + "fi\n"
        + 'rm -f "$SOCK"\n'
        + "rc=0\n"
        + f'{_rclone(env)} mount {q(remote_path)} "$DST" {flags} </dev/null >>"$LOG" 2>&1 '
        + "|| rc=$?\n"
        + 'if [ "$rc" != 0 ]; then\n'
        + '  echo "skycore: rclone failed to mount $DST (exit $rc); last lines of $LOG:" >&2\n'
        + '  tail -n 20 "$LOG" >&2 || true; exit 1\n'
        + "fi\n"
        + "for _ in $(seq 1 200); do\n"
        + '  if is_mounted "$DST" && stat "$DST" >/dev/null 2>&1 && [ -S "$SOCK" ]; then\n'
        + _serialize_releases(mode, options)
        + f'    echo "skycore: mounted "{q(remote_path)}" at $DST ({mode.value})"; exit 0\n'
        + "  fi\n"
        + "  sleep 0.1\n"
        + "done\n"
        + 'echo "skycore: rclone did not mount $DST; last lines of $LOG:" >&2\n'
        + 'tail -n 20 "$LOG" >&2 || true\n'
        + "exit 1\n"
    )


def _drain_body(env: RcloneEnv, timeout_s: float) -> str:
    """Bash function ``drain`` using $DST and $SOCK; returns 0 when drained, 1 on timeout."""
    return (
        "drain() {\n"
        + f"  local deadline=$(( $(date +%s) + {int(timeout_s)} )) stable=0 last_print=0 now\n"
        + "  while :; do\n"
        + f'    if ! stats=$({_rclone(env)} rc --unix-socket "$SOCK" vfs/stats 2>&1); then\n'
        + '      echo "skycore: rclone serving $DST is not answering: $stats" >&2; return 2\n'
        + "    fi\n"
        + "    q=$(printf '%s' \"$stats\" | sed -n "
        + "'s/.*\"uploadsQueued\": *\\([0-9]*\\).*/\\1/p')\n"
        + "    p=$(printf '%s' \"$stats\" | sed -n "
        + "'s/.*\"uploadsInProgress\": *\\([0-9]*\\).*/\\1/p')\n"
        + '    case "$stats" in\n'
        + "      *diskCache*)\n"
        + '        if [ -z "$q" ] || [ -z "$p" ]; then\n'
        + '          echo "skycore: unexpected vfs/stats for $DST: $stats" >&2; return 2\n'
        + "        fi ;;\n"
        + "      *) q=0; p=0 ;;  # no VFS cache (MOUNT): nothing is ever pending\n"
        + "    esac\n"
        + '    if [ "$q" = 0 ] && [ "$p" = 0 ]; then\n'
        + "      stable=$((stable + 1))\n"
        + '      if [ "$stable" -ge 5 ]; then echo "skycore: $DST drained"; return 0; fi\n'
        + "    else\n"
        + "      stable=0\n"
        + "    fi\n"
        + "    now=$(date +%s)\n"
        + '    if [ "$now" -ge "$deadline" ]; then\n'
        + '      echo "skycore: timed out draining $DST: $q queued, $p uploading" >&2; return 1\n'
        + "    fi\n"
        + '    if [ "$stable" = 0 ] && [ "$now" -ne "$last_print" ]; then\n'
        + '      echo "skycore: draining $DST: $q queued, $p uploading '
        + '($(( deadline - now ))s left)"; last_print=$now\n'
        + "    fi\n"
        + "    sleep 0.1\n"
        + "  done\n"
        + "}\n"
    )


def drain_command(
    dst: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, env: RcloneEnv = NODE_ENV
) -> str:
    """Bash that waits until the mount at ``dst`` has nothing queued or uploading (stable for
    ~0.5 s), printing progress; exits 1 on timeout, 0 when drained or not a skycore mount."""
    dirs = mount_dirs(dst, env.mounts_base)
    return (
        _PRELUDE
        + f"DST={sh_path(dst)}\nSOCK={shlex.quote(dirs.rc_socket)}\n"
        + 'if [ ! -S "$SOCK" ]; then echo "skycore: no rclone serving $DST; nothing to drain"; '
        + "exit 0; fi\n"
        + _drain_body(env, timeout_s)
        + "drain\n"
    )


def unmount_command(
    dst: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, env: RcloneEnv = NODE_ENV
) -> str:
    """Bash that drains the mount at ``dst`` and then unmounts it. With uploads still pending
    after ``timeout_s`` it refuses (exit 1) and leaves the mount in place. A stale mount whose
    rclone is gone is unmounted lazily (its cache stays on disk for the next mount)."""
    dirs = mount_dirs(dst, env.mounts_base)
    return (
        _PRELUDE
        + _IS_MOUNTED
        + f"DST={sh_path(dst)}\nSOCK={shlex.quote(dirs.rc_socket)}\n"
        + 'if ! is_mounted "$DST"; then echo "skycore: $DST is not mounted"; exit 0; fi\n'
        + _drain_body(env, timeout_s)
        + "rc=0; drain || rc=$?\n"
        + 'if [ "$rc" = 1 ]; then\n'
        + '  echo "skycore: not unmounting $DST: uploads are still pending" >&2; exit 1\n'
        + 'elif [ "$rc" = 2 ]; then\n'
        + '  echo "skycore: rclone for $DST is gone; unmounting the stale mount lazily" >&2\n'
        + '  fusermount3 -uz "$DST" 2>/dev/null || umount -l "$DST"; exit 0\n'
        + "fi\n"
        + 'fusermount3 -u "$DST" 2>/dev/null || fusermount -u "$DST" 2>/dev/null '
        + '|| umount "$DST"\n'
        + "for _ in $(seq 1 100); do\n"
        + '  [ -S "$SOCK" ] || break\n'
        + f'  timeout 2 {_rclone(env)} rc --unix-socket "$SOCK" core/pid >/dev/null 2>&1 '
        + "|| break\n"
        + "  sleep 0.1\n"
        + "done\n"
        + 'echo "skycore: unmounted $DST"\n'
    )
