"""The built wheel carries everything skycore and the conformance suite need at run time.

``harness conform`` runs from an installed wheel, far from this checkout, so whatever the
suite reads must travel as package data: the conformance fixtures (comp_test YAMLs, the
workdir and source folders, including comp_source's ``.gitignore`` and its force-added
``logs/run-1.log``), the node programs (skycore/node/*.sh and the mount program's modules)
and the node image recipe (harness/cloud/nodes.py). The wheel is built the way a release
is: with pip, from a clean copy of the files git knows (a stale ``build/`` in the checkout
cannot leak into it). Needs pip and setuptools, no cloud.
"""

from __future__ import annotations

import configparser
import zipfile
from pathlib import Path

import pytest

from tests.wheels import build_wheel, git_files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """skycore's wheel, built once for this module."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def names(wheel: Path) -> set[str]:
    """The file names inside the wheel."""
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def _missing(names: set[str], wanted: list[str]) -> list[str]:
    return [f for f in wanted if f not in names]


def test_the_conformance_fixtures_are_in_the_wheel(names: set[str]) -> None:
    fixtures = git_files("harness/conformance/fixtures")
    for needed in (
        "comp_test.yaml",
        "comp_source/.gitignore",
        "comp_source/logs/run-1.log",
        "comp_workdir/main.py",
    ):
        assert f"harness/conformance/fixtures/{needed}" in fixtures, needed
    assert not _missing(names, fixtures)


def test_the_suite_and_its_node_side_are_in_the_wheel(names: set[str]) -> None:
    node_programs = git_files("skycore/node")
    assert any(f.endswith(".sh") for f in node_programs)
    assert any(f.startswith("skycore/node/mountd/") for f in node_programs)
    assert not _missing(names, node_programs)
    suite = git_files("harness/conformance")
    assert any(Path(f).name.startswith("test_") for f in suite)
    assert not _missing(names, suite)
    assert "harness/cloud/nodes.py" in names  # the node image recipe
    assert {"harness/py.typed", "skycore/py.typed"} <= names


def test_every_file_of_the_packages_is_in_the_wheel_and_nothing_else(names: set[str]) -> None:
    assert not _missing(names, git_files("skycore", "harness"))
    (dist_info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    strays = sorted(n for n in names if n.split("/")[0] not in ("skycore", "harness", dist_info))
    assert not strays, strays  # no tests/, build/ or docs/ in the wheel
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_declares_the_entry_points(wheel: Path, names: set[str]) -> None:
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    with zipfile.ZipFile(wheel) as z:
        parser.read_string(z.read(entry_points).decode())
    assert set(parser["console_scripts"]) == {"skycore", "harness"}
    assert {"s3", "gcs", "azure", "r2"} <= set(parser["skycore.stores"])
    assert {"s3", "gcs", "azure", "r2"} <= set(parser["harness.emulators"])
    assert dict(parser["pytest11"]) == {"harness.testing.plugin": "harness.testing.plugin"}
