"""skycore's wheel built the way a release is: with pip, from a clean copy of the files git
knows (a stale ``build/`` in the checkout cannot leak into it). For the tests that read the
wheel (tests/integration/test_package_data.py) and those that install it
(tests/smoke/test_backend_package.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("skycore", "harness", "pyproject.toml")
"""What the wheel is built from (pyproject.toml's packages and its own metadata)."""


def git_files(*paths: str) -> list[str]:
    """The files git tracks, or would track (untracked but not ignored), under ``paths``
    (relative POSIX paths; files deleted from the working tree are left out)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted({f for f in out.split("\0") if f and (REPO / f).is_file()})


def build_wheel(dest: Path) -> Path:
    """Build skycore's wheel into ``dest`` from a clean copy of the sources; return its path."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("building the wheel from the files git knows needs git and a checkout")
    src = dest / "src"
    for name in git_files(*SOURCES):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    out = dest / "wheel"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("skycore-*.whl")
    return wheel
