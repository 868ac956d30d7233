"""``harness conform`` where the suite's test dependencies are not installed: one sentence
that names the extra, before anything starts.

One process runs every case in turn (a process start costs more than the cases): the first
case hides pytest and pytest-xdist both, so every module ``harness conform`` imports is
imported with neither installed, as in a process of its own; each case then hides its own
modules, runs the command and shows them again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CASES: dict[str, tuple[list[str], list[str]]] = {
    "pytest and xdist": (["pytest", "xdist"], []),
    "pytest": (["pytest"], []),
    "xdist": (["xdist"], []),
    "xdist with -n 0": (["xdist"], ["-n", "0", "--store", "no-such-store"]),
}
"""Case name -> (modules hidden, arguments after ``harness conform -y``)."""

RUN_CASES = """
import contextlib, io, json, sys, traceback
results = {}
for name, (hidden, args) in json.loads(sys.argv[1]).items():
    for module in hidden:
        sys.modules[module] = None  # import and find_spec see it as not installed
    sys.argv = ["harness", "conform", "-y", *args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            from harness.cli import main
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    for module in hidden:
        del sys.modules[module]
    results[name] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, object]]:
    """{case name: {"code": exit code, "stdout": ..., "stderr": ...}} of every case."""
    r = subprocess.run(
        [sys.executable, "-c", RUN_CASES, json.dumps(CASES)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    found: dict[str, dict[str, object]] = json.loads(r.stdout)
    return found


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("pytest", "pytest is not installed"),
        ("xdist", "pytest-xdist is not installed"),
        ("pytest and xdist", "pytest, pytest-xdist are not installed"),
    ],
)
def test_conform_without_the_test_dependencies_names_the_extra(
    results: dict[str, dict[str, object]], case: str, named: str
) -> None:
    code, stderr = results[case]["code"], str(results[case]["stderr"])
    assert code == 2, f"{results[case]['stdout']}{stderr}"
    assert named in stderr, stderr
    assert "pip install 'skycore[harness]'" in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_conform_without_xdist_runs_with_no_workers_asks_no_xdist(
    results: dict[str, dict[str, object]],
) -> None:
    """-n 0 needs no pytest-xdist: the check lets it through to the suite's own checks."""
    case = results["xdist with -n 0"]
    code, stderr = case["code"], str(case["stderr"])
    assert code == 1, f"{case['stdout']}{stderr}"
    assert "pytest-xdist" not in stderr, stderr
    assert "Unknown store 'no-such-store'" in stderr, stderr
    assert "Traceback" not in stderr, stderr
