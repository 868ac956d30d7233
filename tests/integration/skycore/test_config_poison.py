"""A store section written from one environment does not stop another.

Venv A is a fresh venv that sees the project's packages (a ``.pth`` line adding the dev
venv's site-packages) plus the store package tests/fixtures/rclone_s3_pkg, installed from a
copy; it runs ``harness up --store rclones3``, which merges the ``rclones3`` section into the
test's skycore config. Venv B is the dev venv, without that package: with the same
``$SKYCORE_HOME`` it launches a small task with an s3 file mount, which runs, with one
warning naming the section and the package that wrote it. Then ``harness down --wipe`` in A
says the section stayed and removes the emulator's data, and ``harness down --forget`` in B
removes the section, after which B loads the config without a warning.

A's emulator runs in a harness home of its own (the session's engine and node image, through
``DOCKER_HOST``), so it never touches an rclones3 emulator of the session's harness home.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import ANY

import pytest
import yaml

from harness.testing import access
from skycore.config import SkycoreConfig, read_origins
from skycore.deprecation import SHOWN_ENV
from tests.integration.helpers import REPO

PACKAGE = REPO / "tests" / "fixtures" / "rclone_s3_pkg"
STORE = "rclones3"
DIST = "skycore-rclones3"


def make_venv_a(root: Path) -> Path:
    """A venv that sees the dev venv's packages and has the rclones3 package installed;
    returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    project = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "dev-venv.pth").write_text(f"import site; site.addsitedir({project!r})\n")
    # the emulator runs the static rclone found next to the interpreter
    (root / "bin" / "rclone").symlink_to(Path(sys.executable).parent / "rclone")
    source = shutil.copytree(PACKAGE, root.parent / "rclone_s3_pkg")
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--no-index", str(source)], check=True, capture_output=True)
    return python


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


@pytest.fixture
def venv_a(tmp_path: Path) -> Path:
    if not PACKAGE.exists():
        pytest.skip(f"{PACKAGE} is not there")
    if not (Path(sys.executable).parent / "rclone").exists():
        pytest.skip("the dev venv has no static rclone ('make venv')")
    return make_venv_a(tmp_path / "venv-a")


@pytest.fixture
def environments(
    config: SkycoreConfig, node_engine: tuple[str, str], venv_a: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The environment both venvs run with: the test's skycore home (the local cloud's
    config) and a harness home of A's own; A's emulator is stopped afterwards."""
    if access.target() is not None:
        pytest.skip("runs a package's emulator: the local cloud only")
    if config.section("aws") is None:
        pytest.skip("needs the s3 store of the local cloud (run without --store, or --aws)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", SHOWN_ENV)}
    env |= {
        "HARNESS_HOME": str(tmp_path / "harness-a"),
        "DOCKER_HOST": node_engine[0],
        "COLUMNS": "1000",
    }
    try:
        yield env
    finally:
        subprocess.run(
            [str(venv_a), "-m", "harness.cli", "down", "--store", STORE],
            env=env,
            capture_output=True,
            timeout=120,
        )


def run(python: Path | str, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_a_section_of_a_package_missing_here_warns_and_every_command_runs(
    venv_a: Path, environments: dict[str, str], cluster: str, tmp_path: Path
) -> None:
    env = environments
    config_file = Path(env["SKYCORE_HOME"]) / "config.yaml"
    up = run(venv_a, env, "harness.cli", "up", "--store", STORE)
    assert up.returncode == 0, up.stdout + up.stderr
    assert STORE in yaml.safe_load(config_file.read_text())
    assert read_origins(config_file)[STORE] == {"store": STORE, "package": DIST, "version": ANY}

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "msg.txt").write_text("hello from s3\n")
    bucket = f"{cluster}-data"
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "file_mounts": {
                    "/data": {
                        "name": bucket,
                        "source": str(tmp_path / "data"),
                        "store": "s3",
                        "mode": "COPY",
                        "persistent": False,
                    }
                },
                "run": "cat /data/msg.txt",
            }
        )
    )
    argv = ("skycore.cli", "launch", str(task), "-c", cluster, "-y", "--down")
    launch = run(sys.executable, env, *argv)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "hello from s3" in launch.stdout
    found = warnings_of(launch.stderr)
    assert len(found) == 1, launch.stderr
    (warning,) = found
    assert f"section '{STORE}' is kept but unused" in warning
    assert f"package {DIST}" in warning and f"harness down --store {STORE} --forget" in warning

    data = Path(env["HARNESS_HOME"]) / "rclones3-data"
    assert data.is_dir()
    stop = run(venv_a, env, "harness.cli", "down", "--store", STORE, "--wipe")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"{STORE}: emulator and gate stopped." in stop.stdout
    assert f"{config_file}: kept the section(s) {STORE}" in stop.stdout
    assert f"{STORE}: wiped" in stop.stdout and not data.exists()

    forget = run(sys.executable, env, "harness.cli", "down", "--store", STORE, "--forget")
    assert forget.returncode == 0, forget.stdout + forget.stderr
    assert f"removed the section(s) {STORE}." in forget.stdout
    assert STORE not in yaml.safe_load(config_file.read_text())
    listing = run(sys.executable, env, "skycore.cli", "storage", "ls")
    assert listing.returncode == 0 and warnings_of(listing.stderr) == [], listing.stderr
