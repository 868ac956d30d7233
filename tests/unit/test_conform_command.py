"""``harness conform`` where the suite's test dependencies are not installed: one sentence
that names the extra, before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

HIDE_AND_RUN = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None  # import and find_spec see it as not installed
sys.argv = ["harness", "conform", "-y", *{args!r}]
from harness.cli import main
main()
"""


@pytest.mark.parametrize(
    ("hidden", "args", "named"),
    [
        (["pytest"], [], "pytest is not installed"),
        (["xdist"], [], "pytest-xdist is not installed"),
        (["pytest", "xdist"], [], "pytest, pytest-xdist are not installed"),
    ],
)
def test_conform_without_the_test_dependencies_names_the_extra(
    hidden: list[str], args: list[str], named: str
) -> None:
    code = HIDE_AND_RUN.format(hidden=hidden, args=args)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert named in r.stderr, r.stderr
    assert "pip install 'skycore[harness]'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_conform_without_xdist_runs_with_no_workers_asks_no_xdist() -> None:
    """-n 0 needs no pytest-xdist: the check lets it through to the suite's own checks."""
    code = HIDE_AND_RUN.format(hidden=["xdist"], args=["-n", "0", "--store", "no-such-store"])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "pytest-xdist" not in r.stderr, r.stderr
    assert "Unknown store 'no-such-store'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
