"""Set-up steps run side by side as far as their dependencies allow, one progress line each.

A step is a name, a function and the names of the steps it needs first. ``run_steps``
starts every step whose dependencies are done, in threads, and prints one line per step
when it ends: the time since the run started, its result and how long it took, e.g.
``[ 42.3 s] node rootfs: built with mmdebstrap (38.1 s)``. Lines a step says while it runs
carry the same clock and its name. A failed step skips the steps that need it; the others
run to the end, then the failure is raised.
"""

from __future__ import annotations

import graphlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from harness.errors import CloudError

Say = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    """One step of a set-up: ``run(say)`` does it and returns a short result ("present",
    "installed docker.io"); ``after`` names the steps it needs first."""

    name: str
    run: Callable[[Say], str]
    after: tuple[str, ...] = ()


def progress_line(at: float, name: str, message: str, took: float | None = None) -> str:
    """``[  at s] name: message (took s)``; no duration when ``took`` is None."""
    tail = "" if took is None else f" ({took:.1f} s)"
    return f"[{at:5.1f} s] {name}: {message}{tail}"


def check_plan(steps: Sequence[Step]) -> graphlib.TopologicalSorter[str]:
    """The plan's dependency graph, ready to run; CloudError for a repeated name, a
    dependency no step provides, or a cycle."""
    names = [step.name for step in steps]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CloudError(f"Set-up steps named twice: {', '.join(repeated)}; give each a name.")
    for step in steps:
        unknown = [dep for dep in step.after if dep not in names]
        if unknown:
            raise CloudError(
                f"Set-up step '{step.name}' needs {', '.join(unknown)}, which no step provides: "
                "add that step to the plan or drop the dependency."
            )
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(
        {step.name: step.after for step in steps}
    )
    try:
        sorter.prepare()
    except graphlib.CycleError as e:
        raise CloudError(
            f"Set-up steps depend on each other in a cycle ({' -> '.join(e.args[1])}); break it."
        ) from None
    return sorter


@dataclass
class _Outcome:
    result: str = ""
    error: BaseException | None = None
    took: float = 0.0


def run_steps(
    steps: Sequence[Step], say: Say = print, clock: Callable[[], float] = time.monotonic
) -> dict[str, str]:
    """Run ``steps`` (in threads, each once its dependencies are done); return each step's
    result. Raises the failure of a failed step (several: one CloudError naming each) after
    every step that does not need it has ended."""
    sorter = check_plan(steps)
    by_name = {step.name: step for step in steps}
    started = clock()
    lock = threading.Lock()

    def tell(line: str) -> None:
        with lock:
            say(line)

    def attempt(step: Step) -> _Outcome:
        def step_say(message: str) -> None:
            tell(progress_line(clock() - started, step.name, message))

        begun = clock()
        outcome = _Outcome()
        try:
            outcome.result = step.run(step_say)
        except Exception as e:  # reported after the steps that do not need this one
            outcome.error = e
        outcome.took = clock() - begun
        return outcome

    results: dict[str, str] = {}
    failed: dict[str, BaseException] = {}
    not_run: set[str] = set()
    with ThreadPoolExecutor(max_workers=max(1, len(steps)), thread_name_prefix="setup") as pool:
        running: dict[Future[_Outcome], str] = {}
        while sorter.is_active():
            for name in sorter.get_ready():
                blocked = [dep for dep in by_name[name].after if dep in failed or dep in not_run]
                if blocked:
                    not_run.add(name)
                    tell(progress_line(clock() - started, name, f"not run ({blocked[0]} failed)"))
                    sorter.done(name)
                else:
                    running[pool.submit(attempt, by_name[name])] = name
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                name = running.pop(future)
                outcome = future.result()
                if outcome.error is not None:
                    failed[name] = outcome.error
                    tell(progress_line(clock() - started, name, "failed", outcome.took))
                else:
                    results[name] = outcome.result
                    tell(progress_line(clock() - started, name, outcome.result, outcome.took))
                sorter.done(name)
    if len(failed) == 1:
        raise next(iter(failed.values()))
    if failed:
        raise CloudError("\n\n".join(f"{name}: {error}" for name, error in failed.items()))
    return results
