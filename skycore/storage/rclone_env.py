"""A node's rclone environment: rclone's paths there (RcloneEnv) and the files it needs to mount."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skycore import node
from skycore.config import SkycoreConfig

NODE_RCLONE = "/usr/local/bin/rclone"
NODE_RCLONE_CONFIG = "/root/.config/rclone/rclone.conf"
NODE_MOUNTS_BASE = "/var/lib/skycore/mounts"
NODE_HELPER = "/var/lib/skycore/bin/skycore-mounts.py"


@dataclass(frozen=True)
class RcloneEnv:
    """Where rclone, its config file, the daemons' folders and the mount helper are (node
    defaults)."""

    rclone: str = NODE_RCLONE
    config_file: str = NODE_RCLONE_CONFIG
    mounts_base: str = NODE_MOUNTS_BASE
    helper: str = NODE_HELPER  # skycore/node/mountd (one text) as node_files writes it


NODE_ENV = RcloneEnv()


def rclone_section(name: str, options: Mapping[str, str | None]) -> str:
    """One rclone.conf section ``[name]`` (options whose value is None are left out)."""
    lines = [f"[{name}]"] + [f"{k} = {v}" for k, v in options.items() if v is not None]
    return "\n".join(lines) + "\n"


def rclone_config_text(config: SkycoreConfig) -> str:
    """rclone.conf with the remotes of every configured store (each store writes its own)."""
    from skycore.stores import store_classes

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
    the mount helper (skycore/node/mountd as one text, which mount steps run from a file:
    inlined, a batch of mount steps would exceed the kernel's limit on one argument)."""
    return node_credential_files(config, env.config_file) | {env.helper: node.program("mounts.py")}
