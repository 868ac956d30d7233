"""System packages the local cloud needs, installed with apt only when missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import CloudError

# binary -> Debian package that ships it
REQUIRED: dict[str, str] = {
    "dockerd": "docker.io",
    "fusermount3": "fuse3",
    "mmdebstrap": "mmdebstrap",
    "rsync": "rsync",
}
# What the node rootfs build needs: installed first, alone, so the build can start while
# apt installs the rest.
ROOTFS_TOOLS: dict[str, str] = {"mmdebstrap": "mmdebstrap"}
# apt-get waits for another apt's lock (``make up`` installs the rootfs tools beside the
# venv) instead of failing at once.
APT_GET = ("apt-get", "-o", "DPkg::Lock::Timeout=600")
# Node.js is only installed if absent (the machine may carry its own).
OPTIONAL_IF_ABSENT: dict[str, str] = {"node": "nodejs", "npm": "npm"}


def missing_packages(
    need_node: bool = True,
    extra: dict[str, str] | None = None,
    required: dict[str, str] = REQUIRED,
) -> list[str]:
    """Debian packages whose binaries are not on PATH (or in /usr/sbin)."""
    wanted = dict(required)
    if need_node:
        wanted.update(OPTIONAL_IF_ABSENT)
    wanted.update(extra or {})
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [pkg for binary, pkg in wanted.items() if not shutil.which(binary, path=path)]
    return sorted(set(missing))


def ensure_packages(
    say: Callable[[str], None] = print,
    need_node: bool = True,
    extra: dict[str, str] | None = None,
    required: dict[str, str] = REQUIRED,
) -> list[str]:
    """Install what is missing with apt; return the packages installed (empty if none).

    ``required`` maps binaries to the Debian packages that ship them (default: all the local
    cloud needs); ``extra`` maps more (e.g. chromium for the report test).
    """
    missing = missing_packages(need_node, extra, required)
    if not missing:
        return []
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise CloudError(
            f"The local cloud needs these Debian packages: {' '.join(missing)}. Install them "
            f"(as root: apt-get install -y {' '.join(missing)}) and run 'harness up' again."
        )
    say(f"installing with apt: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lists = Path("/var/lib/apt/lists")
    steps: list[list[str]] = []
    if not any(lists.glob("*Packages*")):
        steps.append([*APT_GET, "update"])
    steps.append([*APT_GET, "install", "-y", "--no-install-recommends", *missing])
    for cmd in steps:
        result = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if result.returncode != 0 and "install" in cmd:
            # The package lists may be stale: refresh once and retry.
            subprocess.run([*APT_GET, "update"], env=env, capture_output=True, text=True)
            result = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
            raise CloudError(
                f"'{' '.join(cmd)}' failed (exit {result.returncode}): {tail}. Fix apt "
                "(network to the Debian mirror, dpkg lock) and run 'harness up' again."
            )
    still = missing_packages(need_node, extra, required)
    if still:
        raise CloudError(
            f"apt installed {' '.join(missing)} but {' '.join(still)} is still not on PATH; "
            "check the apt log and install it by hand."
        )
    return missing


def install_rootfs_tools_ahead() -> None:
    """What the node rootfs build needs, installed before the venv exists (this module and
    harness.cloud.steps use the standard library only), so ``make up`` does it beside the
    venv install. Prints one timed line; a failure is only reported: ``harness up`` tries
    again and stops there."""
    from harness.cloud.steps import progress_line

    started = time.monotonic()
    try:
        installed = ensure_packages(lambda _message: None, False, required=ROOTFS_TOOLS)
    except CloudError as e:
        print(progress_line(time.monotonic() - started, "apt: rootfs tools", f"not yet ({e})"))
        return
    if installed:
        took = time.monotonic() - started
        print(progress_line(took, "apt: rootfs tools", f"installed {' '.join(installed)}", took))


if __name__ == "__main__":
    install_rootfs_tools_ahead()
