"""``prepare`` runs once per process and harness home, whoever asks: ``harness up``'s install
step and its start of the emulators run side by side and share one call."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cloud.steps import Step, run_steps
from harness.emulators import fleet, launcher
from harness.emulators.preparing import forget_prepared, prepare_once
from harness.emulators.records import EmulatorError
from harness.errors import CloudError


def calls(home: Path) -> int:
    """How many times the fixture emulators' ``prepare`` ran for ``home``."""
    path = home / "prepare-calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


class SlowPrepare:
    """An emulator whose ``prepare`` is slow (an install) and counts its calls in a file;
    it has no server (``command`` fails), so a launch stops right after ``prepare``."""

    store: ClassVar[str] = "slowprep"
    persistent: ClassVar[bool] = True
    startup_timeout: ClassVar[float] = 5.0
    fails: ClassVar[bool] = False

    @classmethod
    def prepare(cls, home: Path) -> None:
        with open(home / "prepare-calls", "a") as out:
            out.write("called\n")
        time.sleep(0.3)
        if cls.fails:
            raise EmulatorError("the install of slowprep failed")

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        raise EmulatorError("slowprep has no server")


class FailingPrepare(SlowPrepare):
    store = "failprep"
    fails = True


def run_up_steps(home: Path, emulator: type[SlowPrepare]) -> None:
    """The two steps of ``harness up`` that call ``prepare`` for ``emulator`` (its install and
    its start), run side by side as ``harness up`` runs its steps."""

    def install(_say: object) -> str:
        fleet.prepare_all(home, stores=[emulator.store])
        return "ready"

    def start(_say: object) -> str:
        launcher.launch(emulator, home)  # type: ignore[type-var]
        return "running"

    run_steps([Step("emulator installs", install), Step("emulators", start)], lambda _: None)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    forget_prepared()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "harness"


@pytest.fixture
def slowprep(monkeypatch: pytest.MonkeyPatch) -> type[SlowPrepare]:
    """SlowPrepare as the emulator the fleet finds for its store."""
    real = fleet.emulator_class
    monkeypatch.setattr(
        fleet, "emulator_class", lambda s: SlowPrepare if s == SlowPrepare.store else real(s)
    )
    return SlowPrepare


def test_the_install_step_and_the_launch_share_one_prepare(
    home: Path, slowprep: type[SlowPrepare]
) -> None:
    """The two places ``harness up`` calls ``prepare`` from, run as its steps run them (side
    by side): one call; the launch goes on to start the server after it."""
    home.mkdir(parents=True)
    with pytest.raises(EmulatorError, match="slowprep has no server"):
        run_up_steps(home, slowprep)
    assert calls(home) == 1


def test_many_callers_at_once_make_one_call(home: Path) -> None:
    home.mkdir(parents=True)
    threads = [threading.Thread(target=prepare_once, args=(SlowPrepare, home)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls(home) == 1
    prepare_once(SlowPrepare, home)  # a later caller: done already
    assert calls(home) == 1


def test_a_failed_prepare_is_one_call_and_every_caller_gets_its_error(home: Path) -> None:
    home.mkdir(parents=True)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            prepare_once(FailingPrepare, home)
        except EmulatorError as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls(home) == 1
    assert [str(e) for e in errors] == ["the install of slowprep failed"] * 4
    with pytest.raises(EmulatorError, match="install of slowprep failed"):
        prepare_once(FailingPrepare, home)
    assert calls(home) == 1


def test_a_failed_install_step_fails_the_launch_with_its_error_not_a_second_install(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.mkdir(parents=True)
    monkeypatch.setattr(fleet, "emulator_class", lambda s: FailingPrepare)
    with pytest.raises(CloudError) as failed:
        run_up_steps(home, FailingPrepare)
    assert str(failed.value).count("the install of slowprep failed") == 2
    assert calls(home) == 1


def test_each_home_and_each_emulator_is_prepared_on_its_own(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()

    class Other(SlowPrepare):
        store = "otherprep"

    for cls, home in [(SlowPrepare, one), (SlowPrepare, two), (Other, one), (SlowPrepare, one)]:
        prepare_once(cls, home)
    assert (calls(one), calls(two)) == (2, 1)


def test_forget_prepared_calls_it_again(home: Path) -> None:
    home.mkdir(parents=True)
    prepare_once(SlowPrepare, home)
    forget_prepared()
    prepare_once(SlowPrepare, home)
    assert calls(home) == 2
