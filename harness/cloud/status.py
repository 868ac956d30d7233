"""What ``harness status`` reports: the engine, the node image, each store's emulator and
gate, the node containers on the engine, the faults active in each gate and the skycore
config; as one JSON object (:func:`as_json`, stable field names) or as lines
(harness.cloud.status_view).

Every question has a short timeout: a gate or an engine that does not answer in time is
reported as unknown, never waited for.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound
from requests.exceptions import RequestException

from harness import emulator_registry as registry
from harness.cloud import dockerd, nodes
from harness.emulators import fleet
from harness.errors import CloudError
from harness.paths import harness_home
from skycore.config import config_path
from skycore.provision.docker_engine import LABEL_CLUSTER, LABEL_RANK, labels_of, name_of

FAULTS_TIMEOUT_S = 2.0
"""How long each gate gets to list its faults."""
ENGINE_TIMEOUT_S = 5.0
"""How long the engine gets for each of the image and node questions."""
FAULT_FIELDS = (
    "id", "kind", "bucket", "method", "rate", "status", "ms", "mibps", "hits", "max_hits",
    "ends_at_ns",
)  # fmt: skip
"""The fields of a gate's fault that ``--json`` shows (besides ``description``)."""


@dataclass
class Engine:
    """The docker engine: its host and, if the harness started it, its PID and log."""

    running: bool
    host: str | None = None
    pid: int | None = None
    started_by_harness: bool = False
    log: str | None = None


@dataclass
class Image:
    """The node image: its tag, whether the engine has it (None: unknown, ``problem`` says
    why)."""

    tag: str | None
    present: bool | None
    problem: str | None = None


@dataclass
class Emulator:
    """One store's emulator and the gate in front of it (the endpoint clients use)."""

    store: str
    alias: str | None
    implementation: str
    state: str
    """running, stopped, not answering (both processes live, the gate does not answer) or
    dead (a process of the record is gone)."""
    running: bool
    endpoint: str | None
    gate_pid: int | None
    pid: int | None
    log: str | None
    gate_log: str | None


@dataclass
class Node:
    """A node container of a skycore cluster on the engine."""

    name: str
    cluster: str
    rank: int | None
    state: str


@dataclass
class StoreFaults:
    """The faults active in one running store's gate; ``known`` is False (and ``problem``
    says why) when the gate did not answer."""

    store: str
    known: bool
    active: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None


@dataclass
class CloudStatus:
    """Everything ``harness status`` shows. ``nodes`` is None when the engine could not be
    asked (``nodes_problem`` says why)."""

    dockerd: Engine
    image: Image
    emulators: list[Emulator]
    nodes: list[Node] | None
    faults: list[StoreFaults]
    config: str
    config_present: bool
    nodes_problem: str | None = None


def collect() -> CloudStatus:
    """Ask every part of the local cloud, the gates side by side."""
    engine = _engine()
    emulators = _emulators()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="status") as pool:
        asked = pool.submit(_faults, emulators)
        image, found, problem = _engine_contents(engine)
        faults = asked.result()
    cfg = config_path()
    return CloudStatus(
        dockerd=engine,
        image=image,
        emulators=emulators,
        nodes=found,
        faults=faults,
        config=str(cfg),
        config_present=cfg.exists(),
        nodes_problem=problem,
    )


def _engine() -> Engine:
    state = dockerd.current()
    if state is None:
        return Engine(running=False)
    return Engine(True, state.host, state.pid, state.pid is not None, state.log)


def _emulators() -> list[Emulator]:
    aliases = {store: alias for alias, store in registry.aliases().items()}
    found = []
    for store, st in fleet.status_all().items():
        running = bool(st.get("running"))
        if running:
            state = "running"
        elif st.get("pid") is None:
            state = "stopped"
        elif st.get("pid_alive") and st.get("gate_pid_alive"):
            state = "not answering"
        else:
            state = "dead"
        found.append(
            Emulator(
                store=store,
                alias=aliases.get(store),
                implementation=str(
                    st.get("implementation") or fleet.emulator_class(store).implementation
                ),
                state=state,
                running=running,
                endpoint=st.get("endpoint"),
                gate_pid=st.get("gate_pid"),
                pid=st.get("pid"),
                log=st.get("log"),
                gate_log=st.get("gate_log"),
            )
        )
    return found


