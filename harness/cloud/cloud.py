"""The local cloud as one thing: bring it up, take it down (harness.cloud.status describes it).

``up`` is idempotent: every step checks first and only starts what is missing, so a second
call returns in about a second. It writes the skycore config (endpoints, the user's
credentials, the docker host and node image) that the core reads: the sections of the stores
it started, merged into the file, so bringing one store up keeps every other's section.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from harness import emulator_registry as registry
from harness.accounts import OTHER, USER
from harness.cloud import bringup, dockerd, leftovers, steps
from harness.emulators import fleet
from harness.errors import CloudError
from harness.paths import harness_home
from skycore.config import DockerConfig, SkycoreConfig, config_path, merge_config
from skycore.provision import disks as node_disks

Say = Callable[[str], None]

# Buckets that exist before any task runs: each emulator's public dataset owned by another
# account, and the user's own external buckets used by `make demo` (comp_test.yaml with
# RUN_ID=dy).
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


def _lock() -> FileLock:
    return FileLock(str(harness_home() / "cloud.lock"), timeout=900)


def public_datasets() -> dict[str, str]:
    """store -> its seeded public bucket owned by the other account."""
    return {name: cls.public_dataset for name, cls in registry.emulator_classes().items()}


def demo_buckets(store: str) -> list[tuple[str, str, bool]]:
    """(name, owner, public) of the buckets seeded in ``store`` before any task runs."""
    return [
        (registry.get_emulator_class(store).public_dataset, OTHER, True),
        (f"{store}-external-private-by-user-{DEMO_RUN_ID}", USER, False),
        (f"{store}-external-public-by-user-{DEMO_RUN_ID}", USER, True),
    ]


def skycore_config(running: dict[str, fleet.RunningEmulator], host: str, image: str) -> Any:
    """The skycore config of the local cloud: each running emulator's section, under the
    section name its store declares, and the docker engine."""
    from skycore.stores import get_store_class

    sections = {
        get_store_class(name).config_section: emu.config_section() for name, emu in running.items()
    }
    return SkycoreConfig(
        docker=DockerConfig(host=host or dockerd.DEFAULT_HOST, image=image or "none"), **sections
    )


def up(
    say: Say = print, stores: tuple[str, ...] | None = None, with_docker: bool = True
) -> CloudInfo:
    """Bring up what is missing (the emulators of ``stores``, default every registered one)
    and write the skycore config; safe to call concurrently."""
    stores = registry.store_names() if stores is None else tuple(stores)
    registry.check_stores(stores)
    with _lock():
        if with_docker and not Path("/dev/fuse").exists():
            raise CloudError(
                "/dev/fuse is absent, so nodes cannot FUSE-mount storage. Load the fuse "
                "module (modprobe fuse) or run on a machine that has /dev/fuse."
            )
        need_node = any(registry.get_emulator_class(s).needs_node for s in stores)
        made = bringup.Bringup(stores, need_node, seed_world)
        steps.run_steps(bringup.plan(made, with_docker=with_docker), say)
        host, image, running = made.host, made.image, made.running
        path = merge_config(skycore_config(running, host, image))
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
        made = bringup.Bringup((), False, seed_world)
        steps.run_steps(bringup.plan(made, with_emulators=False), say)
        return made.host, made.image


def seed_world(running: dict[str, fleet.RunningEmulator], say: Say = print) -> int:
    """Create the buckets that exist before any task (idempotent), the stores side by side;
    return how many it made.

    A store whose emulator process is the one seeded last time is skipped without a request.
    """
    marker = harness_home() / "seeded.json"
    seeded = _read_marker(marker)
    identities = {
        store: [emu.record.pid, emu.record.start_time, emu.endpoint]
        for store, emu in running.items()
    }
    stale = [store for store in running if seeded.get(store) != identities[store]]
    made = 0
    if stale:
        with ThreadPoolExecutor(max_workers=len(stale), thread_name_prefix="seed") as pool:
            made = sum(pool.map(lambda store: _seed_store(store, running[store], say), stale))
    with _MARKER_LOCK:  # up seeds the stores of each emulators step as soon as they run
        seeded = _read_marker(marker)
        seeded.update({store: identities[store] for store in stale})
        marker.write_text(json.dumps(seeded))
    return made


_MARKER_LOCK = threading.Lock()


def _read_marker(marker: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(marker.read_text()))
    except (OSError, ValueError):
        return {}


def _seed_store(store: str, emu: fleet.RunningEmulator, say: Say) -> int:
    made = 0
    for name, owner, public in demo_buckets(store):
        if not emu.bucket_exists(name, owner):
            objects = SEED_OBJECTS if owner == OTHER else _demo_objects()
            emu.make_bucket(name, owner=owner, public=public, objects=objects)
            say(f"seeded {store} bucket {name} (owner {owner}, public={public})")
            made += 1
    return made


def _demo_objects() -> dict[str, bytes]:
    return {"existing.txt": b"an object that was in this bucket before the task\n"}


def down(
    say: Say = print,
    stores: tuple[str, ...] | None = None,
    *,
    forget: bool = False,
    wipe: bool = False,
    note: Say | None = None,
) -> list[str]:
    """Stop what ``up`` started (the stores whose emulator this harness home recorded, their
    gates and a dockerd it started, and its nodes' disks from the host); nothing else. With
    ``stores``, only their emulators and gates: dockerd and every other store keep running.
    Then ``note`` gets one line on the stores' sections in the skycore config, which
    ``forget`` removes, and with ``wipe`` one line per store on its emulator's data, removed
    from the harness home. Returns the stores stopped."""
    note = note or say
    with _lock():
        if stores is not None:
            registry.check_stores(stores)
            stopped = [store for store in stores if fleet.stop_one(store)]
        else:
            stopped = fleet.stop_all()
            if dockerd.stop_dockerd(say):
                # Its nodes are stopped now: their own disks (resources.disk_size) come off
                # the host; the images stay, and each node mounts its disk again when it
                # starts.
                for point in node_disks.unmount_all():
                    say(f"Unmounted node disk {point}")
            (harness_home() / "cloud.json").unlink(missing_ok=True)
        named = registry.store_names() if stores is None else stores
        if wipe:
            for store in named:
                note(leftovers.wipe(store, harness_home()))
        note(leftovers.config_line(named, forget, named=stores is not None))
        return stopped


def forget(stores: tuple[str, ...], wipe: bool = False, note: Say = print) -> None:
    """``down --forget`` for stores no package here registers, so no emulator of theirs can
    be stopped (nor its data found) from here: remove their sections from the skycore
    config; with ``wipe``, say why their data stays."""
    with _lock():
        if wipe:
            for store in stores:
                note(leftovers.wipe(store, harness_home()))
        note(leftovers.config_line(stores, forget=True))


def env_exports() -> dict[str, str]:
    """Shell variables that point skycore and docker at the local cloud."""
    exports = {"SKYCORE_HOME": str(config_path().parent)}
    engine = dockerd.current()
    if engine:
        exports["DOCKER_HOST"] = engine.host
    exports["HARNESS_HOME"] = str(harness_home())
    exports["PATH"] = f"{Path(sys.executable).parent}:$PATH"
    return exports
