"""The set-up step runner (harness.cloud.steps) and the plan of ``harness up``
(harness.cloud.bringup): steps wait for what they need and no longer, independent steps run
at once, a failure skips only what needs it, and each step says one timed line."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.cloud import bringup
from harness.cloud.steps import Say, Step, check_plan, progress_line, run_steps
from harness.errors import CloudError

HANG_GUARD_S = 30.0


def _recording(events: list[str], name: str, result: str = "done") -> Step:
    def run(say: Say) -> str:
        events.append(f"start {name}")
        events.append(f"end {name}")
        return result

    return Step(name, run)


def test_progress_line_shows_the_clock_the_result_and_the_duration() -> None:
    line = progress_line(42.34, "node rootfs", "built with mmdebstrap", 38.12)
    assert line == "[ 42.3 s] node rootfs: built with mmdebstrap (38.1 s)"
    assert progress_line(0.0, "dockerd", "starting") == "[  0.0 s] dockerd: starting"


def test_a_step_starts_after_the_steps_it_needs_have_ended() -> None:
    events: list[str] = []
    a, b, c = (_recording(events, name) for name in "abc")
    steps = [Step("c", c.run, after=("a", "b")), Step("b", b.run, after=("a",)), a]
    results = run_steps(steps, say=lambda _line: None)
    assert results == {"a": "done", "b": "done", "c": "done"}
    assert events.index("end a") < events.index("start b")
    assert events.index("end b") < events.index("start c")


def test_independent_steps_run_at_the_same_time() -> None:
    """Each of the two steps waits for the other to have started: run one after the other,
    the first would wait in vain."""
    started = {name: threading.Event() for name in ("apt", "npm")}

    def meet(name: str, other: str) -> Step:
        def run(say: Say) -> str:
            started[name].set()
            if not started[other].wait(HANG_GUARD_S):
                raise AssertionError(f"{other} never ran beside {name}")
            return "met"

        return Step(name, run)

    assert run_steps([meet("apt", "npm"), meet("npm", "apt")], say=lambda _l: None) == {
        "apt": "met",
        "npm": "met",
    }


def test_each_step_says_one_timed_line_and_its_own_lines_carry_the_clock() -> None:
    lines: list[str] = []

    def talk(say: Say) -> str:
        say("halfway")
        return "present"

    run_steps([Step("dockerd", talk)], say=lines.append, clock=lambda: 5.0)
    assert lines == ["[  0.0 s] dockerd: halfway", "[  0.0 s] dockerd: present (0.0 s)"]


def test_a_failure_skips_what_needs_it_and_lets_the_rest_finish() -> None:
    events: list[str] = []

    def broken(say: Say) -> str:
        raise CloudError("apt failed: the mirror is unreachable")

    steps = [
        Step("apt", broken),
        Step("dockerd", _recording(events, "dockerd").run, after=("apt",)),
        Step("image", _recording(events, "image").run, after=("dockerd",)),
        _recording(events, "npm"),
    ]
    lines: list[str] = []
    with pytest.raises(CloudError, match="mirror is unreachable"):
        run_steps(steps, say=lines.append)
    assert events == ["start npm", "end npm"]
    said = {line.split("] ", 1)[1].split(" (")[0] for line in lines}
    assert {"apt: failed", "dockerd: not run", "image: not run", "npm: done"} <= said


def test_the_first_failure_keeps_its_type() -> None:
    class EmulatorTrouble(Exception):
        pass

    def broken(say: Say) -> str:
        raise EmulatorTrouble("azurite did not install")

    with pytest.raises(EmulatorTrouble):
        run_steps([Step("emulators", broken)], say=lambda _l: None)


def test_two_failures_are_named_in_one_error() -> None:
    def broken(message: str) -> Step:
        def run(say: Say) -> str:
            raise CloudError(message)

        return Step(message.split()[0], run)

    with pytest.raises(CloudError) as caught:
        run_steps([broken("apt is locked"), broken("npm is unreachable")], say=lambda _l: None)
    assert "apt: apt is locked" in str(caught.value)
    assert "npm: npm is unreachable" in str(caught.value)


@pytest.mark.parametrize(
    ("steps", "named"),
    [
        ([Step("a", lambda s: "", after=("ghost",))], "ghost"),
        ([Step("a", lambda s: "", after=("b",)), Step("b", lambda s: "", after=("a",))], "cycle"),
        ([Step("a", lambda s: ""), Step("a", lambda s: "")], "named twice: a"),
    ],
)
def test_a_plan_that_cannot_run_is_refused_before_anything_runs(
    steps: list[Step], named: str
) -> None:
    with pytest.raises(CloudError, match=named):
        run_steps(steps, say=lambda _l: None)


def _needs(steps: list[Step]) -> dict[str, tuple[str, ...]]:
    check_plan(steps)
    return {step.name: step.after for step in steps}


def _made(need_node: bool = True) -> bringup.Bringup:
    return bringup.Bringup(("s3", "azure"), need_node, seed=lambda running, say: 0)


def test_up_builds_the_rootfs_beside_apt_and_starts_emulators_that_install_nothing_at_once() -> (
    None
):
    needs = _needs(bringup.plan(_made()))
    assert needs[bringup.ROOTFS] == (bringup.APT_TOOLS,)
    assert needs[bringup.APT] == (bringup.APT_TOOLS,)
    assert needs[bringup.DOCKERD] == (bringup.APT,)
    assert set(needs[bringup.IMAGE]) == {bringup.ROOTFS, bringup.DOCKERD}
    assert needs[bringup.EMULATORS] == ()
    assert needs[bringup.NPM_EMULATORS] == (bringup.INSTALLS,)


def test_emulator_installs_wait_for_apt_only_when_apt_brings_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, no npm on PATH
    assert _needs(bringup.plan(_made()))[bringup.INSTALLS] == (bringup.APT,)
    assert _needs(bringup.plan(_made(need_node=False)))[bringup.INSTALLS] == ()
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name in ("node", "npm"):
        (fake_bin / name).write_text("#!/bin/sh\n")
        (fake_bin / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(fake_bin))
    assert _needs(bringup.plan(_made()))[bringup.INSTALLS] == ()


DOCKER_STEPS = {bringup.APT_TOOLS, bringup.ROOTFS, bringup.DOCKERD, bringup.IMAGE}
EMULATOR_STEPS = {bringup.INSTALLS, bringup.EMULATORS, bringup.NPM_EMULATORS}


def test_plans_without_docker_or_emulators_leave_their_steps_out() -> None:
    emulators_only = _needs(bringup.plan(_made(), with_docker=False))
    assert set(emulators_only) == {bringup.APT} | EMULATOR_STEPS
    assert emulators_only[bringup.APT] == ()
    docker_only = _needs(bringup.plan(_made(), with_emulators=False))
    assert set(docker_only) == {bringup.APT} | DOCKER_STEPS


def test_the_ahead_install_runs_on_the_system_python_before_the_venv_exists() -> None:
    """``make up`` runs harness.cloud.system with the system's python beside the venv
    install: it and what it imports may use the standard library only."""
    import ast
    import sys

    import harness.cloud.steps
    import harness.cloud.system
    import harness.errors

    allowed = {"harness.errors", "harness.cloud.steps"}
    for module in (harness.cloud.system, harness.cloud.steps, harness.errors):
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name in allowed, (module, name)
