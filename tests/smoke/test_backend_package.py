"""An outside storage backend, as a developer would ship it: the package under
tests/fixtures/backend_pkg (one store module, one emulator module, two entry-point lines) is
installed into a throw-away folder, discovered through its entry points alone, and the mount
matrix runs on it with ``pytest tests/smoke --store wasabi``.

It runs in the all-stores run (no --store given); selecting stores leaves it out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.testing.plugin import explicit_store_selection

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tests" / "fixtures" / "backend_pkg"
STORE = "wasabi"

pytestmark = pytest.mark.xdist_group("backend-package")


@pytest.fixture(scope="module")
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The package installed into a throw-away folder (never into the test venv); its
    emulator is stopped afterwards."""
    if explicit_store_selection(request.config):
        pytest.skip("the backend-package test runs only when no --store is given (all stores)")
    target = tmp_path_factory.mktemp("backend-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(PACKAGE)],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    yield target
    _python(
        target, f"from harness.emulators.fleet import stop_one; stop_one({STORE!r})", check=False
    )


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _python(site: Path, code: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(site),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_the_package_is_discovered_through_its_entry_points(site: Path) -> None:
    out = _python(
        site,
        "from skycore.storage import store_names, parse_url\n"
        "from skycore.task import Task\n"
        "from harness.emulators.registry import store_names as emulator_names\n"
        "print(store_names()); print(emulator_names())\n"
        "print(parse_url('wasabi://b/p'))\n"
        "t = Task.from_dict({'file_mounts': {'/d': {'name': 'abc', 'store': 'wasabi'}}})\n"
        "print(t.storage_mounts['/d'].store)\n",
    ).stdout.splitlines()
    assert STORE in out[0] and STORE in out[1]
    assert out[2:] == ["wasabi://b/p", "wasabi"]
    # Without the package the store does not exist: a clear error, never a fallback.
    here = subprocess.run(
        [sys.executable, "-c", "from skycore.storage import get_store_class as g; g('wasabi')"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert here.returncode != 0 and "unknown store 'wasabi'" in here.stderr


@pytest.mark.cloud  # the smoke tests it runs need the local cloud
def test_the_mount_matrix_runs_on_the_package(site: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/smoke/test_mount_matrix.py", "--store", STORE,
         "-p", "no:cacheprovider", "-n", "0", "-q", "-rA"],
        env=_env(site),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )  # fmt: skip
    tail = r.stdout[-4000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    summary = r.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 12, summary  # 3 modes x 4 bucket kinds
    assert not re.search(r"\d+ (failed|error|skipped)", summary), summary
    cases = [line for line in r.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(cases) == int(passed.group(1)), tail
    assert all(f"[{STORE}-" in line for line in cases), tail  # every case ran on the package
