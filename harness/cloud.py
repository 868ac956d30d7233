"""The local cloud as one thing: bring it up, describe it, take it down.

``up`` is idempotent: every step checks first and only starts what is missing, so a second
call returns in about a second. It writes the skycore config (endpoints, the user's
credentials, the docker host and node image) that the core reads.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound
from filelock import FileLock

from harness import dockerd, emulators, nodes, system
from harness.accounts import OTHER, USER
from harness.errors import CloudError
from harness.paths import harness_home
from skycore.config import DockerConfig, SkycoreConfig, config_path, save_config

STORES = ("s3", "gcs", "azure")
Say = Callable[[str], None]

# Buckets that exist before any task runs: the public datasets owned by another account,
# and the user's own external buckets used by `make demo` (comp_test.yaml with RUN_ID=dy).
PUBLIC_DATASETS = {
    "s3": "digitalcorpora",
    "gcs": "gcp-public-data-sentinel-2",
    "azure": "opendatasets",
}
DEMO_RUN_ID = "dy"
SEED_OBJECTS = {
    "README.txt": b"A public dataset owned by another account (a local stand-in).\n",
    "corpora/files/sample-0001.txt": b"sample file 1\n",
    "corpora/files/sample-0002.txt": b"sample file 2\n",
}


@dataclass
class CloudInfo:
    """What ``up`` produced."""

    docker_host: str
    image: str
    endpoints: dict[str, str]
    config_path: Path


@dataclass
class StatusRow:
    """One line of ``harness status``."""

    component: str
    running: bool
    where: str
    details: str


def _lock() -> FileLock:
    return FileLock(str(harness_home() / "cloud.lock"), timeout=900)


def up(say: Say = print, stores: tuple[str, ...] = STORES, with_docker: bool = True) -> CloudInfo:
    """Bring up what is missing and write the skycore config; safe to call concurrently."""
    with _lock():
        system.ensure_packages(say, need_node="azure" in stores)
        host, image = "", ""
        if with_docker:
            if not Path("/dev/fuse").exists():
                raise CloudError(
                    "/dev/fuse is absent, so nodes cannot FUSE-mount storage. Load the fuse "
                    "module (modprobe fuse) or run on a machine that has /dev/fuse."
                )
            host = dockerd.ensure_dockerd(say)
            image = nodes.ensure_node_image(host, say)
        running = emulators.start_all(stores=stores)
        seed_world(running, say)
        config = SkycoreConfig(
            aws=running["s3"].config_section() if "s3" in running else None,
            gcp=running["gcs"].config_section() if "gcs" in running else None,
            azure=running["azure"].config_section() if "azure" in running else None,
            docker=DockerConfig(host=host or dockerd.DEFAULT_HOST, image=image or "none"),
        )
        path = save_config(config)  # type: ignore[arg-type]
        info = CloudInfo(
            docker_host=host,
            image=image,
            endpoints={name: emu.endpoint for name, emu in running.items()},
            config_path=path,
        )
        (harness_home() / "cloud.json").write_text(
            json.dumps(
                {
                    "docker_host": host,
                    "image": image,
                    "endpoints": info.endpoints,
                    "config": str(path),
                    "at": time.time(),
                },
                indent=2,
            )
        )
        return info


def up_docker(say: Say = print) -> tuple[str, str]:
    """Only the engine and the node image: (docker host, image tag)."""
    with _lock():
        system.ensure_packages(say, need_node=False)
        host = dockerd.ensure_dockerd(say)
        return host, nodes.ensure_node_image(host, say)


def seed_world(running: dict[str, emulators.RunningEmulator], say: Say = print) -> None:
    """Create the buckets that exist before any task (idempotent).

    A store whose emulator process is the one seeded last time is skipped without a request.
    """
    marker = harness_home() / "seeded.json"
    try:
        seeded = json.loads(marker.read_text())
    except (OSError, ValueError):
        seeded = {}
    for store, emu in running.items():
        identity = [emu.record.pid, emu.record.start_time, emu.endpoint]
        if seeded.get(store) == identity:
            continue
        wanted = [
            (PUBLIC_DATASETS[store], OTHER, True, SEED_OBJECTS),
            (f"{store}-external-private-by-user-{DEMO_RUN_ID}", USER, False, _demo_objects()),
            (f"{store}-external-public-by-user-{DEMO_RUN_ID}", USER, True, _demo_objects()),
        ]
        for name, owner, public, objects in wanted:
            if not bucket_exists(emu, name, owner):
                emu.make_bucket(name, owner=owner, public=public, objects=objects)
                say(f"  seeded {store} bucket {name} (owner {owner}, public={public})")
        seeded[store] = identity
    marker.write_text(json.dumps(seeded))


def bucket_exists(emu: emulators.RunningEmulator, name: str, owner: str) -> bool:
    """True if ``owner`` already has a bucket (container) called ``name`` in ``emu``."""
    client = emu.client(owner)
    if emu.store == "s3":
        return name in {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if emu.store == "gcs":
        return client.lookup_bucket(name) is not None
    return bool(client.get_container_client(name).exists())


def _demo_objects() -> dict[str, bytes]:
    return {"existing.txt": b"an object that was in this bucket before the task\n"}


def down(say: Say = print) -> None:
    """Stop the emulators, their gates and a dockerd we started; nothing else."""
    with _lock():
        emulators.stop_all()
        dockerd.stop_dockerd(say)
        (harness_home() / "cloud.json").unlink(missing_ok=True)


def status() -> list[StatusRow]:
    """What runs and where."""
    rows: list[StatusRow] = []
    engine = dockerd.current()
    if engine:
        owner = f"pid {engine.pid}" if engine.pid else "not started by harness"
        rows.append(StatusRow("dockerd", True, engine.host, owner))
        rows.append(_image_row(engine.host))
    else:
        rows.append(StatusRow("dockerd", False, "-", "run 'harness up'"))
    for store, st in emulators.status_all().items():
        rows.append(
            StatusRow(
                f"emulator {store}",
                bool(st.get("running")),
                str(st.get("endpoint", "-")),
                f"pid {st.get('pid', '-')}, log {st.get('log', '-')}",
            )
        )
    cfg = config_path()
    rows.append(StatusRow("skycore config", cfg.exists(), str(cfg), ""))
    return rows


def _image_row(host: str) -> StatusRow:
    try:
        tag = nodes.image_tag()
    except CloudError as e:
        return StatusRow("node image", False, "-", str(e))
    try:
        client = docker.DockerClient(base_url=host, version="auto", timeout=10)
        try:
            client.images.get(tag)
            present = True
        finally:
            client.close()
    except ImageNotFound:
        present = False
    except DockerException as e:
        return StatusRow("node image", False, tag, str(e))
    return StatusRow("node image", present, tag, "" if present else "run 'harness up'")


def env_exports() -> dict[str, str]:
    """Shell variables that point skycore and docker at the local cloud."""
    exports = {"SKYCORE_HOME": str(config_path().parent)}
    engine = dockerd.current()
    if engine:
        exports["DOCKER_HOST"] = engine.host
    exports["HARNESS_HOME"] = str(harness_home())
    exports["PATH"] = f"{Path(sys.executable).parent}:$PATH"
    return exports
