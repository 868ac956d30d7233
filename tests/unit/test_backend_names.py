"""A store is its own modules: no other file of skycore/ or harness/ names it.

``grep -rwn NAME skycore harness`` (case-sensitive, whole words, every text file, comments
and docstrings included; compiled caches skipped) may only hit the module of its store class,
the module of its emulator class (as the two registries load them) and the gate protocol its
emulator gives the gate (its module, or the whole package when it has one:
harness/store_gates/gcs/). The conformance suite's fixtures (harness/conformance/fixtures:
the seed's comp_test.yaml and its per-store twins) are data that name stores by design, as
they did in tests/fixtures before the suite moved into the package.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = "harness/conformance/fixtures/"
STORES = ("r2", "gcs", "azure")


def _hits(name: str, tree: str) -> list[str]:
    grep = shutil.which("grep")
    if grep is None:
        pytest.fail("grep is not on PATH")
    result = subprocess.run(
        [grep, "-rwnI", "--exclude-dir=__pycache__", name, tree],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.splitlines()


def _source(cls: type) -> str:
    """The repository path of the module defining ``cls``."""
    return cls.__module__.replace(".", "/") + ".py"


@pytest.mark.parametrize("tree", ["skycore", "harness"])
@pytest.mark.parametrize("name", STORES)
def test_only_the_backends_own_modules_name_it(name: str, tree: str) -> None:
    from harness.emulator_registry import get_emulator_class
    from skycore.storage import get_store_class

    emulator = get_emulator_class(name)
    protocol = _source(type(emulator.gate_protocol()))
    own = {_source(get_store_class(name)), _source(emulator), protocol}
    if emulator.contract_probes:  # the emulator contract's probes of its API
        own.add(emulator.contract_probes.replace(".", "/") + ".py")
    package = str(Path(protocol).parent) + "/"
    in_package = package.startswith("harness/store_gates/") and package.count("/") == 3

    def owned(path: str) -> bool:
        return path in own or (in_package and path.startswith(package)) or path.startswith(FIXTURES)

    strays = [line for line in _hits(name, tree) if not owned(line.split(":", 1)[0])]
    assert not strays, f"'{name}' is named outside its own modules:\n" + "\n".join(strays)