def _faults(emulators: list[Emulator]) -> list[StoreFaults]:
    """The faults of every store whose gate process lives (a stopped gate has none)."""
    home = harness_home(create=False)
    asked = [e.store for e in emulators if e.state in ("running", "not answering")]
    if not asked:
        return []

    def ask(store: str) -> StoreFaults:
        emulator = fleet.emulator_class(store).load(home)
        if emulator is None:
            return StoreFaults(store, False, problem="its record is gone")
        try:
            active = emulator.faults(timeout=FAULTS_TIMEOUT_S)
        except (fleet.EmulatorError, ValueError) as e:
            return StoreFaults(store, False, problem=str(e))
        return StoreFaults(store, True, [_fault_fields(f) for f in active])

    with ThreadPoolExecutor(max_workers=len(asked), thread_name_prefix="faults") as pool:
        return list(pool.map(ask, asked))


def _fault_fields(fault: dict[str, Any]) -> dict[str, Any]:
    return {**{k: fault.get(k) for k in FAULT_FIELDS}, "description": describe_fault(fault)}


def _engine_contents(engine: Engine) -> tuple[Image, list[Node] | None, str | None]:
    """The node image and the node containers (None and why when the engine is not asked
    or does not answer)."""
    try:
        tag: str | None = nodes.image_tag()
        unknown_tag = None
    except CloudError as e:
        tag, unknown_tag = None, str(e)
    if engine.host is None:
        problem = "dockerd is not running"
        return Image(tag, None, unknown_tag or problem), None, problem
    try:
        client = docker.DockerClient(
            base_url=engine.host, version="auto", timeout=int(ENGINE_TIMEOUT_S)
        )
    except (DockerException, RequestException) as e:
        return Image(tag, None, unknown_tag or str(e)), None, f"the engine does not answer: {e}"
    try:
        image = Image(None, None, unknown_tag) if tag is None else _image(client, tag)
        try:
            listed = client.containers.list(all=True, sparse=True, filters={"label": LABEL_CLUSTER})
        except (DockerException, RequestException) as e:
            return image, None, f"the engine did not list its containers: {e}"
        return image, sorted((_node(c) for c in listed), key=_node_order), None
    finally:
        client.close()


def _image(client: docker.DockerClient, tag: str) -> Image:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return Image(tag, False, "run 'harness up'")
    except (DockerException, RequestException) as e:
        return Image(tag, None, str(e))
    return Image(tag, True)


def _node(container: Any) -> Node:
    labels = labels_of(container)
    rank = labels.get(LABEL_RANK, "")
    return Node(
        name=name_of(container),
        cluster=labels.get(LABEL_CLUSTER, ""),
        rank=int(rank) if rank.isdigit() else None,
        state=str(container.status),
    )


def _node_order(node: Node) -> tuple[str, int]:
    return node.cluster, -1 if node.rank is None else node.rank


def as_json(status: CloudStatus) -> dict[str, Any]:
    """The status as one JSON object: dockerd, image, emulators[], nodes[] (null when the
    engine was not asked), faults[] (one entry per running gate), config."""
    return {
        "dockerd": asdict(status.dockerd),
        "image": asdict(status.image),
        "emulators": [asdict(e) for e in status.emulators],
        "nodes": None if status.nodes is None else [asdict(n) for n in status.nodes],
        "nodes_problem": status.nodes_problem,
        "faults": [asdict(f) for f in status.faults],
        "config": {"path": status.config, "present": status.config_present},
    }


def describe_fault(fault: dict[str, Any]) -> str:
    """One fault as ``harness fault STORE list`` shows it: ``#3 errors status=503 ...``."""
    parts = [f"#{fault['id']} {fault['kind']}"]
    for name in ("rate", "status", "ms", "mibps"):
        value = fault.get(name)
        default = {"rate": 1.0, "status": 503, "ms": 0.0, "mibps": 0.0}[name]
        if value is not None and value != default:
            parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    if fault.get("kind") == "errors" and "status=" not in " ".join(parts):
        parts.append(f"status={fault.get('status')}")
    parts.append(f"bucket={fault.get('bucket') or '*'}")
    parts.append(f"method={fault.get('method') or '*'}")
    if fault.get("max_hits"):
        parts.append(f"hits={fault.get('hits', 0)}/{fault['max_hits']}")
    ends = fault.get("ends_at_ns")
    if fault.get("ended"):
        parts.append(f"ended ({fault['ended']})")
    elif ends:
        parts.append(f"until {time.strftime('%H:%M:%S', time.localtime(ends / 1e9))}")
    else:
        parts.append("until cleared")
    return " ".join(parts)
