"""``harness conform`` where the suite's test dependencies are not installed: one sentence
that names the extra, before anything starts.

One process runs every case in turn (a process start costs more than the cases): the first
case hides pytest and pytest-xdist both, so every module ``harness conform`` imports is
imported with neither installed, as in a process of its own; each case then hides its own
modules, runs the command and shows them again."""

from __future__ import annotations

import pytest

from tests.unit.harness_in_one_process import Result, run_harness

CASES: dict[str, tuple[list[str], list[str]]] = {
    "pytest and xdist": (["pytest", "xdist"], []),
    "pytest": (["pytest"], []),
    "xdist": (["xdist"], []),
    "xdist with -n 0": (["xdist"], ["-n", "0", "--store", "no-such-store"]),
}
"""Case name -> (modules hidden, arguments after ``harness conform -y``)."""


@pytest.fixture(scope="module")
def results() -> dict[str, Result]:
    """{case name: how ``harness conform -y ARGS`` ended} of every case."""
    commands = [(hidden, ["conform", "-y", *args]) for hidden, args in CASES.values()]
    return dict(zip(CASES, run_harness(commands), strict=True))


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("pytest", "pytest is not installed"),
        ("xdist", "pytest-xdist is not installed"),
        ("pytest and xdist", "pytest, pytest-xdist are not installed"),
    ],
)
def test_conform_without_the_test_dependencies_names_the_extra(
    results: dict[str, Result], case: str, named: str
) -> None:
    code, stderr = results[case]["code"], results[case]["stderr"]
    assert code == 2, f"{results[case]['stdout']}{stderr}"
    assert named in stderr, stderr
    assert "pip install 'skycore[harness]'" in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_conform_without_xdist_runs_with_no_workers_asks_no_xdist(
    results: dict[str, Result],
) -> None:
    """-n 0 needs no pytest-xdist: the check lets it through to the suite's own checks."""
    case = results["xdist with -n 0"]
    code, stderr = case["code"], case["stderr"]
    assert code == 1, f"{case['stdout']}{stderr}"
    assert "pytest-xdist" not in stderr, stderr
    assert "Unknown store 'no-such-store'" in stderr, stderr
    assert "Traceback" not in stderr, stderr
