"""Chaos for the local cloud: preempt a spot node, cut a store off for a while.

``preempt(cluster, rank)`` is what a spot preemption looks like from the outside: the node's
container is killed and removed with its disk in one step (no stop, no drain, no signal the
node can act on; a disk of its own, ``resources.disk_size``, is deleted right after).
Only what a cached mount had already uploaded survives, in the bucket. The command line form
is ``harness preempt CLUSTER [--rank N] [--force]`` (``preempt_command``, in the harness CLI).

``pause_store(store)`` freezes the store's access gate (SIGSTOP) until the block ends
(SIGCONT): requests hang as on a network cut. The gate is shared by everything using the
local cloud, so keep the pause short and never use it in parallel test runs.

``StoreFaults`` (the ``store_faults`` fixture) and ``harness fault STORE KIND`` inject the
faults of a store's access gate (harness.gate.faults).

``stall_processes(cluster, pattern, stop_s, run_s)`` keeps some processes of a node off the
CPU (SIGSTOP from the host) for ``stop_s`` out of every ``stop_s + run_s``: a node program
that a loaded machine schedules late.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click
import docker.errors

from harness import emulator_registry as registry
from harness.cloud.status import describe_fault
from harness.emulators import fleet
from harness.errors import CloudError
from harness.gate.faults import KINDS
from skycore import state
from skycore.config import SkycoreConfig, load_config
from skycore.provision import docker as docker_provider

LOOKUP_EVERY = 10  # stall_processes looks its processes up again every this many cycles


class ChaosError(CloudError):
    """The requested fault cannot be injected; the message says why and what to do."""


@dataclass(frozen=True)
class Preemption:
    """One preempted node: which, when its removal was issued and when it was done
    (wall clock, seconds)."""

    cluster: str
    rank: int
    container: str
    issued_at: float
    at: float


def nodes(cluster: str, config: SkycoreConfig | None = None) -> dict[int, str]:
    """The existing nodes of ``cluster`` on the engine: rank -> container name."""
    cfg = config or load_config()
    found = docker_provider.client(cfg).containers.list(
        all=True, filters={"label": f"{docker_provider.LABEL_CLUSTER}={cluster}"}
    )
    return {int(c.labels[docker_provider.LABEL_RANK]): c.name or "" for c in found}


def preempt(
    cluster: str, rank: int = 0, *, force: bool = False, config: SkycoreConfig | None = None
) -> Preemption:
    """Remove node ``rank`` of ``cluster`` abruptly: killed, container and disk gone.

    Refuses a cluster recorded (in this SKYCORE_HOME) as on-demand unless ``force``: only
    spot nodes are preempted. Raises ChaosError if the node does not exist.
    """
    cfg = config or load_config()
    record = state.get_cluster(cluster)
    if record is not None and not record.resources.get("use_spot") and not force:
        raise ChaosError(
            f"Cluster '{cluster}' runs on-demand nodes (resources.use_spot is false), which are "
            "never preempted. Launch it with --use-spot (managed jobs: 'skycore jobs launch "
            "--use-spot'), or pass --force to remove the node anyway."
        )
    found = docker_provider.client(cfg).containers.list(
        all=True, filters={"label": f"{docker_provider.LABEL_CLUSTER}={cluster}"}
    )
    by_rank = {int(c.labels[docker_provider.LABEL_RANK]): c for c in found}
    if rank not in by_rank:
        have = ", ".join(map(str, sorted(by_rank))) or "none"
        raise ChaosError(
            f"Cluster '{cluster}' has no node of rank {rank} on {cfg.docker.host} (ranks: "
            f"{have}). Check the name with 'skycore status' or 'skycore jobs queue'."
        )
    container = by_rank[rank]
    name = container.name or docker_provider.container_name(cluster, rank)
    issued = time.time()
    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass  # it vanished on its own meanwhile: preempted all the same
    except docker.errors.APIError as e:
        raise ChaosError(f"Removing node {name} failed: {e.explanation or e}.") from e
    docker_provider.release_disk(cluster, rank, cfg)  # a node's own disk goes with it
    return Preemption(cluster, rank, name, issued, time.time())


def wait_for_node(
    cluster: str, rank: int = 0, timeout: float = 120.0, config: SkycoreConfig | None = None
) -> str:
    """Wait until node ``rank`` of ``cluster`` exists; its container name."""
    deadline = time.monotonic() + timeout
    while True:
        found = nodes(cluster, config)
        if rank in found:
            return found[rank]
        if time.monotonic() > deadline:
            raise ChaosError(f"Cluster '{cluster}' has no node {rank} after {timeout:.0f} s.")
        time.sleep(0.2)


@contextlib.contextmanager
def pause_store(store: str) -> Iterator[None]:
    """Freeze ``store``'s access gate for the block: its requests hang, then resume."""

    _, gate = fleet.get(store).procs
    if not gate.alive():
        raise ChaosError(f"The {store} gate is not running; start the local cloud first.")
    os.kill(gate.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(gate.pid, signal.SIGCONT)


@contextlib.contextmanager
def stall_processes(
    cluster: str,
    pattern: str,
    stop_s: float,
    run_s: float,
    rank: int = 0,
    config: SkycoreConfig | None = None,
) -> Iterator[set[int]]:
    """Until the block ends, freeze the processes of node ``rank`` of ``cluster`` whose
    command line contains ``pattern`` for ``stop_s`` out of every ``stop_s + run_s`` (looked
    up again now and then: one that starts meanwhile is frozen too); then let them all go
    on. Yields the set of host pids frozen so far. Raises ChaosError if the node does not
    exist."""
    cfg = config or load_config()
    name = nodes(cluster, cfg).get(rank)
    if not name:
        raise ChaosError(f"cluster {cluster!r} has no node {rank}: launch it first")
    container = docker_provider.client(cfg).containers.get(name)
    frozen: set[int] = set()
    over = threading.Event()

    def matching() -> list[int]:
        try:
            top = container.top()
            pid_at, cmd_at = top["Titles"].index("PID"), top["Titles"].index("CMD")
            return [int(p[pid_at]) for p in top["Processes"] if pattern in p[cmd_at]]
        except (docker.errors.APIError, KeyError, ValueError):
            return []  # the node is going away

    def signal_all(pids: list[int], sig: signal.Signals) -> list[int]:
        """The pids that got ``sig`` (the others are gone)."""
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        return alive

    def run() -> None:
        pids: list[int] = []
        for cycle in itertools.count():
            if over.is_set():
                return
            if not pids or cycle % LOOKUP_EVERY == 0:  # a lookup takes ~0.1 s: not each time
                pids = matching()
            pids = signal_all(pids, signal.SIGSTOP)
            frozen.update(pids)
            over.wait(stop_s)
            signal_all(pids, signal.SIGCONT)
            over.wait(run_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield frozen
    finally:
        over.set()
        thread.join()
        signal_all(sorted(frozen), signal.SIGCONT)


@click.command("preempt")
@click.argument("cluster")
@click.option("--rank", default=0, show_default=True, type=int, help="Rank of the node.")
@click.option("--force", is_flag=True, help="Remove the node even if it is on-demand.")
def preempt_command(cluster: str, rank: int, force: bool) -> None:
    """Preempt a spot node of CLUSTER: remove it abruptly with its disk (no drain)."""
    try:
        hit = preempt(cluster, rank, force=force)
    except ChaosError as e:
        raise click.ClickException(str(e)) from None
    click.echo(
        f"Preempted node {hit.rank} of cluster {hit.cluster} ({hit.container}) at "
        f"{time.strftime('%H:%M:%S', time.localtime(hit.at))}."
    )


# --- faults through the gate ----------------------------------------------------------------

FAULT_KINDS = KINDS
POLL_S = 0.025  # wait_hits asks the gate this often (a local HTTP call: ~1 ms)


def inject_fault(store: str, kind: str, **options: Any) -> dict[str, Any]:
    """Start ``kind`` in ``store``'s gate (see harness.gate.faults); the fault as shown."""

    try:
        return fleet.get(store).add_fault(kind, **options)
    except fleet.EmulatorError as e:
        raise ChaosError(str(e)) from None


def _kind(kind: str, doc: str) -> Callable[..., contextlib.AbstractContextManager[Any]]:
    """A StoreFaults method: ``store_faults.<kind>(store, **options)``, the fault lasting for
    the block."""

    def inject(
        self: StoreFaults, store: str, **options: Any
    ) -> contextlib.AbstractContextManager[Any]:
        return self.inject(store, kind, **options)

    inject.__name__ = inject.__qualname__ = kind.replace("-", "_")
    inject.__doc__ = doc
    return inject


class StoreFaults:
    """Faults of the local cloud's stores (the ``store_faults`` fixture). A test holds a
    fault for a block and ends it on events, never on a timer::

        with store_faults.hold("s3", "corrupt", bucket=b, max_hits=1) as fault:
            ...  # start the upload
            store_faults.wait_hits("s3", fault, 1)

    A fault ends when its block ends, when it has hit ``max_hits`` requests, or when
    :meth:`stop` / :meth:`clear_all` end it; every fault started here is cleared by
    :meth:`clear_all`. ``seconds`` (a timed end) is for people at the command line
    (``harness fault``); :meth:`hold` refuses it."""

    def __init__(self) -> None:
        self._started: list[tuple[str, int]] = []

    def start(self, store: str, kind: str, **options: Any) -> dict[str, Any]:
        """Start a fault (it lasts until :meth:`stop` / :meth:`clear_all`, its max_hits or
        its seconds)."""
        fault = inject_fault(store, kind, **options)
        self._started.append((store, int(fault["id"])))
        return fault

    def stop(self, store: str, fault: dict[str, Any]) -> None:
        """End one fault now (nothing if it already ended)."""

        fleet.get(store).clear_faults(fault_id=int(fault["id"]))

    @contextlib.contextmanager
    def inject(self, store: str, kind: str, **options: Any) -> Iterator[dict[str, Any]]:
        """The fault lasts for the block (or less, with ``seconds`` or ``max_hits``)."""
        fault = self.start(store, kind, **options)
        try:
            yield fault
        finally:
            self.stop(store, fault)

    def hold(
        self, store: str, kind: str, **options: Any
    ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """The fault lasts until the block ends (or it has hit ``max_hits`` requests);
        yields the fault as the gate showed it at its start. No ``seconds``: a test ends
        its faults on events."""
        if options.get("seconds") is not None:
            raise ChaosError(
                "StoreFaults.hold() lasts until its block ends and takes no seconds; end the "
                "fault on an event (max_hits=N, or leave the block once wait_hits() returns)."
            )
        return self.inject(store, kind, **options)

    def state(self, store: str, fault: dict[str, Any] | int) -> dict[str, Any]:
        """The fault as the gate shows it now, active or ended (``hits``, ``ended``)."""

        fault_id = fault if isinstance(fault, int) else int(fault["id"])
        try:
            return fleet.get(store).fault(fault_id)
        except fleet.EmulatorError as e:
            raise ChaosError(str(e)) from None

    def wait_hits(
        self, store: str, fault: dict[str, Any] | int, n: int = 1, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Wait until ``fault`` has hit at least ``n`` requests; its state then (polled
        every 25 ms). ``timeout`` is a hang guard: ChaosError if the hits do not come in
        time, or at once if the fault ended before (cleared, or its seconds up)."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.state(store, fault)
            if now["hits"] >= n:
                return now
            if now.get("ended") is not None:
                raise ChaosError(
                    f"{store} fault {describe_fault(now)} ended ({now['ended']}) after "
                    f"{now['hits']} of the {n} hit(s) waited for."
                )
            if time.monotonic() > deadline:
                raise ChaosError(
                    f"{store} fault {describe_fault(now)} hit {now['hits']} of the {n} "
                    f"request(s) waited for in {timeout:g} s: no matching request came "
                    "(check its bucket and method)."
                )
            time.sleep(POLL_S)

    outage = _kind("outage", "Requests hang (no answer) for the block.")
    errors = _kind(
        "errors", "A share ``rate`` of requests gets ``status`` (503) in the API's error format."
    )
    latency = _kind("latency", "Every request waits ``ms`` first.")
    bandwidth = _kind("bandwidth", "Bodies flow at ``mibps`` MiB/s in total.")
    stream_bandwidth = _kind("stream-bandwidth", "Each request's body flows at ``mibps`` MiB/s.")
    reset = _kind("reset", "A share ``rate`` of connections is reset in the middle of a body.")
    deny = _kind("deny", "403 AccessDenied, as when the credentials were revoked.")
    corrupt = _kind(
        "corrupt",
        "A share ``rate`` of object writes is answered with a wrong checksum (the object "
        "is intact); the object's reads show it too until it is written again or deleted.",
    )

    def log(self, store: str, bucket: str | None = None) -> list[dict[str, Any]]:
        """The store's fault log (starts and ends)."""

        return fleet.get(store).fault_log(bucket)

    def clear_all(self) -> None:
        """End every fault started through this object."""

        for store, fault_id in reversed(self._started):
            with contextlib.suppress(fleet.EmulatorError):
                fleet.get(store).clear_faults(fault_id=fault_id)
        self._started.clear()


@click.command("fault")
@click.argument("store")
@click.argument("kind", type=click.Choice([*FAULT_KINDS, "clear", "list"]))
@click.option("--seconds", type=float, help="How long the fault lasts (default: until clear).")
@click.option(
    "--max-hits",
    type=click.IntRange(min=1),
    help="End the fault once it has hit this many requests.",
)
@click.option("--rate", type=float, help="Share of requests hit (errors, reset, corrupt; 1).")
@click.option("--status", type=int, help="HTTP status of 'errors' (default 503).")
@click.option("--ms", type=float, help="Delay of 'latency' in milliseconds.")
@click.option("--mibps", type=float, help="MiB/s of 'bandwidth' (all), 'stream-bandwidth' (each).")
@click.option("--bucket", help="Only requests on this bucket (container).")
@click.option(
    "--method",
    type=click.Choice(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"], case_sensitive=False),
    help="Only requests with this method.",
)
@click.option("--id", "fault_id", type=int, help="clear: only this fault.")
def fault_command(
    store: str,
    kind: str,
    seconds: float | None,
    max_hits: int | None,
    rate: float | None,
    status: int | None,
    ms: float | None,
    mibps: float | None,
    bucket: str | None,
    method: str | None,
    fault_id: int | None,
) -> None:
    """Make STORE (a store or its alias) misbehave through its gate: outage, errors,
    latency, bandwidth, stream-bandwidth, reset, deny, corrupt; or clear / list its faults."""

    store = registry.resolve_store(store)
    try:
        emulator = fleet.get(store)
        if kind == "list":
            active = emulator.faults()
            for fault in active:
                click.echo(describe_fault(fault))
            if not active:
                click.echo(f"No faults on {store}.")
            return
        if kind == "clear":
            ended = emulator.clear_faults(fault_id=fault_id, bucket=bucket)
            click.echo(f"Cleared {len(ended)} fault(s) on {store}.")
            return
        fault = emulator.add_fault(
            kind,
            seconds=seconds,
            max_hits=max_hits,
            rate=rate,
            status=status,
            ms=ms,
            mibps=mibps,
            bucket=bucket,
            method=method.upper() if method else None,
        )
    except fleet.EmulatorError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{store}: started {describe_fault(fault)}")
