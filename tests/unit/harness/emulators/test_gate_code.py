"""The gate's version covers every module the gate process imports: an edit of one of them
restarts a running gate; the emulators' own modules (their test helpers) stay out of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import emulator_registry as registry
from harness.emulators.gate_code import gate_files, gate_version, imported_files

ROOT = Path(harness.__file__).resolve().parents[1]

LOADED = """
import importlib, json, sys
import harness.gate.__main__
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(
    m.__file__ for n, m in list(sys.modules.items())
    if n.split(".")[0] in ("harness", "skycore") and getattr(m, "__file__", None)
)))
"""


def modules_the_gate_loads(protocol_modules: list[str]) -> set[Path]:
    """The harness and skycore modules a fresh process holds after importing the gate's
    entry point and the protocol's modules (before the registry loads the emulators)."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *protocol_modules],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    return {Path(p).resolve() for p in json.loads(done.stdout)}


@pytest.mark.parametrize("store", registry.store_names())
def test_every_module_the_gate_imports_is_in_its_version(store: str) -> None:
    cls = registry.get_emulator_class(store)
    protocol = type(cls.gate_protocol())
    modules = [c.__module__ for c in protocol.__mro__ if c.__module__ != "builtins"]
    listed = set(gate_files(cls))
    missing = modules_the_gate_loads(modules) - listed
    assert not missing, f"the gate imports modules its version leaves out: {sorted(missing)}"


def test_procs_and_the_registry_are_in_it() -> None:
    listed = set(gate_files(registry.get_emulator_class("s3")))
    for module in ("harness/processes.py", "harness/emulator_registry.py"):
        assert (ROOT / module) in listed


def test_the_emulators_test_helpers_are_not() -> None:
    cls = registry.get_emulator_class("s3")
    listed = set(gate_files(cls))
    for module in ("s3.py", "base.py", "fleet.py", "launcher.py"):
        assert (ROOT / "harness" / "emulators" / module) not in listed


def test_an_import_in_a_function_counts_and_one_for_type_checking_only_does_not(
    tmp_path: Path,
) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import hints\n"
        "def f():\n    from . import late\n"
        "from pkg.sub import deep\n"
    )
    for name in ("hints.py", "late.py"):
        (pkg / name).write_text("")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("import pkg.late\n")
    found = {
        p.relative_to(tmp_path).as_posix() for p in imported_files([pkg / "entry.py"], {"pkg": pkg})
    }
    assert found == {
        "pkg/__init__.py",
        "pkg/entry.py",
        "pkg/late.py",
        "pkg/sub/__init__.py",
        "pkg/sub/deep.py",
    }


def test_an_edit_of_the_registry_changes_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = registry.get_emulator_class("s3")
    before = gate_version(cls)
    registry_file = ROOT / "harness" / "emulator_registry.py"
    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"\n# edited\n" if path == registry_file else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert gate_version(cls) != before
