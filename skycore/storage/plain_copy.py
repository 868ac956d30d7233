"""The node step of a plain file_mounts copy of a bucket URL: no storage entry, so no bucket
is made and nothing is recorded."""

from __future__ import annotations

from skycore.config import SkycoreConfig
from skycore.storage import mounting
from skycore.storage.common import parse_url
from skycore.storage.mounting import MountStep
from skycore.storage.rclone_env import NODE_ENV
from skycore.storage.rclone_env import RcloneEnv as Env
from skycore.stores import make_store


def plain_copy_step(url: str, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> MountStep:
    """The node step for a plain file_mounts copy of a bucket URL (an object or a prefix) to
    ``dst``: with the user's credentials, falling back to anonymous access."""
    parsed = parse_url(url)
    st = make_store(parsed.store, parsed.bucket, config, parsed.account)
    paths = [st.rclone_path(parsed.prefix, anonymous=False)]
    anon = st.rclone_path(parsed.prefix, anonymous=True)
    if anon not in paths:
        paths.append(anon)
    return mounting.copy_step(paths, dst, env)


def plain_copy_command(url: str, dst: str, config: SkycoreConfig, env: Env = NODE_ENV) -> str:
    """Bash for a plain file_mounts copy of a bucket URL (``plain_copy_step``)."""
    return plain_copy_step(url, dst, config, env).script()
