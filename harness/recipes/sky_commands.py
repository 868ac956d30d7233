"""SkyPilot's own MOUNT_CACHED commands for one bucket, as the installed SkyPilot makes them.

Run with the SkyPilot venv's python (harness/recipes/skypilot_venv.py), never imported by
skycore: only the standard library and ``sky`` are importable there. One JSON object in on
stdin::

    {"kind": "S3" | "GCS" | "AZURE" | "R2",   # SkyPilot's Rclone.RcloneStores member
     "bucket": "name[/sub/path]", "mount_path": "/ckpt",
     "mount_cached": {MountCachedConfig field: value},
     "credentials": {...}}                     # what the kind takes (CREDENTIALS)

(``kind`` null: no bucket, only what does not depend on one) and one JSON object out on
stdout: ``mount_command`` (``get_mount_cached_cmd`` with
SkyPilot's rclone config and profile name for the kind), ``version_check``
(``get_rclone_version_check_cmd``), ``flush_script`` (``get_rclone_flush_script``, what a
SkyPilot job runs after its command), ``rclone_version``, ``sky_version``, ``profile`` and
``log_dir``. A failure prints ``{"error": "..."}`` and exits 1.

Give it a scratch HOME: SkyPilot reads its credentials from there, and this script writes
them there as SkyPilot expects them (environment variables for AWS, a SkyPilot config file
named by its own environment variable for the GCP project, the ~/.cloudflare files for
Cloudflare R2; the Azure account name and key are arguments of SkyPilot's config call).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

CREDENTIALS = {
    "S3": ("access_key_id", "secret_access_key"),
    "GCS": ("project",),
    "AZURE": ("account_name", "account_key"),
    "R2": ("access_key_id", "secret_access_key"),
}
"""The credentials each kind takes (from the store's section of the skycore config)."""

R2_ACCOUNT_ID = "skycore-local"
"""The Cloudflare account id SkyPilot's R2 endpoint is built from (the recipe points rclone
at the gate instead, so any id does)."""


def _home() -> Path:
    home = Path(os.environ.get("HOME", ""))
    if not home.is_absolute() or not home.is_dir():
        raise RuntimeError(f"HOME must be a scratch folder that exists; it is {str(home)!r}")
    return home


def _provide(kind: str, creds: dict[str, str]) -> dict[str, str]:
    """Put ``creds`` where SkyPilot reads them for ``kind``; the keyword arguments its
    ``get_config`` takes for that kind."""
    missing = [k for k in CREDENTIALS[kind] if not creds.get(k)]
    if missing:
        raise RuntimeError(f"{kind} credentials lack {', '.join(missing)}")
    home = _home()
    if kind == "S3":
        os.environ["AWS_ACCESS_KEY_ID"] = creds["access_key_id"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = creds["secret_access_key"]
        return {}
    if kind == "GCS":
        from sky import skypilot_config
        from sky.skylet import constants

        # the project of the default workspace (gcloud's default project is not there)
        workspace = {
            constants.SKYPILOT_DEFAULT_WORKSPACE: {"gcp": {"project_id": creds["project"]}}
        }
        path = home / ".sky" / "skycore-recipe-config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"workspaces": workspace}))  # JSON is YAML
        os.environ[skypilot_config.ENV_VAR_GLOBAL_CONFIG] = str(path)
        skypilot_config.reload_config()
        return {}
    if kind == "R2":
        from sky.adaptors import cloudflare

        account = Path(os.path.expanduser(cloudflare.ACCOUNT_ID_PATH))
        account.parent.mkdir(parents=True, exist_ok=True)
        account.write_text(R2_ACCOUNT_ID + "\n")
        profile = cloudflare.R2_PROFILE_NAME
        Path(os.path.expanduser(cloudflare.R2_CREDENTIALS_PATH)).write_text(
            f"[{profile}]\naws_access_key_id = {creds['access_key_id']}\n"
            f"aws_secret_access_key = {creds['secret_access_key']}\n"
        )
        return {}
    return {
        "storage_account_name": creds["account_name"],
        "storage_account_key": creds["account_key"],
    }


def commands(request: dict[str, Any]) -> dict[str, Any]:
    """What the module docstring says, for one request; without ``kind``, only what does
    not depend on a bucket (the version check, the flush script, the versions, log_dir)."""
    kind = request.get("kind")
    if kind is not None and kind not in CREDENTIALS:
        raise RuntimeError(f"kind {kind!r} is not one of {', '.join(CREDENTIALS)}")
    extra = _provide(kind, dict(request.get("credentials") or {})) if kind else {}

    import sky
    from sky.backends import task_codegen
    from sky.data import data_utils, mounting_utils, storage
    from sky.skylet import constants

    out: dict[str, Any] = {
        "version_check": mounting_utils.get_rclone_version_check_cmd(),
        "flush_script": task_codegen.TaskCodeGen.get_rclone_flush_script(),
        "rclone_version": mounting_utils.RCLONE_VERSION,
        "sky_version": sky.__version__,
        "log_dir": constants.RCLONE_MOUNT_CACHED_LOG_DIR,
    }
    if kind is None:
        return out
    store = data_utils.Rclone.RcloneStores[kind]
    bucket = str(request["bucket"])
    profile = store.get_profile_name(bucket.split("/", 1)[0])
    config = store.get_config(rclone_profile_name=profile, **extra)
    tuning = storage.MountCachedConfig(**dict(request.get("mount_cached") or {}))
    out["mount_command"] = mounting_utils.get_mount_cached_cmd(
        config, profile, bucket, str(request["mount_path"]), tuning
    )
    out["profile"] = profile
    return out


def main() -> int:
    try:
        out = commands(json.loads(sys.stdin.read()))
    except Exception as e:  # one line for the recipe's error paragraph, never a traceback
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
