"""Processes frozen with SIGSTOP: a store's gate paused, a node's processes stalled."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
from collections.abc import Iterator

import docker.errors

from harness.cloud.chaos import ChaosError
from harness.cloud.preemption import nodes
from harness.emulators import fleet
from skycore.config import SkycoreConfig, load_config
from skycore.provision import docker as docker_provider

LOOKUP_EVERY = 10  # stall_processes looks its processes up again every this many cycles


@contextlib.contextmanager
def pause_store(store: str) -> Iterator[None]:
    """Freeze ``store``'s access gate for the block: its requests hang, then resume. The
    gate serves everything using the local cloud: keep the pause short, never in parallel
    test runs."""

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
